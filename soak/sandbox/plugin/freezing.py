"""Freezing what judges: snapshots of the judging machinery and of the test code, and what changed between two.

At session start (the solution not yet imported) the recorder freezes the plugin registry, every hook's
implementations, and the identities (and `__code__`, defaults) of the callables pytest judges with: `pytest`,
`_pytest.*`, `pluggy.*`, `unittest.*`, this plugin's modules, `builtins`, `os`, `math`, `operator`, `sys.exit`,
the trace and profile hooks and `sys.meta_path`. After the collection it adds the test modules' own
functions and classes and the collected test functions. Any change is evidence (what changed, and where the new
object was defined): a solution that patches how it is judged changes one of these.
"""

import builtins
import hashlib
import math
import operator
import os
import sys
import threading
import types
from collections.abc import Iterator

import pytest

from soak.sandbox.plugin import equality

PLUGIN = __name__.rpartition(".")[0]
"""This plugin's package: its modules are frozen with pytest's."""
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


def judging_modules() -> list[types.ModuleType]:
    """The modules frozen at session start: pytest's, pluggy's, unittest's, this plugin's and FROZEN_MODULES."""
    loaded = [m for name, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)
              and (name.split(".")[0] in FROZEN_PREFIXES or name == PLUGIN or name.startswith(PLUGIN + "."))]
    return [*loaded, *FROZEN_MODULES]


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



def freeze_registry(pm: pytest.PytestPluginManager) -> Snapshot:
    snap: Snapshot = {("pluginmanager", "plugins"): tuple(sorted((str(n), id(p)) for n, p in pm.list_name_plugin()))}
    freeze_namespace(snap, ("pluginmanager",), equality.attributes(pm), "", set())
    freeze_namespace(snap, ("pluginmanager", "hook"), equality.attributes(pm.hook), "", set())
    for name, caller in list(equality.attributes(pm.hook).items()):
        freeze_namespace(snap, ("hook", name), equality.attributes(caller), "", set())
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

    expected = {equality.STRICT_ALIAS: equality, "@py_builtins": builtins, "@pytest_ar": rewrite}
    problems = [f"{module.__name__}: {name} rebound" for name, value in expected.items()
                if name in vars(module) and vars(module)[name] is not value]
    if vars(module).get("__builtins__") not in (builtins, vars(builtins)):
        problems.append(f"{module.__name__}: __builtins__ rebound")
    return problems


