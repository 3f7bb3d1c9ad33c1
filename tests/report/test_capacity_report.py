"""The capacity section's rows and chart from per-level figures: pass^k at the k every level reached, the knee
marked, and an explicit empty chart when no level has finished."""

from soak.decisions.capacity import Level, answer
from soak.decisions.sweep import Standing
from soak.report import charts
from soak.report.capacity import plot_capacity, row


def level(agents: int, passes: int, repeatability: dict) -> Level:
    standing = Standing(name=f"c{agents}", run_id=f"s.c{agents}", status="done", passes=passes, attempts=12,
                        repeatability=repeatability)
    return Level(agents, standing, solved_per_hour=10.0 * agents * passes / 12)


def test_rows_carry_pass_hat_k_at_the_shared_k_and_mark_the_knee():
    found = [level(1, 12, {1: (1.0, 0.8, 1.0), 2: (1.0, 0.7, 1.0), 3: (1.0, 0.6, 1.0)}),
             level(2, 12, {1: (1.0, 0.8, 1.0), 2: (0.9, 0.7, 1.0)}),
             level(4, 2, {1: (0.2, 0.05, 0.5), 2: (0.1, 0.0, 0.4)})]
    verdict = answer(found)
    rows = [row(one, verdict, 2) for one in found]
    assert [r["knee"] for r in rows] == [False, True, False]
    assert rows[0]["pass_hat_k"] == {"k": 2, "value": 1.0, "interval": [0.7, 1.0]}
    assert rows[2]["broke"] == "the pass rate falls 100% → 17%"
    assert charts.chart(plot_capacity, rows, verdict.agents).startswith("data:image/png;base64,")


def test_no_finished_level_draws_an_empty_panel():
    pending = Level(1, Standing(name="c1", run_id="s.c1", status="pending"))
    rows = [row(pending, answer([pending]), None)]
    assert rows[0]["pass_hat_k"] is None and not rows[0]["measured"]
    assert charts.chart(plot_capacity, rows, None).startswith("data:image/png;base64,")
