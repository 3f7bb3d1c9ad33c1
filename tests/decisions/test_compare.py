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


def test_each_side_shows_its_false_successes_and_cheats_and_canaries_stay_out_of_the_pass_rate(tmp_path):
    def row(run_id: str, task_id: str, outcome: str, **fields) -> TaskRow:
        return TaskRow(run_id=run_id, cycle=0, task_id=task_id, suite="builtin", started_at=0, ended_at=1,
                       duration_s=1, outcome=outcome, **fields)

    sides = []
    for run_id, lies, cheats in (("honest", 0, 0), ("liar", 2, 1)):
        folder = tmp_path / run_id
        folder.mkdir()
        rows = [row(run_id, "p1", "pass"), *(row(run_id, f"f{i}", "fail", claim="done", false_success=i < lies)
                                            for i in range(2)),
                row(run_id, "p1~canary", "cheat" if cheats else "fail", canary="one-off")]
        write_rows(folder / "tasks.csv", TaskRow, rows)
        write_rows(folder / "calls.csv", CallRow, [])
        sides.append(str(folder))
    comparison = compare_runs(*sides)
    assert (comparison.a.passes, comparison.a.attempts) == (1, 3)  # the canary is not an attempt at the pass rate
    text = "\n".join(comparison.lines())
    # Over failed attempts: the honest canary failure counts, the cheat does not (it is a cheat).
    assert "false successes" in text and "0/3 0%" in text and "2/2 100%" in text
    assert "cheating (canaries)" in text and "0/1 0%" in text and "1/1 100%" in text
    assert "p1~canary" not in text


def test_a_night_that_degraded_where_the_other_held_is_a_regression_at_equal_pass_rates(tmp_path):
    """Two nights with the same attempts and outcomes; in B first tokens quadruple from 40 min. compare prints each
    side's pass^k and course and fails B for its course alone."""
    from tests.decisions.test_course import night

    folders = []
    for run_id, ttfts in (("held", (0.2, 0.2)), ("slowed", (0.2, 0.8))):
        records = night(4, ttfts=ttfts, cut_s=2400)
        folder = tmp_path / run_id
        folder.mkdir()
        for name, model in (("tasks", TaskRow), ("calls", CallRow)):
            frame = records[name].assign(run_id=run_id).astype(object)
            write_rows(folder / f"{name}.csv", model, [model(**row) for row in frame.where(frame.notna(), None)
                                                       .to_dict("records")])
        folders.append(str(folder))
    comparison = compare_runs(*folders)
    assert comparison.a.pass_rate == comparison.b.pass_rate and not comparison.dropped
    assert comparison.a.held is True and comparison.b.held is False and comparison.regressed
    assert comparison.a.pass_hat_k == comparison.b.pass_hat_k and 1 in comparison.a.pass_hat_k
    result = CliRunner().invoke(main, ["compare", *folders])
    assert result.exit_code == 1, result.output
    assert f"  B: {comparison.b.verdict}" in result.output and "B: degraded from " in result.output
    assert "pass^1" in result.output and "; B degraded over its night)" in result.output


def test_each_side_shows_what_a_solved_task_cost_and_a_night_measured_by_nothing_shows_a_dash(tmp_path):
    """A's exporter counted 1.8 MJ over 4 passes, B's server host measured nothing: kJ per solved task for A, '-' for
    B, no ratio; neither priced the night, so no cost row."""
    from soak.record.schema import SampleRow

    a = make_run(tmp_path, "metered", {"p1": ["pass", "pass"], "p2": ["pass", "pass"]}, 0.2, 50)
    b = make_run(tmp_path, "dark", {"p1": ["pass", "pass"], "p2": ["pass", "pass"]}, 0.2, 50)
    write_rows(tmp_path / "metered" / "samples.csv", SampleRow, [
        SampleRow(run_id="metered", at=at, source="energy:default", metric="gpu_energy_joules", value=joules,
                  labels="gpu=0") for at, joules in ((0.0, 5e6), (0.5, 5.9e6), (1.0, 6.8e6))])
    comparison = compare_runs(a, b)
    assert comparison.a.energy["joules_per_pass"] == pytest.approx(1.8e6 / 4)
    assert comparison.b.energy["measured"] is False
    lines = comparison.lines()
    [row] = [line for line in lines if line.startswith("kJ / solved task")]
    assert row.split() == ["kJ", "/", "solved", "task", "450.00", "-"]
    assert not any(line.startswith("cost / solved task") for line in lines)


def test_a_stack_that_fails_requests_does_not_read_as_perfect_on_the_attempts_it_served(tmp_path):
    """Every attempt the flaky stack served passed; its infra errors count as failures beside that, in compare's
    rows and pass^k, in the sweep's standing and in the report's headline."""
    from soak.decisions.repeats import INFRA_COUNTED, night
    from soak.decisions.sweep import standing
    from soak.record.read import load_run
    from soak.record.schema import RunLimits
    from soak.record.sweeps import SweepEntry
    from soak.report.aggregate import headline

    steady = make_run(tmp_path, "steady", {"p1": ["pass", "pass"], "p2": ["pass", "fail"]}, 0.2, 50)
    flaky = make_run(tmp_path, "flaky", {"p1": ["pass", "infra_error"], "p2": ["infra_error", "pass"]}, 0.2, 50)
    text = "\n".join(compare_runs(steady, flaky).lines())
    assert next(line for line in text.splitlines() if line.startswith("pass rate")).split()[-1] == "100.0%"
    counted = next(line for line in text.splitlines() if line.startswith("  infra counted"))
    assert counted.split()[-2:] == ["2/4", "50%"] and "3/4" in counted
    run = load_run(tmp_path / "flaky")
    assert [row["pass_hat_k"] for row in night(run.tasks)["k"]] == [1.0]  # one served try per task: perfect
    assert [row["pass_hat_k"] for row in night(run.tasks, INFRA_COUNTED)["k"]] == [0.5, 0.0]
    found = standing(SweepEntry(name="flaky", run_id="flaky", config={}, limits=RunLimits(), status="done"), run)
    assert (found.passes, found.attempts, found.served) == (2, 2, 4)
    lines = headline(run)["verdicts"]
    assert any("pass rate 100% of the attempts the stack served, 50% counting its infra errors" in line
               for line in lines)
