"""Pytest plugin loaded inside the sandbox: it streams what happens to the harness and watches for tampering.

The harness loads it with `-p soak.sandbox.plugin --soak-channel FD`, FD being one end of a socket pair the harness
holds the other end of. Before any test module (and so the solution) is imported, the plugin reads a per-run secret
from the socket (the harness wrote it there first, so it is gone from the socket before the solution runs), makes
the descriptor non-inheritable, and from then on writes one authenticated line per event: the session started, the
collection finished (node ids and a fingerprint of each test function's code), a collection error, a test began, a
phase's report, evidence of tampering, the session finished with its exit status. Lines are numbered and carry an
HMAC under the secret, so the harness knows what the recorder wrote, in which order; nothing written into the
workspace is trusted any more.

Tamper detection, in the act:

- At session start (the solution not yet imported) it freezes the plugin registry, every hook's implementations,
  and the identities (and `__code__`, defaults) of the callables pytest judges with: `pytest`, `_pytest.*`,
  `pluggy.*`, `unittest.*`, this module, `builtins`, `os`, `math`, `operator`, `atexit`, `sys.exit`, the trace and
  profile hooks and `sys.meta_path`. After the collection it adds the test modules' own functions and classes and
  the collected test functions. It compares after the collection, after every test and at session end; any change is
  sent as evidence (what changed, and where the new object was defined).
- Equality that cannot be forged by an object: every comparison (`==`, `!=`, `<`, `in`, ...) in a test module, after
  pytest's assertion rewriting, passes each operand through `checked`, which asks the operand (and the items of
  lists, tuples, sets and dicts in it) whether it equals things nothing honest equals (a fresh object, a random
  number, a random string); unittest's equality and ordering asserts do the same. An operand that agrees is
  evidence and fails the test. Cached bytecode of test modules is never read.

What it cannot do is stop a solution that knows this plugin and rewrites the checker and its channel consistently
from inside the same interpreter (see the README's sandbox section); the harness cross-checks what it can from the
outside (soak.sandbox.judge).
"""

import ast
import builtins
import errno
import functools
import hashlib
import hmac
import itertools
import json
import math
import operator
import os
import random
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator

import pytest

TAIL_LINES = 200
"""Lines of each traceback kept in an event; the harness trims further."""
SECRET_BYTES = 32
"""As soak.sandbox.judge.SECRET_BYTES."""
STRICT_ALIAS = "@soak_strict"
"""The name the rewritten test modules reach `checked` by ('@' keeps it out of reach of test code)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak-channel", default=None, help="Stream soak's test events to this inherited descriptor.")


def pytest_configure(config: pytest.Config) -> None:
    fd = config.getoption("soak_channel")
    if fd is not None:
        channel = Channel(int(fd))
        install_strict_equality()
        config.pluginmanager.register(ResultRecorder(config, channel), "soak-recorder")


# --- the channel -----------------------------------------------------------------------------------------------------


class Channel:
    """The write side of the harness's socket: numbered lines, each with an HMAC under the run's secret."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_inheritable(fd, False)
        secret = b""
        while len(secret) < SECRET_BYTES:
            chunk = os.read(fd, SECRET_BYTES - len(secret))
            if not chunk:
                raise RuntimeError("soak: the result channel closed before its secret arrived")
            secret += chunk
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        self.seq = 0
        self.lock = threading.Lock()

    def send(self, event: str, **fields: object) -> None:
        with self.lock:
            payload = json.dumps({"seq": self.seq, "event": event, **fields}, separators=(",", ":"))
            self.seq += 1
            mac = self._mac.copy()
            mac.update(payload.encode())
            data = f"{mac.hexdigest()} {payload}\n".encode()
            while data:
                try:
                    data = data[os.write(self.fd, data):]
                except OSError:
                    return  # The harness reads a missing event as what it is.


# --- feedback text -------------------------------------------------------------------------------------------------


