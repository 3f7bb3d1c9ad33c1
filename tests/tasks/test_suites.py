import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.errors import BadInput
from soak.sandbox.judge import judge
from soak.tasks import exercism
from soak.tasks.exercism import adapt_tests, to_snake
from soak.tasks.spec import TaskSpec, load_task_dir
from soak.tasks.suites import find_task, load_suites
from tests.helpers import FIXTURES, REPO

KINDS = FIXTURES / "exercism" / "kinds"
"""One exercise of each kind the public track has that the importer must handle (kept apart from the
two-exercise suite that the night tests run)."""
EXAMPLE = REPO / "tasks" / "word-frequency"


def test_builtin_bank_loads_with_unique_ids():
    tasks = load_suites("builtin")
    assert len({t.id for t in tasks}) == len(tasks)
    example = next(t for t in tasks if t.id == "word-frequency")
    assert example.difficulty == "easy" and example.entry == "solution.py"
    assert "def top_words" in example.reference and example.wrong
    assert set(example.tests) == {"test_solution.py"}


def test_humaneval_has_164_problems_wrapping_check():
    tasks = load_suites("humaneval")
    assert len(tasks) == 164
    first = tasks[0]
    assert first.id == "humaneval-0" and first.stub == ""
    test_source = first.tests["test_solution.py"]
    assert "from solution import has_close_elements" in test_source
    assert "check(has_close_elements)" in test_source
    assert "def has_close_elements" in first.prompt and "def has_close_elements" in first.reference


def test_exercism_layout():
    tasks = load_suites(f"exercism:{FIXTURES / 'exercism'}")
    by_id = {t.id: t for t in tasks}
    two_fer = by_id["two-fer"]
    assert two_fer.entry == "two_fer.py" and two_fer.module == "two_fer"
    assert "two_fer_test.py" in two_fer.tests
    assert "default argument" in two_fer.prompt  # instructions.append.md is included
    assert two_fer.stub.startswith("def two_fer(name)") and "One for" in two_fer.reference
    assert by_id["leap-year"].entry == "leap.py"


def exercism_task(task_id: str, root: Path = KINDS) -> TaskSpec:
    return next(t for t in load_suites(f"exercism:{root}", include_skipped=True) if t.id == task_id)


def test_exercism_helpers_ship_beside_the_tests_read_only():
    task = exercism_task("meter-reading")
    # test_utils.py is listed under files.test but defines no test; units.py is files.editor; sample_meters.py is
    # imported by test_utils.py without being listed.
    assert set(task.tests) == {"meter_reading_test.py"}
    assert set(task.support) == {"test_utils.py", "units.py", "sample_meters.py"}
    assert "UNITS = {" in task.prompt and "test_utils" not in task.prompt  # editor files are shown, helpers not
    assert judge(task, task.reference).result == "pass"
    overwrite = 'open("units.py", "w").write("UNITS = {}")\n\n\ndef total_kwh(readings):\n    return 0\n'
    assert judge(task, overwrite).result != "pass"


def test_exercism_tests_toml_exclusions_and_docs():
    task = exercism_task("word-tally")
    test = task.tests["word_tally_test.py"]
    # include = false cases are gone (a nested one by its leaf description); an excluded case sharing its
    # description with an included one keeps its test.
    assert "def test_counts_apostrophes_as_separators" not in test
    assert "def test_treats_hyphens_as_word_characters" not in test
    for kept in ("ignores_case", "counts_contractions_as_one_word", "strips_commas_and_full_stops"):
        assert f"def test_{kept}(" in test
    prompt = task.prompt
    order = ["Introduction", "# Instructions\n", "no words to tally", "# Hints", "Write your solution in"]
    assert [prompt.index(part) for part in order] == sorted(prompt.index(part) for part in order)


