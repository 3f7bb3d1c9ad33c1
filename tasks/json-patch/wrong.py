import copy
import re
from typing import Any

_INDEX = re.compile(r"0|[1-9][0-9]*")
_MISSING = object()


class PatchError(ValueError):
    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"operation {index}: {message}")
        self.index = index


class _Fail(Exception):
    """Raised internally; apply_patch turns it into a PatchError carrying the operation index."""


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise _Fail(f"pointer must be a string, got {pointer!r}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _Fail(f"pointer {pointer!r} must start with '/'")
    tokens = []
    for raw in pointer[1:].split("/"):
        if re.search(r"~(?![01])", raw):
            raise _Fail(f"bad escape in pointer {pointer!r}")
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    return tokens


def _array_index(array: list, token: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(array)
    if not _INDEX.fullmatch(token):
        raise _Fail(f"{token!r} is not an array index")
    index = int(token)
    if index > len(array) or (index == len(array) and not allow_end):
        raise _Fail(f"index {index} out of range")
    return index


def _child(container: Any, token: str) -> Any:
    if isinstance(container, dict):
        if token not in container:
            raise _Fail(f"no member {token!r}")
        return container[token]
    if isinstance(container, list):
        return container[_array_index(container, token, allow_end=False)]
    raise _Fail(f"cannot look up {token!r} in a {type(container).__name__}")


def _walk(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = _child(doc, token)
    return doc


def resolve_pointer(doc: Any, pointer: str) -> Any:
    try:
        return _walk(doc, _tokens(pointer))
    except _Fail as error:
        raise PatchError(str(error)) from None


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_array_index(parent, last, allow_end=True), value)
    else:
        raise _Fail(f"cannot add {last!r} to a {type(parent).__name__}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _Fail("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    value = _child(parent, tokens[-1])
    if isinstance(parent, dict):
        del parent[tokens[-1]]
    else:
        del parent[int(tokens[-1])]
    return value


def _member(operation: dict, name: str) -> Any:
    value = operation.get(name, _MISSING)
    if value is _MISSING:
        raise _Fail(f"missing {name!r}")
    return value


def _apply_one(doc: Any, operation: Any) -> Any:
    if not isinstance(operation, dict):
        raise _Fail("an operation must be an object")
    op = operation.get("op")
    path = _tokens(_member(operation, "path"))
    if op == "add":
        return _add(doc, path, copy.deepcopy(_member(operation, "value")))
    if op == "remove":
        _remove(doc, path)
        return doc
    if op == "replace":
        value = copy.deepcopy(_member(operation, "value"))
        if not path:
            return value
        _remove(doc, path)
        return _add(doc, path, value)
    if op == "move":
        source = _tokens(_member(operation, "from"))
        if source == path:
            _walk(doc, source)
            return doc
        if path[: len(source)] == source:
            raise _Fail("cannot move a value into its own child")
        return _add(doc, path, _remove(doc, source))
    if op == "copy":
        source = _tokens(_member(operation, "from"))
        return _add(doc, path, copy.deepcopy(_walk(doc, source)))
    if op == "test":
        expected = _member(operation, "value")
        if _walk(doc, path) != expected:
            raise _Fail("test failed")
        return doc
    raise _Fail(f"unknown op {op!r}")


def apply_patch(doc: Any, patch: list[dict]) -> Any:
    if not isinstance(patch, list):
        raise PatchError("a patch must be a list of operations")
    result = copy.deepcopy(doc)
    for index, operation in enumerate(patch):
        try:
            result = _apply_one(result, operation)
        except _Fail as error:
            raise PatchError(str(error), index) from None
    return result
