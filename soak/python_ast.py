"""`ast.parse` behind one lock: CPython 3.11's AST constructor keeps a recursion counter that two threads parsing at
once corrupt ("SystemError: AST constructor recursion depth mismatch"), and soak parses in the judge's threads."""

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    with _LOCK:
        return ast.parse(source)