def error_kind(error: BaseException) -> str:
    """The exception's type name, unwrapped from pytest's collection wrapper and folded into the kinds that matter."""
    if isinstance(error, pytest.Collector.CollectError) and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, SyntaxError):
        return "SyntaxError"
    if isinstance(error, ImportError):
        return "ImportError"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "FileTooLarge"
    return type(error).__name__


INTERNAL_FRAME = re.compile(r"^(<frozen importlib\.|\S*/(_pytest|pluggy|importlib)/\S*:\d+: in )")
"""A `--tb=short` frame line inside pytest or the import machinery: noise in feedback to a model."""


def without_internal_frames(text: str) -> list[str]:
    kept, skipping = [], False
    for line in text.splitlines():
        if INTERNAL_FRAME.match(line):
            skipping = True
        elif line.startswith("Hint: make sure your test modules"):
            continue
        elif not skipping or not line.startswith(" "):
            skipping = False
            kept.append(line)
    return kept


def short_tail(text: str) -> str:
    return "\n".join(without_internal_frames(text)[-TAIL_LINES:])


# --- equality no operand can forge ---------------------------------------------------------------------------------


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
_recorder: "ResultRecorder | None" = None


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


def uses_mock_any(mod: ast.Module) -> bool:
    """Whether a test module uses unittest.mock's ANY (imported by name, or as `mock.ANY`)."""
    for node in ast.walk(mod):
        mock_import = isinstance(node, ast.ImportFrom) and node.module in ("unittest.mock", "mock")
        if mock_import and any(alias.name == "ANY" for alias in node.names):
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


def members(level: list, kind: type) -> Iterator:
    """The objects of `level` whose type is exactly `kind`, picked at C speed."""
    return itertools.compress(level, map(operator.is_, map(type, level), itertools.repeat(kind)))


def forged_part(value: object, deep: bool = True) -> object | None:
    """The first object inside `value` (itself, an item of its lists, tuples, sets and dicts, an attribute of an
    instance) that agrees with anything; None when there is none within the budget. Not `deep`: only `value`.

    Level by level, by type: items of builtin types cost a C-speed pass, only instances of other types are probed."""
    level, budget = [value], CHECK_BUDGET
    for _ in range(MAX_DEPTH):
        kinds = set(map(type, level))
        deeper: list = []
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
            deeper.extend(itertools.chain.from_iterable(members(level, kind)))
        if dict in kinds:
            deeper.extend(itertools.chain.from_iterable(itertools.chain.from_iterable(
                map(dict.items, members(level, dict)))))
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
    if kind in PLAIN_TYPES or kind in EXACT_CONTAINERS and PLAIN_TYPES.issuperset(map(type, value)):
        return value
    forged = forged_part(value, deep)
    if forged is not None:
        report_forged(forged, "equals anything")
    return value


def report_forged(value: object, claim: str) -> None:
    evidence = f"a compared value {claim}: {describe(value)}"
    if _recorder is not None:
        _recorder.tampered([evidence])
    raise ForgedComparison(f"soak: {evidence}")


def checked_in(value: object) -> object:
    """The right operand of `in`: its items matter only where `in` compares them with the left one (lists and
    tuples); any other container may answer `in` itself."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        return value
    sequence = isinstance(value, list | tuple) and kind.__contains__ in (list.__contains__, tuple.__contains__)
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


class StrictCompares(ast.NodeTransformer):
    """Routes each operand of every comparison but `is` through `checked`."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            return node
        node.left = self.wrap(node.left, "checked")
        node.comparators = [self.wrap(part, "checked_in" if isinstance(op, ast.In | ast.NotIn) else "checked")
                            for op, part in zip(node.ops, node.comparators, strict=True)]
        return node

    @staticmethod
    def wrap(expr: ast.expr, check: str) -> ast.expr:
        name = ast.copy_location(ast.Name(STRICT_ALIAS, ast.Load()), expr)
        func = ast.copy_location(ast.Attribute(name, check, ast.Load()), expr)
        return ast.copy_location(ast.Call(func, [expr], []), expr)


