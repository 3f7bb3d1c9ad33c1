"""Equality that cannot be forged by an object.

Every comparison (`==`, `!=`, `<`, `in`, ...) in a test module, after pytest's assertion rewriting, passes each
operand through `checked`, which asks the operand (and the items of lists, tuples, sets and dicts in it, and the
attributes of instances) whether it equals things nothing honest equals (a fresh object, a random number, a random
string); unittest's equality and ordering asserts do the same. An operand that agrees is evidence and fails the
test: a solution returning an always-equal object would otherwise pass every equality assert. Cached bytecode of
test modules is never read, so every test module goes through the rewrite.
"""

import ast
import functools
import itertools
import operator
import os
import random
import types
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import pytest

STRICT_ALIAS = "@soak_strict"
"""The name the rewritten test modules reach `checked` by ('@' keeps it out of reach of test code)."""
Witness = Callable[[list[str]], None]
"""Takes evidence to the harness (the recorder's `tampered`)."""


class ForgedComparison(AssertionError):
    """A compared value claims to equal what nothing honest equals."""


PLAIN_TYPES = frozenset({int, float, str, bytes, bool, type(None), complex, range, type, types.FunctionType})
CONTAINERS = (list, tuple, set, frozenset)
COMPARISONS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
PROBE_OBJECT = object()
PROBE_INT = random.SystemRandom().getrandbits(62) + (1 << 62)
PROBE_STR = f"soak-probe-{random.SystemRandom().getrandbits(64):x}"
EXACT_CONTAINERS = frozenset({list, tuple, set, frozenset})
CHECK_BUDGET = 1_000_000
"""Items looked at per operand, and levels of nesting: deeper or bigger values are checked only so far."""
MAX_DEPTH = 8
PROBED = 10_000
"""Instances of one non-builtin type probed per level."""
_builtin_comparisons: dict[type, bool] = {}
_witness: Witness | None = None


HEAP_TYPE = 1 << 9
"""Py_TPFLAGS_HEAPTYPE: a class made at run time (by `class`), as opposed to a static type of the interpreter."""


def builtin_comparisons(kind: type) -> bool:
    """Whether every comparison of `kind` is a static (C) type's own: such a comparison forges nothing itself, only
    through the items it compares."""
    known = _builtin_comparisons.get(kind)
    if known is not None:
        return known
    honest = True
    for name in COMPARISONS:
        owner = next((base for base in kind.__mro__ if name in base.__dict__), object)
        honest = honest and not owner.__flags__ & HEAP_TYPE
    if not kind.__flags__ & HEAP_TYPE:  # Static (C) types cannot change later; classes can, so are never cached.
        _builtin_comparisons[kind] = honest
    return honest


TEST_WILDCARDS: set[int] = set()
"""Ids of the always-equal objects the task's own tests use (unittest.mock.ANY in `call(None, ANY)`): the test
file says so, not the solution, and then that one object compares as the tests mean it to."""


def every_node(tree: ast.AST) -> list[ast.AST]:
    """Every node of a tree, by a plain walk: ast.walk, or a NodeTransformer, cost about as much again as pytest's own
    rewrite of a test module, and a test module is walked twice."""
    found: list[ast.AST] = []
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.AST):
            continue
        found.append(node)
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, ast.AST):
                stack.append(value)
    return found


def uses_mock_any(mod: ast.Module) -> bool:
    """Whether a test module uses unittest.mock's ANY (imported by name, or as `mock.ANY`)."""
    for node in every_node(mod):
        if (isinstance(node, ast.ImportFrom) and node.module in ("unittest.mock", "mock")
                and any(alias.name == "ANY" for alias in node.names)):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "ANY":
            return True
    return False


def allow_mock_any() -> None:
    from unittest import mock

    TEST_WILDCARDS.add(id(mock.ANY))