def test_exercism_adapt_tests_names_like_the_track_generator():
    assert to_snake("Reports hyphenated words (e.g. well-known)") == "reports_hyphenated_words_e_g_well_known"
    assert to_snake("camelCase Input") == "camel_case_input"
    source = ("import unittest\n\n\nclass T(unittest.TestCase):\n    @unittest.skip('slow')\n    def test_a(self):\n"
              "        pass\n\n    @unittest.expectedFailure\n    def test_b(self):\n        pass\n\n\n"
              "class U(unittest.TestCase):\n    def test_b(self):\n        pass\n")
    text, dropped, unskipped = adapt_tests(source, {"test_b"})
    assert dropped == ["test_b", "test_b"] and unskipped == ["test_a"]
    assert "skip" not in text and "expectedFailure" not in text and "def test_a" in text
    compile(text, "t.py", "exec")  # a class left without tests still parses


def test_exercism_slow_exercise_gets_its_time_and_says_so():
    task = exercism_task("prime-sum")
    assert "slow" in task.tags and task.test_timeout_seconds == exercism.SLOW_TEST_TIMEOUT_SECONDS
    assert "unittest.skip" not in task.tests["prime_sum_test.py"]  # the extra-credit test runs
    assert "def test_below_three_million" in task.tests["prime_sum_test.py"]
    assert f"they get {exercism.SLOW_TEST_TIMEOUT_SECONDS:g} s" in task.prompt


