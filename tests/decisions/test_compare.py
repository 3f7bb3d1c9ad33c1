import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.decisions.compare import compare_runs
from soak.record.schema import CallRow, TaskRow
from tests.synth import write_rows


def make_run(root, run_id, outcomes: dict[str, list[str]], ttft: float, tps: float):
    folder = root / run_id
    folder.mkdir()
    tasks = [TaskRow(run_id=run_id, cycle=c, task_id=t, suite="builtin", started_at=0, ended_at=1, duration_s=1,
                     outcome=o, orchestrator_calls=1, coder_calls=2)
             for t, results in outcomes.items() for c, o in enumerate(results)]
    calls = [CallRow(run_id=run_id, task_id="x", cycle=0, call_index=i, role="coder", endpoint="e", model="m",
                     stream=True, started_at=0, duration_s=1, ttft_s=ttft, decode_tps=tps) for i in range(5)]
    write_rows(folder / "tasks.csv", TaskRow, tasks)
    write_rows(folder / "calls.csv", CallRow, calls)
    return str(folder)


@pytest.fixture
def runs(tmp_path):
    a = make_run(tmp_path, "engine-a", {"p1": ["pass", "pass"], "p2": ["pass", "fail"], "p3": ["pass"]}, 0.2, 50)
    b_same = make_run(tmp_path, "engine-b", {"p1": ["pass", "pass"], "p2": ["fail", "pass"], "p3": ["pass"]}, 0.4, 40)
    b_worse = make_run(tmp_path, "engine-c", {"p1": ["fail", "fail"], "p2": ["pass", "fail"], "p3": ["pass"]}, 0.2, 50)
    return a, b_same, b_worse


def test_parity_within_tolerance(runs):
    a, b_same, _ = runs
    comparison = compare_runs(a, b_same)
    assert (comparison.a.passes, comparison.a.attempts) == (4, 5)
    assert not comparison.regressed
    text = "\n".join(comparison.lines())
    assert "4/5" in text and "2.00x" in text and "0.80x" in text and "PASS" in text


def test_regression_lists_lost_problems_and_exits_1(runs):
    a, _, b_worse = runs
    comparison = compare_runs(a, b_worse)
    assert comparison.regressed and bool(comparison.problems.loc["p1", "lost"])
    result = CliRunner().invoke(main, ["compare", a, b_worse])
    assert result.exit_code == 1 and "FAIL: B regresses" in result.output and "LOST" in result.output
    assert CliRunner().invoke(main, ["compare", a, b_worse, "--max-pass-drop", "0.5"]).exit_code == 0
