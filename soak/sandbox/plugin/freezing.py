"""Freezing what judges: snapshots of the judging machinery and of the test code, and what changed between two.

At session start (the solution not yet imported) the recorder freezes the plugin registry, every hook's
implementations, and the identities (and `__code__`, defaults) of the callables pytest judges with: `pytest`,
`_pytest.*`, `pluggy.*`, `unittest.*`, this plugin's modules, `builtins`, `os`, `math`, `operator`, `sys.exit`,
the trace and profile hooks and `sys.meta_path`. After the collection it adds the test modules' own
functions and classes and the collected test functions. Any change is evidence (what changed, and where the new
object was defined): a solution that patches how it is judged changes one of these.
"""

import builtins
import itertools
import math
import operator
import os
import sys
import threading
import types
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import pytest

from soak.sandbox.plugin import equality
from soak.sandbox.plugin.channel import sha256

if TYPE_CHECKING:
    from pluggy import HookCaller

PLUGIN = __name__.rpartition(".")[0]
"""This plugin's package: its modules are frozen with pytest's."""
FROZEN_PREFIXES = ("pytest", "_pytest", "pluggy", "unittest")
FROZEN_MODULES = (builtins, os, math, operator)
FROZEN_ATTRS = ((sys, "exit"), (sys, "settrace"), (sys, "setprofile"))
VOLATILE = {"_pytest.assertion.util": {"_reprcompare", "_assertion_pass", "_config"}}
"""Module globals pytest itself sets while tests run."""
Snapshot = dict[tuple[str, ...], object]
WRAPPERS = (classmethod, staticmethod, property, types.FunctionType)
"""What `function_parts` looks inside."""


class Part(tuple[str, ...]):
    """In a Frozen, the name of a part of the value last named: its key's tail after that value's key."""


FUNCTION_PARTS = (Part(("__code__",)), Part(("__defaults__",)), Part(("__kwdefaults__",)))
GROUP = object()
"""In a Frozen, where a namespace starts: its key prefix is the next of `prefixes`."""


class Frozen:
    """One freeze, flat: `names` holds each value's name in its namespace (a Part for a part of a function, GROUP
    where a namespace starts), `values` the values, one for one (None for a GROUP), `prefixes` the namespaces' key
    prefixes; `snapshot` spells out the keys. Flat because a freeze runs at every step of a session: two freezes with
    equal names and prefixes and the same values make the same Snapshot, and that compares at C speed (`unchanged`);
    the keyed comparison (`differences`) runs only when something changed. Its markers are shared objects and its
    prefixes plain tuples of names (untracked by the garbage collector once it has seen them): the frozen state held
    through a session makes every later collection little longer."""

    def __init__(self) -> None:
        self.names: list[Any] = []  # a namespace's keys: str but for a forged one
        self.values: list[object] = []
        self.prefixes: list[tuple[str, ...]] = []

    def group(self, prefix: tuple[str, ...]) -> None:
        self.names.append(GROUP)
        self.values.append(None)
        self.prefixes.append(prefix)

    def add(self, name: Any, value: object) -> None:
        self.names.append(name)
        self.values.append(value)

    def snapshot(self) -> Snapshot:
        snap: Snapshot = {}
        prefixes = iter(self.prefixes)
        prefix: tuple[str, ...] = ()
        key: tuple[str, ...] = ()
        for name, value in zip(self.names, self.values, strict=True):
            if name is GROUP:
                prefix = next(prefixes)
            elif type(name) is Part:
                snap[key + name] = value
            else:
                key = prefix + (name,)
                snap[key] = value
        return snap


BEHAVIOUR = (types.ModuleType, property, classmethod, staticmethod)
"""Besides callables, what a module or class attribute is when it is behaviour (frozen) rather than data (free to
change)."""
DATA = frozenset({str, bytes, int, float, bool, type(None), tuple, list, dict, set, frozenset,
                  types.GetSetDescriptorType, types.MemberDescriptorType})
"""Builtin types whose instances are never behaviour (not callable, none of BEHAVIOUR, their class fixed): most of
a namespace's data, told apart at once where isinstance would look up `__class__` once for each kind."""


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


def add_parts(frozen: Frozen, value: object) -> None:
    """The `function_parts` of the value last added; a plain function's inline (most values are one)."""
    if type(value) is types.FunctionType:
        frozen.names += FUNCTION_PARTS
        frozen.values += (value.__code__, value.__defaults__, value.__kwdefaults__)
    elif isinstance(value, WRAPPERS):
        for part_key, part in function_parts((), value):
            frozen.add(Part(part_key), part)


