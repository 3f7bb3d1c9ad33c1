"""Freezing what judges, in the plugin's process: flat freezes compare at C speed, and every change still comes out
as the keyed evidence the recorder sends."""

import sys
import types

import pytest

from soak.sandbox.plugin.freezing import Frozen, changes, freeze_modules, freeze_registry, unchanged


def judging_module() -> types.ModuleType:
    """A module like pytest's: functions, a class with a method, a property and a classmethod, and some data."""
    module = types.ModuleType("judging_for_test")
    exec(  # noqa: S102 - the module under test is made here
        "LIMIT = 3\n"
        "def check(x, y=1, *, z=2):\n    return x == y\n"
        "class Report:\n"
        "    def outcome(self):\n        return 'passed'\n"
        "    @property\n    def passed(self):\n        return True\n"
        "    @classmethod\n    def make(cls):\n        return cls()\n",
        vars(module))
    return module


def freeze(module: types.ModuleType) -> Frozen:
    return freeze_modules(Frozen(), [module])


def test_the_snapshot_keys_every_judging_callable_and_its_parts():
    snap = freeze(judging_module()).snapshot()
    name = "judging_for_test"
    for key in [("check",), ("check", "__code__"), ("check", "__defaults__"), ("check", "__kwdefaults__"),
                ("Report", "outcome", "__code__"), ("Report", "passed", "fget", "__code__"),
                ("Report", "make", "__func__"), ("Report", "make", "__code__")]:
        assert (name, *key) in snap, key
    assert ("sys.modules", name) in snap and ("sys", "meta_path") in snap
    assert (name, "LIMIT") not in snap  # data is free to change


def test_an_untouched_state_is_unchanged_though_a_freeze_rebuilds_its_tuples():
    module = judging_module()
    before, after = freeze(module), freeze(module)
    assert before.values[-1] is not after.values[-1]  # sys.meta_path, a fresh tuple each time
    assert unchanged(before, after) and changes(before, after) == []
    module.LIMIT = 4
    module.extra_data = [1]
    assert changes(before, freeze(module)) == []


def test_every_kind_of_change_is_evidence():
    module = judging_module()
    before = freeze(module)
    module.check.__code__ = (lambda x, y=1, *, z=2: True).__code__
    del module.Report.outcome
    module.Report.extra = lambda self: None
    found = changes(before, freeze(module))
    assert len(found) == 9  # the new member and its three parts, the code, the removed member and its three parts
    assert any(line.startswith("added: judging_for_test.Report.extra (now ") for line in found)
    assert any(line.startswith("changed: judging_for_test.check.__code__ (now code from test_freezing.py:")
               for line in found)
    assert "removed: judging_for_test.Report.outcome" in found


def test_a_function_changed_in_place_is_evidence_where_its_identity_is_not():
    """A plain function's parts are taken apart from the names (Frozen.seal): the same function object with other
    defaults, or other keyword defaults, is a change of its own."""
    module = judging_module()
    before = freeze(module)
    module.check.__defaults__ = (9,)
    module.check.__kwdefaults__ = {"z": 9}
    assert changes(before, freeze(module)) == ["changed: judging_for_test.check.__defaults__",
                                               "changed: judging_for_test.check.__kwdefaults__"]


def test_a_module_swapped_in_sys_modules_is_evidence():
    module = judging_module()
    sys.modules[module.__name__] = module
    try:
        before = freeze(module)
        sys.modules[module.__name__] = types.ModuleType(module.__name__)
        assert changes(before, freeze(module)) == ["changed: sys.modules.judging_for_test"]
    finally:
        del sys.modules[module.__name__]


class Twice:
    """One plugin implementing one hook twice: two entries, the second named with a '+'."""

    @pytest.hookimpl
    def pytest_runtest_setup(self, item):
        pass

    @pytest.hookimpl(specname="pytest_runtest_setup")
    def pytest_runtest_setup_again(self, item):
        pass


def test_a_registry_freeze_names_each_implementation_and_sees_one_added():
    pm = pytest.PytestPluginManager()
    pm.register(Twice(), "twice")
    before = freeze_registry(Frozen(), pm)
    snap = before.snapshot()
    assert {("hook", "pytest_runtest_setup", "twice"), ("hook", "pytest_runtest_setup", "twice+")} <= set(snap)
    assert unchanged(before, freeze_registry(Frozen(), pm))
    pm.register(Twice(), "flip")
    assert changes(before, freeze_registry(Frozen(), pm)) == [
        "added: hook.pytest_runtest_setup.flip", "added: hook.pytest_runtest_setup.flip+",
        "changed: pluginmanager.plugins"]