def test_exercism_refactoring_exercise_is_skipped_with_its_reason():
    root = KINDS
    assert "report-card" not in {t.id for t in load_suites(f"exercism:{root}")}
    task = exercism_task("report-card")
    assert task.tags == ["exercism", "refactoring"] and task.skip.startswith("refactoring exercise")
    with pytest.raises(BadInput, match="task 'report-card' is skipped: refactoring exercise"):
        find_task("report-card", f"exercism:{root}")
    result = CliRunner().invoke(main, ["tasks", "list", "--suite", f"exercism:{root}"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "SKIPPED: refactoring exercise" in result.output and "3 tasks" in result.output
    assert "1 skipped" in result.output


def test_exercism_suite_settings_make_time_visible_and_settable(tmp_path):
    for name in ("prime-sum", "report-card"):
        shutil.copytree(KINDS / name, tmp_path / name)
    settings = tmp_path / exercism.SETTINGS_FILE
    settings.write_text('[exercise.prime-sum]\ntest_timeout_seconds = 0.05\n\n[exercise.report-card]\nskip = ""\n')
    assert exercism_task("prime-sum", tmp_path).test_timeout_seconds == 0.05
    result = CliRunner().invoke(main, ["tasks", "validate", "--suite", f"exercism:{tmp_path}"], env={"COLUMNS": "400"})
    assert result.exit_code == 1
    # A correct solution that runs out of time is never a silent failure: the limit and where to set it are said.
    assert f"BROKEN prime-sum: reference timeout: its tests took longer than the task's 0.05 s " \
           f"(test_timeout_seconds; set it in {settings})" in result.output
    assert "BROKEN report-card: the untouched stub passes" in result.output  # run anyway: the stub passes
    settings.write_text("test_timeout_seconds = 90\n")
    assert exercism_task("prime-sum", tmp_path).test_timeout_seconds == exercism.SLOW_TEST_TIMEOUT_SECONDS
    settings.write_text("test_timeout_seconds = 90\nslow_test_timeout_seconds = 900\n")
    assert exercism_task("prime-sum", tmp_path).test_timeout_seconds == 900
    settings.write_text("[exercise.prime-summ]\ntest_timeout_seconds = 1\n")
    with pytest.raises(BadInput, match="no such exercise: prime-summ"):
        load_suites(f"exercism:{tmp_path}")


def test_exercism_bad_config_names_the_file(tmp_path):
    broken = tmp_path / "broken" / ".meta"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text('{"files": {}}')
    with pytest.raises(BadInput, match=r"config\.json: needs files\.solution"):
        load_suites(f"exercism:{tmp_path}")


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "word-frequency"
    shutil.copytree(EXAMPLE, target)
    return target


def test_malformed_task_names_file_and_field(tmp_path):
    folder = copy_example(tmp_path)
    (folder / "task.toml").write_text('id = "x"\ntitle = "t"\ndifficulty = "brutal"\n')
    with pytest.raises(BadInput, match=r"task\.toml: difficulty: Input should be 'easy', 'medium' or 'hard'"):
        load_task_dir(folder, "dir")


def test_unknown_field_and_missing_file(tmp_path):
    folder = copy_example(tmp_path)
    (folder / "task.toml").write_text('id = "x"\ntitle = "t"\ndifficulty = "easy"\ntimeout = 3\n')
    with pytest.raises(BadInput, match=r"timeout: Extra inputs are not permitted"):
        load_task_dir(folder, "dir")
    (folder / "reference.py").unlink()
    with pytest.raises(BadInput, match=r"reference\.py: missing"):
        load_task_dir(folder, "dir")


def test_suite_selection_errors(tmp_path):
    with pytest.raises(BadInput, match="unknown suite 'nope'"):
        load_suites("nope")
    copy_example(tmp_path)
    with pytest.raises(BadInput, match="appears in both"):
        load_suites(f"builtin,dir:{tmp_path}")
    assert find_task(str(tmp_path / "word-frequency")).id == "word-frequency"
    with pytest.raises(BadInput, match="no task 'missing-task'"):
        find_task("missing-task", "builtin")


def test_cli_tasks_list_json_and_bad_suite_exit_code():
    runner = CliRunner()
    result = runner.invoke(main, ["tasks", "list", "--suite", f"exercism:{FIXTURES / 'exercism'}", "--json"])
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {r["id"] for r in rows} == {"two-fer", "leap-year"}
    result = runner.invoke(main, ["tasks", "list", "--suite", "nope"])
    assert result.exit_code == 2
    assert "unknown suite 'nope'" in result.output


def write_task(folder: Path, test: str, reference: str, wrong: str) -> None:
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(f'id = "{folder.name}"\ntitle = "t"\ndifficulty = "easy"\n')
    (folder / "prompt.md").write_text("Write `double`.\n")
    (folder / "test_solution.py").write_text(test)
    (folder / "reference.py").write_text(reference)
    (folder / "wrong.py").write_text(wrong)


@pytest.mark.slow  # seconds, not milliseconds: the default set stays under 5 minutes on 2 cores; CI runs it
def test_validate_proves_always_equal_objects_fail(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["tasks", "validate", "--suite", f"exercism:{FIXTURES / 'exercism'}"])
    assert result.exit_code == 0, result.output
    assert "always-equal solutions: 1 fail, 1 tampered" in result.output and "2/2 tasks sound" in result.output
    result = runner.invoke(main, ["tasks", "validate", "--suite", f"exercism:{KINDS}"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "always-equal solutions: 3 tampered" in result.output and "3/3 tasks sound" in result.output
    assert "SKIPPED report-card: refactoring exercise" in result.output
    reference, wrong = "def double(x):\n    return 2 * x\n", "def double(x):\n    return 0\n"
    write_task(tmp_path / "strict", "from solution import double\n\n\ndef test_double():\n"
               "    assert double(3) == 6\n", reference, wrong)
    # Truthiness is no comparison: an object that equals everything is true too, so this test cannot tell it.
    write_task(tmp_path / "truthy", "from solution import double\n\n\ndef test_double():\n"
               "    assert double(3)\n", reference, wrong)
    result = runner.invoke(main, ["tasks", "validate", "--suite", f"dir:{tmp_path}"])
    assert result.exit_code == 1
    assert "BROKEN truthy: an always-equal object passes" in result.output and "BROKEN strict" not in result.output
    assert "always-equal solutions: 1 pass, 1 tampered" in result.output and "1/2 tasks sound" in result.output