def agrees_with_anything(value: object) -> bool:
    """Whether `value` claims equality (or order) with probes no honest value equals."""
    if id(value) in TEST_WILDCARDS:
        return False
    try:
        if bool(value == PROBE_OBJECT) or not bool(value != PROBE_OBJECT):
            return True
        if bool(value == PROBE_INT) or bool(value == PROBE_STR):
            return True
    except Exception:
        return False
    try:
        return bool(value < PROBE_OBJECT) or bool(value > PROBE_OBJECT)  # type: ignore[operator]
    except Exception:
        return False


def members(level: list[object], kind: type) -> Iterator[object]:
    """The objects of `level` whose type is exactly `kind`, picked at C speed."""
    return itertools.compress(level, map(operator.is_, map(type, level), itertools.repeat(kind)))


def forged_part(value: object, deep: bool = True) -> object | None:
    """The first object inside `value` (itself, an item of its lists, tuples, sets and dicts, an attribute of an
    instance) that agrees with anything; None when there is none within the budget. Not `deep`: only `value`.

    Level by level, by type: items of builtin types cost a C-speed pass, only instances of other types are probed."""
    level, budget = [value], CHECK_BUDGET
    for _ in range(MAX_DEPTH):
        kinds = set(map(type, level))
        deeper: list[object] = []
        for kind in kinds - PLAIN_TYPES - EXACT_CONTAINERS - {dict}:
            honest = builtin_comparisons(kind)
            for item in itertools.islice(members(level, kind), PROBED):
                if not honest and agrees_with_anything(item):
                    return item
                if deep and not honest and kind.__flags__ & HEAP_TYPE and not isinstance(item, type | types.ModuleType):
                    # Its own equality may compare its attributes (a dataclass does), or its items.
                    deeper.extend(attributes(item).values())
                    if isinstance(item, CONTAINERS):
                        deeper.extend(itertools.islice(item, budget))
                    elif isinstance(item, dict):
                        deeper.extend(itertools.chain.from_iterable(itertools.islice(item.items(), budget)))
        if not deep:
            return None
        for kind in kinds & EXACT_CONTAINERS:
            deeper.extend(itertools.chain.from_iterable(cast("Iterator[Iterable[object]]", members(level, kind))))
        if dict in kinds:
            deeper.extend(itertools.chain.from_iterable(itertools.chain.from_iterable(
                map(dict.items, cast("Iterator[dict[object, object]]", members(level, dict))))))
        budget -= len(deeper)
        if not deeper or budget < 0:
            return None
        level = deeper
    return None


def describe(value: object) -> str:
    kind = type(value)
    code = getattr(getattr(kind, "__eq__", None), "__code__", None)
    where = f", __eq__ at {os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else ""
    return f"{kind.__module__}.{kind.__qualname__}{where}"


def checked(value: object, deep: bool = True) -> object:
    """`value` unchanged, unless it (or a part of it) agrees with anything: then evidence, and the test fails."""
    kind = type(value)
    if kind in PLAIN_TYPES or kind in EXACT_CONTAINERS and PLAIN_TYPES.issuperset(
            map(type, cast("Iterable[object]", value))):
        return value
    forged = forged_part(value, deep)
    if forged is not None:
        report_forged(forged, "equals anything")
    return value


def report_forged(value: object, claim: str) -> None:
    evidence = f"a compared value {claim}: {describe(value)}"
    if _witness is not None:
        _witness([evidence])
    raise ForgedComparison(f"soak: {evidence}")


