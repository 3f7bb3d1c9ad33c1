import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.errors import BadInput
from soak.tasks.spec import load_task_dir
from soak.tasks.suites import find_task, load_suites

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLE = Path(__file__).parents[1] / "tasks" / "word-frequency"


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


def test_validate_proves_always_equal_objects_fail(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["tasks", "validate", "--suite", f"exercism:{FIXTURES / 'exercism'}"])
    assert result.exit_code == 0, result.output
    assert "always-equal solutions: 1 fail, 1 tampered" in result.output and "2/2 tasks sound" in result.output
    reference, wrong = "def double(x):\n    return 2 * x\n", "def double(x):\n    return 0\n"
    write_task(tmp_path / "strict", "from solution import double\n\n\ndef test_double():\n"
               "    assert double(3) == 6\n", reference, wrong)
    # Truthiness is no comparison: an object that equals everything is true too, so this test cannot tell it.
    write_task(tmp_path / "truthy", "from solution import double\n\n\ndef test_double():\n"
               "    assert double(3)\n", reference, wrong)
    result = runner.invoke(main, ["tasks", "validate", "--suite", f"dir:{tmp_path}"])
    assert result.exit_code == 1
    assert "BROKEN truthy: an always-equal object passes" in result.output and "strict" not in result.output
    assert "always-equal solutions: 1 pass, 1 tampered" in result.output and "1/2 tasks sound" in result.output
