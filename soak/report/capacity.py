"""A capacity sweep's section of the report (soak.decisions.capacity): the answer line, per level the figures, and
one chart of solved tasks per hour and pass rate against agents at once with the knee marked."""

from typing import Any

from soak.decisions.capacity import Answer, Level, answer, levels
from soak.decisions.sweep import repeat_k
from soak.record.read import RunRecord
from soak.record.sweeps import SweepInfo
from soak.report import charts
from soak.report.aggregate import jsonable

SOLVED, PASSED, KNEE = "#1f5fa8", "#2e9d4a", "#d1443b"


def row(level: Level, verdict: Answer, k: int | None) -> dict[str, Any]:
    """One level as the table, the chart and summary.json read it; pass^k at the k every level reached."""
    s = level.standing
    k = k if k in s.repeatability else None
    return {
        "agents": level.agents, "name": level.name, "run_id": s.run_id, "status": s.status,
        "measured": level.measured, "passes": s.passes, "attempts": s.attempts, "pass_rate": s.pass_rate,
        "interval": list(s.pass_interval), "pass_hat_k": {"k": k, "value": s.repeatability[k][0],
                                                          "interval": list(s.repeatability[k][1:])} if k else None,
        "solved_per_hour": level.solved_per_hour, "timeouts": level.timeouts, "stalled": level.stalled,
        "ttft_p50_s": level.ttft_p50_s, "ttft_p95_s": level.ttft_p95_s, "queued_s": level.queued_s,
        "hit_rate": level.hit_rate, "kv_peak": level.kv_peak, "preemptions": level.preemptions,
        "budget_s": level.budget_s, "joules_per_pass": s.joules_per_pass, "knee": level.agents == verdict.agents,
        "broke": verdict.held.get(level.agents, ""),
    }


def plot_capacity(ax: Any, rows: list[dict[str, Any]], knee: int | None) -> None:
    """Solved per hour (left axis) and pass rate with its 95 % interval (right axis) against agents at once."""
    title = "Solved tasks per hour and pass rate against agents at once"
    measured = [r for r in rows if r["measured"]]
    if not measured:
        return charts.no_data(ax, title)
    agents = [r["agents"] for r in measured]
    ax.plot(agents, [r["solved_per_hour"] or 0.0 for r in measured], marker="o", color=SOLVED, label="solved / hour")
    ax.set(title=title, xlabel="agents at once", ylabel="solved tasks per hour", xticks=agents)
    ax.set_ylim(bottom=0)
    rate = ax.twinx()
    rates = [r["pass_rate"] for r in measured]
    below = [p - r["interval"][0] for p, r in zip(rates, measured, strict=True)]
    above = [r["interval"][1] - p for p, r in zip(rates, measured, strict=True)]
    rate.errorbar(agents, rates, yerr=[below, above], marker="s", color=PASSED, capsize=4,
                  label="pass rate [95% CI]")
    rate.set(ylabel="pass rate", ylim=(0, 1.05))
    if knee is not None:
        ax.axvline(knee, color=KNEE, linestyle="--", label=f"knee: {knee} agents")
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = rate.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15),
              ncol=3)


def capacity_view(info: SweepInfo, runs: dict[str, RunRecord]) -> dict[str, Any]:
    """The section's context: the answer, the limiting signal, a row per level and the chart."""
    found = levels(info, runs)
    verdict = answer(found)
    k = repeat_k([level.standing for level in found if level.standing.repeatability])
    rows = [row(level, verdict, k) for level in found]
    return {"answer": verdict.line, "agents": verdict.agents, "limit": verdict.limit, "signals": verdict.signals,
            "rows": rows, "chart": charts.chart(plot_capacity, rows, verdict.agents, size=(8, 4.5))}


def capacity_summary(view: dict[str, Any]) -> dict[str, Any]:
    """summary.json's `capacity`: the view without its picture."""
    summary: dict[str, Any] = jsonable({key: value for key, value in view.items() if key != "chart"})
    return summary
