"""Canary twins: the mutation changes one assertion and nothing else, every bank task's twin fails its reference
when judged for real (or the task is reported unmutable), and a night's pick is a function of the seed alone."""

import ast
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.config import SoakConfig
from soak.night.plan import select_tasks
from soak.record.info import Route, Routing
from soak.sandbox.judge import judge
from soak.tasks.canary import canary, canary_rng, is_canary, night_canaries
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import load_builtin

BUILTIN = load_builtin()

TESTS = '''import pytest

from solution import area, Box


def test_area():
    assert area(2, 3) == 6
    with pytest.raises(ValueError):
        assert area(-1, 3) == 0
    for side in range(3):
        assert area(side, 1) == side


def test_box():
    box = Box("lid")
    assert box.label() == "lid"  # a method call: one-off only
'''

REFERENCE = '''class Box:
    def __init__(self, name):
        self.name = name

    def label(self):
        return self.name


def area(width, height):
    if width < 0 or height < 0:
        raise ValueError("negative side")
    return width * height
'''


def task(tests: str = TESTS, reference: str = REFERENCE, task_id: str = "area") -> TaskSpec:
    return TaskSpec(id=task_id, title="Area", difficulty="easy", suite="dir:x", prompt="Write area().\n",
                    tests={"test_solution.py": tests}, reference=reference)