def checked_in(value: object) -> object:
    """The right operand of `in`: its items matter only where `in` compares them with the left one (lists and
    tuples); any other container may answer `in` itself."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        return value
    sequence = isinstance(value, list | tuple) and type(value).__contains__ in (list.__contains__, tuple.__contains__)
    if not sequence and not builtin_contains(kind):
        try:
            claims = bool(PROBE_OBJECT in value)  # type: ignore[operator]
        except Exception:
            claims = False
        if claims:
            report_forged(value, "contains anything")
    return checked(value, deep=sequence)


def builtin_contains(kind: type) -> bool:
    owner = next((base for base in kind.__mro__ if "__contains__" in base.__dict__), object)
    return not owner.__flags__ & HEAP_TYPE


def strict_compares(mod: ast.Module) -> None:
    """Route each operand of every comparison but `is` through `checked`, in place. The nodes are gathered first: a
    comparison inside an operand is wrapped where it stands, whatever the order."""
    for node in every_node(mod):
        if not isinstance(node, ast.Compare) or all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            continue
        node.left = strict_call(node.left, "checked")
        node.comparators = [strict_call(part, "checked_in" if isinstance(op, ast.In | ast.NotIn) else "checked")
                            for op, part in zip(node.ops, node.comparators, strict=True)]


def strict_call(expr: ast.expr, check: str) -> ast.expr:
    name = ast.copy_location(ast.Name(STRICT_ALIAS, ast.Load()), expr)
    func = ast.copy_location(ast.Attribute(name, check, ast.Load()), expr)
    return ast.copy_location(ast.Call(func, [expr], []), expr)


def strict_module(mod: ast.Module) -> None:
    """Make a (rewritten) test module's comparisons strict and import this module under STRICT_ALIAS."""
    strict_compares(mod)
    position = 0
    for position, node in enumerate(mod.body):  # noqa: B007 - after the docstring and __future__ imports
        docstring = position == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
    else:
        position = len(mod.body)
    line = mod.body[position].lineno if position < len(mod.body) else 1
    where = {"lineno": line, "col_offset": 0, "end_lineno": line, "end_col_offset": 0}
    mod.body.insert(position, ast.Import([ast.alias(__name__, STRICT_ALIAS, **where)], **where))


UNITTEST_CHECKED = (
    "assertEqual", "assertNotEqual", "assertListEqual", "assertTupleEqual", "assertSetEqual", "assertDictEqual",
    "assertSequenceEqual", "assertMultiLineEqual", "assertCountEqual", "assertIn", "assertNotIn", "assertAlmostEqual",
    "assertNotAlmostEqual", "assertGreater", "assertGreaterEqual", "assertLess", "assertLessEqual",
    "assertEquals", "assertNotEquals", "assertAlmostEquals", "assertNotAlmostEquals", "failUnlessEqual",
    "failIfEqual", "failUnlessAlmostEqual", "failIfAlmostEqual",
)


def strict_assert(original: Callable[..., object]) -> Callable[..., object]:
    container = original.__name__ in ("assertIn", "assertNotIn")

    @functools.wraps(original)
    def method(self: object, first: object, second: object, *args: object, **kwargs: object) -> object:
        checked(first)
        checked_in(second) if container else checked(second)
        return original(self, first, second, *args, **kwargs)

    method.__soak_strict__ = True  # type: ignore[attr-defined]
    return method


def install_strict_equality(witness: Witness) -> None:
    """Before any test module is imported: strict comparisons in rewritten test modules, no cached bytecode, strict
    unittest asserts; evidence goes to `witness`."""
    import unittest

    global _witness
    _witness = witness

    from _pytest.assertion import rewrite

    original = rewrite.rewrite_asserts

    def rewrite_asserts(mod: ast.Module, source: bytes, module_path: str | None = None,
                        config: "pytest.Config | None" = None) -> None:
        if uses_mock_any(mod):
            allow_mock_any()
        original(mod, source, module_path, config)
        strict_module(mod)

    rewrite.rewrite_asserts = rewrite_asserts
    rewrite._read_pyc = lambda *args, **kwargs: None
    case = unittest.TestCase
    for name in UNITTEST_CHECKED:
        method = case.__dict__.get(name)
        if callable(method) and not getattr(method, "__soak_strict__", False):
            setattr(case, name, strict_assert(method))


def attributes(obj: object) -> dict[str, object]:
    """An object's instance attributes, from its `__dict__` and its classes' `__slots__`."""
    own = getattr(obj, "__dict__", None)
    found = dict(own) if isinstance(own, dict) else {}  # a class may define a method named __dict__ (pov's Tree)
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found[name] = getattr(obj, name)
    return found

