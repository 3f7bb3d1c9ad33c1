"""Small `plot_x(ax, data)` functions; each figure becomes a base64 PNG data URI and is closed at once."""

import base64
import io
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 96
OUTCOME_COLOURS = {
    "pass": "#2e9d4a", "fail": "#d1443b", "timeout": "#f08c2a", "call_cap": "#8e5bc7", "token_cap": "#a0522d",
    "no_artifact": "#8c8c8c", "infra_error": "#1f5fa8", "harness_error": "#e377c2", "cancelled": "#c7c7c7",
}
EVENT_STYLES = {"restart": ("#d1443b", "-"), "down": ("#f08c2a", "--"), "health_fail": ("#f0c12a", ":"),
                "pause": ("#8c8c8c", "--"), "error_budget": ("#8e5bc7", "--")}
Draw = Callable[..., None]


def render(panels: Sequence[tuple[Draw, tuple[Any, ...]]], size: tuple[float, float] = (9, 3),
           sharex: bool = False) -> str:
    """Draw each (plot function, args) on its own stacked axes; return a PNG data URI; the figure is always closed."""
    fig, axes = plt.subplots(len(panels), 1, figsize=size, sharex=sharex, squeeze=False)
    try:
        for ax, (draw, args) in zip(axes[:, 0], panels, strict=True):
            draw(ax, *args)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI)
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    finally:
        plt.close(fig)


def chart(draw: Draw, *args: Any, size: tuple[float, float] = (9, 3)) -> str:
    return render([(draw, args)], size=size)


def no_data(ax: Any, title: str) -> None:
    """An explicit empty panel, so a missing series reads as missing rather than as a broken chart."""
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=14, color="#888", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def hours(at: pd.Series, start: float) -> pd.Series:
    return (at - start) / 3600