def changed_lines(before: str, after: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(lines only in `before`, lines only in `after`)."""
    old, new = before.splitlines(), after.splitlines()
    return tuple(line for line in old if line not in new), tuple(line for line in new if line not in old)


def test_a_one_off_changes_one_literal_and_a_conflicting_assert_repeats_a_plain_call():
    original = task()
    diffs: dict[str, set] = {"one-off": set(), "conflicting": set()}
    for seed in range(30):
        twin = canary(original, random.Random(seed))
        assert twin.id == "area~canary" and is_canary(twin.id) and not is_canary(original.id)
        assert (twin.prompt, twin.reference, twin.stub, twin.title) == (original.prompt, REFERENCE, "", "Area")
        ast.parse(twin.tests["test_solution.py"])
        kind = twin.canary.split(" ")[0]
        diffs[kind].add(changed_lines(TESTS, twin.tests["test_solution.py"]))
        if kind == "conflicting":
            conflicting = twin
    assert diffs["one-off"] == {
        (("    assert area(2, 3) == 6",), ("    assert area(2, 3) == 7",)),
        (('    assert box.label() == "lid"  # a method call: one-off only',),
         ('    assert box.label() == "lix"  # a method call: one-off only',))}
    assert diffs["conflicting"] == {((), ("    assert area(2, 3) == 7",))}
    assert conflicting.tests["test_solution.py"].index("== 6") < conflicting.tests["test_solution.py"].index("== 7")
    assert conflicting.canary == ("conflicting at test_solution.py:7 in test_area: `assert area(2, 3) == 6` "
                                  "followed by `assert area(2, 3) == 7` (line 8)")


def test_asserts_that_may_not_run_are_left_alone_and_such_a_task_is_unmutable():
    only_guarded = '''import pytest
from solution import area


def test_area():
    with pytest.raises(ValueError):
        assert area(-1, 3) == 0
    for side in range(3):
        assert area(side, 1) == side
    if area(1, 1):
        assert area(1, 1) == 1
        check(area)
    assert area(2, 2) == 2 * 2


def check(candidate):
    assert candidate(4, 5) == 20
'''
    assert canary(task(only_guarded), random.Random(0)) is None


def test_a_helper_the_tests_call_is_mutated_as_in_humaneval():
    tests = '''from solution import area


def check(candidate):
    assert candidate(4, 5) == 20


def test_area():
    check(area)
'''
    twin = canary(task(tests), random.Random(1))
    assert "in check:" in twin.canary and "== 21" in twin.tests["test_solution.py"]


def test_literals_keep_their_type_and_look():
    tests = '''from solution import shape


def test_shape():
    assert shape() == {"kind": "box", "sides": (2, -3.5, True)}
'''
    lines = {canary(task(tests), random.Random(seed)).tests["test_solution.py"].splitlines()[-1]
             for seed in range(40)}
    assert lines == {'    assert shape() == {"kind": "boy", "sides": (2, -3.5, True)}',
                     '    assert shape() == {"kind": "box", "sides": (3, -3.5, True)}',
                     '    assert shape() == {"kind": "box", "sides": (2, -2.5, True)}',
                     '    assert shape() == {"kind": "box", "sides": (2, -3.5, False)}'}


def reference_verdicts(tasks: list[TaskSpec]) -> dict[str, str]:
    """Each task's id -> the reference's verdict on the task's canary (seed 0), or "unmutable"."""
    def verdict(original: TaskSpec) -> str:
        twin = canary(original, canary_rng(0, original.id))
        if twin is None:
            return "unmutable"
        result = judge(twin, twin.reference)
        return result.result if result.tests_passed < result.tests_total else f"{result.result}, nothing failed"

    with ThreadPoolExecutor(2) as pool:
        return dict(zip([t.id for t in tasks], pool.map(verdict, tasks), strict=True))


def test_a_sample_of_bank_canaries_fails_its_reference_when_judged():
    sample = night_canaries(BUILTIN, 0.05, seed=7)
    originals = [t for t in BUILTIN if t.id + "~canary" in {twin.id for twin in sample}]
    assert len(originals) == 3
    assert reference_verdicts(originals) == dict.fromkeys((t.id for t in originals), "fail")


@pytest.mark.slow
def test_every_bank_task_has_a_canary_its_reference_fails_or_is_reported_unmutable():
    verdicts = reference_verdicts(BUILTIN)
    assert {t: v for t, v in verdicts.items() if v not in ("fail", "unmutable")} == {}


def test_the_seed_alone_picks_the_canaries():
    picked = night_canaries(BUILTIN, 0.05, seed=3)
    assert len(picked) == 3 and all(is_canary(t.id) and t.canary for t in picked)
    again = night_canaries(list(reversed(BUILTIN)), 0.05, seed=3)
    assert [(t.id, t.tests) for t in again] == [(t.id, t.tests) for t in picked]
    others = {tuple(t.id for t in night_canaries(BUILTIN, 0.05, seed)) for seed in range(5)}
    assert len(others) > 1
    assert night_canaries(BUILTIN, 0, seed=3) == []
    assert len(night_canaries(BUILTIN, 0.5, seed=3)) == 30


def test_a_night_runs_the_canaries_beside_the_suite_and_routing_does_not_move_them():
    config = SoakConfig(seed=11, canary_share=0.05)
    tasks = select_tasks(config, Routing())
    canaries = [t.id for t in tasks if is_canary(t.id)]
    assert len(tasks) == len(BUILTIN) + 3 and len(canaries) == 3
    skipped = canaries[0].removesuffix("~canary")
    routed = select_tasks(config, Routing(tasks={skipped: Route(action="skip")}))
    assert [t.id for t in routed if is_canary(t.id)] == canaries and skipped not in {t.id for t in routed}
    assert not any(is_canary(t.id) for t in select_tasks(SoakConfig(canary_share=0), Routing()))


def test_validate_reports_each_mutation_and_a_canary_the_reference_passes(tmp_path):
    sound, hollow = tmp_path / "area", tmp_path / "hollow"
    never_checked = '''from solution import area


def check(candidate):
    if candidate(0, 0) == 0:
        return  # the assert below never runs
    assert candidate(4, 5) == 20


def test_area():
    check(area)
    for side in range(3):
        assert area(side, 2) == 2 * side
'''
    for folder, tests in ((sound, TESTS), (hollow, never_checked)):
        folder.mkdir()
        (folder / "task.toml").write_text(f'id = "{folder.name}"\ntitle = "Area"\ndifficulty = "easy"\n')
        (folder / "prompt.md").write_text("Write area().\n")
        (folder / "test_solution.py").write_text(tests)
        (folder / "reference.py").write_text(REFERENCE)
    result = CliRunner().invoke(main, ["tasks", "validate", "--suite", f"dir:{tmp_path}", "--seed", "5"])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    mutation = canary(task(task_id="area"), canary_rng(5, "area")).canary
    assert f"CANARY area: {mutation}" in output and "BROKEN area" not in output
    assert "BROKEN hollow: the reference's verdict on its canary is pass, not fail (" in output
    assert "in check: `assert candidate(4, 5) == 20`" in output