def freeze_namespace(
    frozen: Frozen, prefix: tuple[str, ...], namespace: Mapping[str, Any], owner: str, classes: set[int] | None,
    only_own: bool = False,
) -> None:
    """The behaviour in a namespace with its parts, and the members of the classes `owner` defines there, each class
    once (`classes`: the ids walked; None: a class's own namespace, whose classes are not walked). The loop of every
    freeze, so what a function call per entry would do is written inline."""
    names, values = frozen.names, frozen.values
    volatile = VOLATILE.get(owner, ())
    grouped = False
    for name, value in dict(namespace).items():  # a copy: the solution's threads may change the namespace meanwhile
        if name in volatile or not (callable(value) or type(value) not in DATA and isinstance(value, BEHAVIOUR)):
            continue
        if only_own and getattr(value, "__module__", None) != owner:
            continue
        if not grouped:
            frozen.group(prefix)
            grouped = True
        names.append(name)
        values.append(value)
        if type(value) is types.FunctionType:
            names += FUNCTION_PARTS
            values += (value.__code__, value.__defaults__, value.__kwdefaults__)
        elif isinstance(value, WRAPPERS):
            add_parts(frozen, value)
        if classes is not None and isinstance(value, type) and value.__module__ == owner and id(value) not in classes:
            classes.add(id(value))
            freeze_namespace(frozen, prefix + (name,), vars(value), "", None)
            grouped = False


def judging_modules() -> list[types.ModuleType]:
    """The modules frozen at session start: pytest's, pluggy's, unittest's, this plugin's and FROZEN_MODULES."""
    loaded = [m for name, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)
              and (name.split(".")[0] in FROZEN_PREFIXES or name == PLUGIN or name.startswith(PLUGIN + "."))]
    return [*loaded, *FROZEN_MODULES]


def freeze_modules(frozen: Frozen, modules: list[types.ModuleType]) -> Frozen:
    classes: set[int] = set()
    for module in modules:
        frozen.group(("sys.modules",))
        frozen.add(module.__name__, sys.modules.get(module.__name__))
        freeze_namespace(frozen, (module.__name__,), vars(module), module.__name__, classes)
    for owner, name in FROZEN_ATTRS:
        frozen.group((owner.__name__,))
        frozen.add(name, getattr(owner, name, None))
    frozen.group(("sys",))
    frozen.add("gettrace()", sys.gettrace())
    frozen.add("getprofile()", sys.getprofile())
    frozen.group(("threading",))
    frozen.add("settrace", getattr(threading, "_trace_hook", None))
    frozen.add("setprofile", getattr(threading, "_profile_hook", None))
    frozen.group(("sys",))
    frozen.add("meta_path", tuple(sys.meta_path))
    return frozen


def named_in_group(frozen: Frozen, start: int, first_group: int, prefix: tuple[str, ...]) -> set[object]:
    """The names right under `prefix` from `start` on (the GROUP there or after it being prefixes[first_group]):
    neither parts nor the members of a class there."""
    found, current, prefixes = set(), None, iter(frozen.prefixes[first_group:])
    for name in frozen.names[start:]:
        if name is GROUP:
            current = next(prefixes)
        elif type(name) is not Part and current == prefix:
            found.add(name)
    return found


def freeze_registry(frozen: Frozen, pm: pytest.PytestPluginManager) -> Frozen:
    frozen.group(("pluginmanager",))
    frozen.add("plugins", tuple(sorted((str(n), id(p)) for n, p in pm.list_name_plugin())))
    freeze_namespace(frozen, ("pluginmanager",), equality.attributes(pm), "", set())
    freeze_namespace(frozen, ("pluginmanager", "hook"), equality.attributes(pm.hook), "", set())
    for name, caller in list(equality.attributes(pm.hook).items()):
        start, first_group = len(frozen.names), len(frozen.prefixes)
        freeze_namespace(frozen, ("hook", name), equality.attributes(caller), "", set())
        taken = named_in_group(frozen, start, first_group, ("hook", name))
        frozen.group(("hook", name))
        for impl in cast("HookCaller", caller).get_hookimpls():
            entry = f"{impl.plugin_name}"
            while entry in taken:  # Two implementations under one plugin name are two entries.
                entry += "+"
            taken.add(entry)
            frozen.add(entry, (impl.function, impl.plugin, impl.wrapper, impl.hookwrapper, impl.tryfirst, impl.trylast,
                               tuple(impl.argnames)))
            add_parts(frozen, impl.function)
    return frozen


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



def unchanged(before: Frozen, after: Frozen) -> bool:
    """Whether two freezes make Snapshots without `differences`: equal names in the same order and the same values,
    compared by identity in one pass, and by `same` where that fails (the tuples a freeze builds afresh)."""
    if before.names != after.names or before.prefixes != after.prefixes:
        return False
    olds, news = before.values, after.values
    for at in itertools.compress(range(len(olds)), map(operator.is_not, olds, news)):
        old, new = olds[at], news[at]
        if not (type(old) is tuple is type(new) and len(old) == len(new) and all(map(operator.is_, old, new))
                or same(old, new)):
            return False
    return True


def changes(before: Frozen, after: Frozen) -> list[str]:
    """The `differences` between two freezes, worked out only when there are any."""
    return [] if unchanged(before, after) else differences(before.snapshot(), after.snapshot())


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
    digest = sha256()
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

    expected = {equality.STRICT_ALIAS: equality, "@py_builtins": builtins, "@pytest_ar": rewrite}
    problems = [f"{module.__name__}: {name} rebound" for name, value in expected.items()
                if name in vars(module) and vars(module)[name] is not value]
    if vars(module).get("__builtins__") not in (builtins, vars(builtins)):
        problems.append(f"{module.__name__}: __builtins__ rebound")
    return problems