def strict_module(mod: ast.Module) -> None:
    """Make a (rewritten) test module's comparisons strict and import this module under STRICT_ALIAS."""
    StrictCompares().visit(mod)
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


def strict_assert(original: Callable) -> Callable:
    container = original.__name__ in ("assertIn", "assertNotIn")

    @functools.wraps(original)
    def method(self, first, second, *args, **kwargs):
        checked(first)
        checked_in(second) if container else checked(second)
        return original(self, first, second, *args, **kwargs)

    method.__soak_strict__ = True  # type: ignore[attr-defined]
    return method


def install_strict_equality() -> None:
    """Before any test module is imported: strict comparisons in rewritten test modules, no cached bytecode, strict
    unittest asserts."""
    import unittest

    from _pytest.assertion import rewrite

    original = rewrite.rewrite_asserts

    def rewrite_asserts(mod, source, module_path=None, config=None) -> None:
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


# --- freezing what judges ------------------------------------------------------------------------------------------

FROZEN_PREFIXES = ("pytest", "_pytest", "pluggy", "unittest")
FROZEN_MODULES = (builtins, os, math, operator)
FROZEN_ATTRS = ((sys, "exit"), (sys, "settrace"), (sys, "setprofile"))
VOLATILE = {"_pytest.assertion.util": {"_reprcompare", "_assertion_pass", "_config"}}
"""Module globals pytest itself sets while tests run."""
Snapshot = dict[tuple[str, ...], object]


def judging_kind(value: object) -> bool:
    """Whether a module or class attribute is behaviour (frozen) rather than data (free to change)."""
    return callable(value) or isinstance(value, types.ModuleType | property | classmethod | staticmethod)


def function_parts(key: tuple[str, ...], value: object) -> Iterator[tuple[tuple[str, ...], object]]:
    if isinstance(value, classmethod | staticmethod):
        yield key + ("__func__",), value.__func__
        value = value.__func__
    if isinstance(value, property):
        for part in ("fget", "fset", "fdel"):
            inner = getattr(value, part)
            if inner is not None:
                yield key + (part,), inner
                yield from function_parts(key + (part,), inner)
    if isinstance(value, types.FunctionType):
        yield key + ("__code__",), value.__code__
        yield key + ("__defaults__",), value.__defaults__
        yield key + ("__kwdefaults__",), value.__kwdefaults__


def freeze_namespace(
    snap: Snapshot, prefix: tuple[str, ...], namespace: dict, owner: str, classes: set[int], only_own: bool = False
) -> None:
    for name, value in list(namespace.items()):
        if name in VOLATILE.get(owner, ()) or not judging_kind(value):
            continue
        if only_own and getattr(value, "__module__", None) != owner:
            continue
        key = prefix + (name,)
        snap[key] = value
        snap.update(function_parts(key, value))
        if isinstance(value, type) and value.__module__ == owner and id(value) not in classes:
            classes.add(id(value))
            for attr, member in list(vars(value).items()):
                if judging_kind(member):
                    snap[key + (attr,)] = member
                    snap.update(function_parts(key + (attr,), member))


def freeze_modules(modules: list[types.ModuleType]) -> Snapshot:
    snap: Snapshot = {}
    classes: set[int] = set()
    for module in modules:
        snap[("sys.modules", module.__name__)] = sys.modules.get(module.__name__)
        freeze_namespace(snap, (module.__name__,), vars(module), module.__name__, classes)
    for owner, name in FROZEN_ATTRS:
        snap[(owner.__name__, name)] = getattr(owner, name, None)
    snap[("sys", "gettrace()")] = sys.gettrace()
    snap[("sys", "getprofile()")] = sys.getprofile()
    snap[("threading", "settrace")] = getattr(threading, "_trace_hook", None)
    snap[("threading", "setprofile")] = getattr(threading, "_profile_hook", None)
    snap[("sys", "meta_path")] = tuple(sys.meta_path)
    return snap


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