def plot_duration_hist(ax: Any, tasks: pd.DataFrame, stats: dict[str, float | None], budget: float | None) -> None:
    title = "Task durations"
    durations = tasks["duration_s"].dropna()
    if durations.empty:
        return no_data(ax, title)
    ax.hist(durations, bins=min(50, max(len(durations) // 2, 5)), color="#6a8caf")
    for name, colour in (("median", "#2e9d4a"), ("p90", "#f08c2a"), ("p99", "#d1443b")):
        if stats.get(name) is not None:
            ax.axvline(stats[name], color=colour, linestyle="--", label=f"{name} {stats[name]:.0f} s")
    if budget:
        ax.axvline(budget, color="black", linewidth=2, label=f"budget {budget:.0f} s")
    ax.set(title=title, xlabel="seconds", ylabel="tasks")
    ax.legend(fontsize=8)


def plot_duration_vs_calls(ax: Any, tasks: pd.DataFrame) -> None:
    title = "Duration vs calls per task"
    if tasks.empty:
        return no_data(ax, title)
    calls = tasks["orchestrator_calls"] + tasks["coder_calls"]
    for outcome, part in tasks.groupby("outcome"):
        ax.scatter(calls[part.index], part["duration_s"], s=8, alpha=0.6, label=outcome,
                   color=OUTCOME_COLOURS.get(str(outcome), "#333"))
    ax.set(title=title, xlabel="LLM calls", ylabel="seconds")
    ax.legend(fontsize=7, markerscale=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_calls_by_outcome(ax: Any, tasks: pd.DataFrame) -> None:
    """Box per outcome and role: what a normal task costs and what a failing one burns."""
    title = "Calls per task by outcome (orchestrator | coder)"
    if tasks.empty:
        return no_data(ax, title)
    groups = [o for o in OUTCOME_COLOURS if o in set(tasks["outcome"])]
    data, positions, colours = [], [], []
    for i, outcome in enumerate(groups):
        part = tasks[tasks["outcome"] == outcome]
        data += [part["orchestrator_calls"].to_numpy(), part["coder_calls"].to_numpy()]
        positions += [i * 3 + 1, i * 3 + 2]
        colours += [OUTCOME_COLOURS[outcome]] * 2
    boxes = ax.boxplot(data, positions=positions, widths=0.8, patch_artist=True, showfliers=True)
    for patch, colour, k in zip(boxes["boxes"], colours, range(len(colours)), strict=True):
        patch.set(facecolor=colour, alpha=0.9 if k % 2 else 0.45)
    ax.set_xticks([i * 3 + 1.5 for i in range(len(groups))], groups, fontsize=8)
    ax.set(title=title, ylabel="calls (light: orchestrator, dark: coder)")


def plot_outcomes_over_time(ax: Any, tasks: pd.DataFrame, start: float, width: float) -> None:
    title = "Tasks finished per interval, by outcome"
    if tasks.empty:
        return no_data(ax, title)
    bucket = ((tasks["ended_at"] - start) // width).astype(int)
    counts = tasks.groupby([bucket.rename("bucket"), "outcome"]).size().unstack(fill_value=0)
    x = (counts.index.to_numpy() + 0.5) * width / 3600
    bottom = np.zeros(len(counts))
    for outcome in [o for o in OUTCOME_COLOURS if o in counts.columns]:
        ax.bar(x, counts[outcome], width=width / 3600 * 0.9, bottom=bottom, label=outcome,
               color=OUTCOME_COLOURS[outcome])
        bottom += counts[outcome].to_numpy()
    ax.set(title=title, ylabel="tasks", xlabel="hours since start")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_lines(ax: Any, lines: dict[str, pd.DataFrame], start: float, title: str, ylabel: str,
               scale: float = 1.0, events: pd.DataFrame | None = None) -> None:
    """One line per labelled (at, value) frame, x in hours since the start, stack events marked."""
    lines = {k: v for k, v in lines.items() if not v.empty}
    if not lines:
        return no_data(ax, title)
    for label, frame in lines.items():
        ax.plot(hours(frame["at"], start), frame["value"] * scale, label=label, linewidth=1.2)
    if events is not None:
        plot_events(ax, events, start)
    ax.set(title=title, ylabel=ylabel, xlabel="hours since start")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_events(ax: Any, events: pd.DataFrame, start: float) -> None:
    seen = set()
    for row in events[events["kind"].isin(list(EVENT_STYLES))].itertuples():
        colour, style = EVENT_STYLES[row.kind]
        label = None if row.kind in seen else row.kind
        seen.add(row.kind)
        ax.axvline((row.at - start) / 3600, color=colour, linestyle=style, linewidth=1, alpha=0.8, label=label)


def plot_hist(ax: Any, values: pd.Series, title: str, xlabel: str) -> None:
    values = values.dropna()
    if values.empty:
        return no_data(ax, title)
    ax.hist(values, bins=40, color="#6a8caf")
    for q, colour in ((0.5, "#2e9d4a"), (0.9, "#f08c2a")):
        ax.axvline(values.quantile(q), color=colour, linestyle="--", label=f"p{int(q * 100)} {values.quantile(q):.2f}")
    ax.set(title=title, xlabel=xlabel, ylabel="calls")
    ax.legend(fontsize=8)


def plot_quantiles_over_time(ax: Any, calls: pd.DataFrame, column: str, start: float, width: float, title: str,
                             ylabel: str) -> None:
    """Median and p90 per time bucket and endpoint."""
    rows = calls[calls[column].notna()]
    if rows.empty:
        return no_data(ax, title)
    bucket = ((rows["started_at"] - start) // width).astype(int).rename("bucket")
    grouped = rows.groupby([rows["endpoint"], bucket])[column]
    for q, style in ((0.5, "-"), (0.9, ":")):
        for endpoint, part in grouped.quantile(q).groupby(level=0):
            x = (part.index.get_level_values("bucket").to_numpy() + 0.5) * width / 3600
            ax.plot(x, part.to_numpy(), style, label=f"{endpoint} p{int(q * 100)}")
    ax.set(title=title, ylabel=ylabel, xlabel="hours since start")
    ax.legend(fontsize=7)


def plot_spec_positions(ax: Any, accepted: pd.DataFrame) -> None:
    title = "Spec-decode acceptance by draft position"
    if accepted.empty:
        return no_data(ax, title)
    sources = list(dict.fromkeys(accepted["source"]))
    bar = 0.8 / len(sources)
    for i, (source, part) in enumerate(accepted.groupby("source", sort=False)):
        ax.bar(part["position"] + i * bar, part["acceptance"], width=bar, label=source)
    ax.set_xticks(sorted(set(accepted["position"])))
    ax.set(title=title, xlabel="draft position", ylabel="accepted / drafts", ylim=(0, 1))
    ax.legend(fontsize=7)


def plot_integrity(ax: Any, frame: pd.DataFrame, start: float) -> None:
    title = "Broken tool calls, share of tool-using calls per interval"
    if frame.empty:
        return no_data(ax, title)
    for role, part in frame.groupby("role"):
        ax.plot(hours(part["at"], start), part["bad_share"] * 100, marker=".", label=role)
    ax.set(title=title, xlabel="hours since start", ylabel="% of calls")
    ax.legend(fontsize=7)


def plot_per_run(ax: Any, values: dict[str, pd.Series], title: str, ylabel: str) -> None:
    """Box per run, for night-vs-night or engine-vs-engine."""
    values = {k: v.dropna() for k, v in values.items() if not v.dropna().empty}
    if not values:
        return no_data(ax, title)
    ax.boxplot(list(values.values()), showfliers=False)
    ax.set_xticks(range(1, len(values) + 1), list(values), fontsize=8)
    ax.set(title=title, ylabel=ylabel)
