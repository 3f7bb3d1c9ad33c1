"""The attacks of tests/fixtures/tamper through a real night: a `dir:` suite whose `wrong.py` files are the attacks,
and `soak sim` whose coder always writes the broken variant (a task's wrong.py), so each attempt's solution is an
attack. Each must be judged `tampered` with its evidence in tasks.csv, the control plainly `fail`, every CSV intact,
and the report must show them."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.record.read import load_run, read_rows
from soak.record.schema import CallRow, EventRow, SampleRow, TaskRow
from soak.sim.scenario import Scenario, Timing
from soak.sim.server import SimServer
from tests.helpers import FIXTURES

pytestmark = pytest.mark.slow

ATTACKS = FIXTURES / "tamper"
NIGHT_ATTACKS = ["hookwrapper", "atexit_exit", "patch_testreport", "always_equal", "exit_at_import", "mock_any"]
TEST = """from solution import double


def test_zero():
    assert double(0) == 0


def test_three():
    assert double(3) == 6
"""


def write_task(root: Path, task_id: str, wrong: str) -> None:
    folder = root / task_id
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(f'id = "{task_id}"\ntitle = "double"\ndifficulty = "easy"\ntags = ["numeric"]\n')
    # Each prompt its own: the sim's coder knows a task by its prompt's text (the opening names no task id).
    (folder / "prompt.md").write_text(f"Write `double(x)` returning twice x ({task_id}).\n")
    (folder / "test_solution.py").write_text(TEST)
    (folder / "reference.py").write_text("def double(x):\n    return 2 * x\n")
    (folder / "wrong.py").write_text(wrong)


def test_attacks_written_by_a_model_are_judged_tampered_through_a_whole_night(tmp_path, monkeypatch):
    suite_dir = tmp_path / "suite"
    for name in NIGHT_ATTACKS:
        write_task(suite_dir, f"attack-{name.replace('_', '-')}", (ATTACKS / f"{name}.py").read_text())
    write_task(suite_dir, "control-wrong", "def double(x):\n    return x + 1\n")
    suite = f"dir:{suite_dir}"
    timing = Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=16)
    sim = SimServer(Scenario(timing=timing, coder={"p_correct": 0.0, "p_fix": 0.0}), seed=2, suite=suite)
    base_url = sim.start()
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    try:
        result = CliRunner().invoke(main, [
            "run", "--base-url", base_url, "--model", "soak-sim", "--suite", suite, "--mode", "direct",
            "--run-id", "attacks", "--quiet",
        ])
    finally:
        sim.stop()
    assert result.exit_code == 0, result.output
    run = tmp_path / "data" / "attacks"
    rows = {row.task_id: row for row in read_rows(run / "tasks.csv", TaskRow)}
    assert set(rows) == {f"attack-{n.replace('_', '-')}" for n in NIGHT_ATTACKS} | {"control-wrong"}
    for task_id, row in rows.items():
        if task_id == "control-wrong":
            assert row.outcome == "fail" and row.error_kind == "AssertionError", row
        else:
            assert row.outcome == "tampered" and row.error_kind == "Tampering" and row.error_tail, (task_id, row)
            assert row.suspicious, (task_id, "the static look saw nothing")
    # Every CSV reads back whole: the attacks changed nothing of the record.
    for name, model in (("calls", CallRow), ("events", EventRow), ("samples", SampleRow)):
        assert list(read_rows(run / f"{name}.csv", model)), name
    assert load_run(run).notes == []
    report = tmp_path / "night.html"
    rendered = CliRunner().invoke(main, ["report", str(run), "-o", str(report)])
    assert rendered.exit_code == 0, rendered.output
    assert "tampered with their judging" in report.read_text()