def freeze_registry(pm: pytest.PytestPluginManager) -> Snapshot:
    snap: Snapshot = {("pluginmanager", "plugins"): tuple(sorted((str(n), id(p)) for n, p in pm.list_name_plugin()))}
    freeze_namespace(snap, ("pluginmanager",), attributes(pm), "", set())
    freeze_namespace(snap, ("pluginmanager", "hook"), attributes(pm.hook), "", set())
    for name, caller in list(attributes(pm.hook).items()):
        freeze_namespace(snap, ("hook", name), attributes(caller), "", set())
        for impl in caller.get_hookimpls():
            key = ("hook", name, f"{impl.plugin_name}")
            while key in snap:  # Two implementations under one plugin name are two entries.
                key = key[:2] + (key[2] + "+",)
            snap[key] = (impl.function, impl.plugin, impl.wrapper, impl.hookwrapper, impl.tryfirst, impl.trylast,
                         tuple(impl.argnames))
            snap.update(function_parts(key, impl.function))
    return snap


def origin(value: object) -> str:
    """Where an object that replaced a frozen one was defined, when it tells."""
    for candidate in (value, getattr(value, "__func__", None), getattr(value, "function", None)):
        code = getattr(candidate, "__code__", None)
        if isinstance(code, types.CodeType):
            return f" (now {getattr(candidate, '__qualname__', '?')} from {os.path.basename(code.co_filename)})"
        if isinstance(candidate, types.CodeType):
            return f" (now code from {os.path.basename(candidate.co_filename)}:{candidate.co_firstlineno})"
    return ""


def same(before: object, after: object) -> bool:
    """Identity, element by element for the tuples a snapshot builds afresh (names and ids compare by value)."""
    if isinstance(before, tuple) and isinstance(after, tuple) and type(before) is type(after) is tuple:
        return len(before) == len(after) and all(same(a, b) for a, b in zip(before, after, strict=True))
    if type(before) in (str, int, bool) and type(after) is type(before):
        return before == after
    return before is after


def differences(before: Snapshot, after: Snapshot, limit: int = 12) -> list[str]:
    found = []
    for key, value in before.items():
        if key not in after:
            found.append(f"removed: {'.'.join(key)}")
        elif not same(value, after[key]):
            new = after[key]
            if key[0] == "hook" and isinstance(new, tuple):
                new = new[0]
            found.append(f"changed: {'.'.join(key)}{origin(new)}")
    for key in after.keys() - before.keys():
        # New module-level names are harmless; a new member of a class or a new hook implementation is not.
        if len(key) > 2 or key[0] in ("hook", "pluginmanager"):
            found.append(f"added: {'.'.join(key)}{origin(after[key])}")
    return sorted(found)[:limit]


# --- fingerprints of the test code -----------------------------------------------------------------------------------


def stable(value: object) -> str:
    if isinstance(value, types.CodeType):
        return code_print(value)
    if isinstance(value, tuple):
        return "(" + ",".join(stable(v) for v in value) + ")"
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(stable(v) for v in value)) + "}"
    return repr(value)


def code_print(code: types.CodeType) -> str:
    """A fingerprint of a code object, stable across processes (names, bytecode, constants, nested code)."""
    digest = hashlib.sha256()
    for part in (code.co_name, str(code.co_firstlineno), repr(code.co_names), repr(code.co_varnames),
                 code.co_code.hex(), stable(code.co_consts)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def item_function(item: pytest.Item) -> object:
    function = getattr(item, "obj", None)
    return getattr(function, "__func__", function)


def item_code(item: pytest.Item) -> types.CodeType | None:
    code = getattr(item_function(item), "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def test_modules(items: list[pytest.Item]) -> list[types.ModuleType]:
    modules: dict[int, types.ModuleType] = {}
    for item in items:
        module = getattr(item, "module", None)
        if isinstance(module, types.ModuleType):
            modules[id(module)] = module
    return list(modules.values())


def module_problems(module: types.ModuleType) -> list[str]:
    """Names a test module's rewritten code relies on, rebound (e.g. by a star import with a forged __all__)."""
    from _pytest.assertion import rewrite

    expected = {STRICT_ALIAS: sys.modules[__name__], "@py_builtins": builtins, "@pytest_ar": rewrite}
    problems = [f"{module.__name__}: {name} rebound" for name, value in expected.items()
                if name in vars(module) and vars(module)[name] is not value]
    if vars(module).get("__builtins__") not in (builtins, vars(builtins)):
        problems.append(f"{module.__name__}: __builtins__ rebound")
    return problems


# --- the recorder ----------------------------------------------------------------------------------------------------


class ResultRecorder:
    """Streams events as pytest reports them and checks the frozen state at every step."""

    def __init__(self, config: pytest.Config, channel: Channel) -> None:
        global _recorder
        self.config = config
        self.channel = channel
        self.base: Snapshot = {}
        self.tests: Snapshot = {}
        self.modules: list[types.ModuleType] = []
        self.registry: Snapshot = {}
        self.items: list[pytest.Item] = []
        self.reported: set[str] = set()
        self.collected = False
        # Bound now: a solution that rebinds this module's functions does not redirect the recorder's own calls.
        self._freeze_modules, self._freeze_registry, self._differences = freeze_modules, freeze_registry, differences
        _recorder = self

    def tampered(self, evidence: list[str]) -> None:
        fresh = [line for line in evidence if line not in self.reported]
        if fresh:
            self.reported.update(fresh)
            self.channel.send("tampered", evidence=fresh)

    def snapshot(self) -> Snapshot:
        snap = self._freeze_modules(self.modules)
        snap.update(self._freeze_registry(self.config.pluginmanager))
        return snap

    def test_snapshot(self, items: list[pytest.Item]) -> Snapshot:
        snap: Snapshot = {}
        classes: set[int] = set()
        for module in test_modules(items):
            freeze_namespace(snap, ("test module", module.__name__), vars(module), module.__name__, classes, True)
        for item in items:
            snap[("test", item.nodeid, "function")] = item_function(item)
            snap[("test", item.nodeid, "__code__")] = item_code(item)
        return snap

    def check(self, items: list[pytest.Item] | None = None, full: bool = True) -> None:
        """Compare with the frozen state; not `full` (after each test): the registry and the test modules only, the
        judging machinery is compared after the collection and at the end."""
        if not self.base:
            return
        now = self.snapshot() if full else self._freeze_registry(self.config.pluginmanager)
        evidence = self._differences(self.base if full else self.registry, now)
        if self.tests:
            evidence += self._differences(self.tests, self.test_snapshot(items or []))
        for module in test_modules(items or []):
            evidence += module_problems(module)
        if evidence:
            self.tampered(evidence)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.modules = [m for name, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)
                        and name.split(".")[0] in FROZEN_PREFIXES] + [sys.modules[__name__], *FROZEN_MODULES]
        self.base = self.snapshot()
        self.registry = self._freeze_registry(self.config.pluginmanager)
        self.channel.send("start", pid=os.getpid())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if report.failed:
            call = report.__dict__.get("call")
            kind = error_kind(call.excinfo.value) if call is not None and call.excinfo else "CollectionError"
            self.channel.send("collect_error", nodeid=report.nodeid or str(collector.path), kind=kind,
                              tail=short_tail(report.longreprtext))
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = list(session.items)
        self.items = items
        self.check(items)
        self.tests = self.test_snapshot(items)
        prints = {item.nodeid: code_print(code) if (code := item_code(item)) else "" for item in items}
        self.collected = True
        self.channel.send("collected", items=[item.nodeid for item in items], prints=prints)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.channel.send("begin", nodeid=nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        kind = tail = ""
        if report.failed:
            kind = error_kind(call.excinfo.value) if call.excinfo else "Failed"
            tail = short_tail(report.longreprtext)
        if report.when == "teardown":
            self.check(self.items, full=False)
        self.channel.send("report", nodeid=item.nodeid, when=report.when, outcome=report.outcome, kind=kind, tail=tail)
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.check(self.items)
        self.channel.send("finish", exitstatus=int(exitstatus))
