"""Small `plot_x(ax, data)` functions; each figure becomes a base64 PNG data URI and is closed at once."""

import base64
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from soak.record import series  # noqa: E402
from soak.record.sweeps import SessionLevel  # noqa: E402

DPI = 96
OUTCOME_COLOURS = {
    "pass": "#2e9d4a", "fail": "#d1443b", "timeout": "#f08c2a", "call_cap": "#8e5bc7", "token_cap": "#a0522d",
    "no_artifact": "#8c8c8c", "tampered": "#5b0b2e", "infra_error": "#1f5fa8", "agent_error": "#17a2b8",
    "harness_error": "#e377c2", "cancelled": "#c7c7c7", "cheat": "#000000", "node_lost": "#bcbd22",
}
"""Schema order (soak.record.schema.Outcome); `tampered` a dark wine and `cheat` black, set apart from the reds of
plain failures."""
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


def outcome_order(seen: Any) -> list[str]:
    """Known outcomes in schema order, then any others (a newer schema) alphabetically."""
    present = set(seen)
    return [o for o in OUTCOME_COLOURS if o in present] + sorted(str(o) for o in present if o not in OUTCOME_COLOURS)


def no_data(ax: Any, title: str) -> None:
    """An explicit empty panel, so a missing series reads as missing rather than as a broken chart."""
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=14, color="#888", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


@dataclass(frozen=True)
class Clock:
    """The x axis of every time chart: hours since the start for a night, minutes for a short rehearsal."""

    start: float
    width: float
    """Seconds per bucket of the rates and shares over time."""
    unit: float
    label: str

    @classmethod
    def for_span(cls, start: float, end: float, buckets: int = 48) -> "Clock":
        span = max(end - start, 0.0)
        unit, label = (3600.0, "hours since start") if span >= 2 * 3600 else (60.0, "minutes since start")
        return cls(start=start, width=max(span / buckets, 10.0), unit=unit, label=label)

    def x(self, at: Any) -> Any:
        return (at - self.start) / self.unit

    def bucket(self, at: pd.Series) -> pd.Series:
        return series.time_bucket(at, self.start, self.width)

    def bucket_x(self, bucket: Any) -> Any:
        """Axis position of a bucket's middle."""
        return self.x(series.bucket_middle(bucket, self.start, self.width))


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
    calls = tasks["orchestrator_calls"] + tasks["coder_calls"] + tasks["agent_calls"]
    for outcome in outcome_order(tasks["outcome"]):
        part = tasks[tasks["outcome"] == outcome]
        ax.scatter(calls[part.index], part["duration_s"], s=8, alpha=0.6, label=outcome,
                   color=OUTCOME_COLOURS.get(outcome, "#333"))
    ax.set(title=title, xlabel="LLM calls", ylabel="seconds")
    ax.legend(fontsize=7, markerscale=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_calls_by_outcome(ax: Any, tasks: pd.DataFrame) -> None:
    """Box per outcome and role: what a normal task costs and what a failing one burns."""
    title = "Calls per task by outcome (orchestrator | coder)"
    groups = outcome_order(tasks["outcome"])
    if not groups:
        return no_data(ax, title)
    data, positions, colours = [], [], []
    for i, outcome in enumerate(groups):
        part = tasks[tasks["outcome"] == outcome]
        # An external agent plays the coder's part.
        data += [part["orchestrator_calls"].to_numpy(), (part["coder_calls"] + part["agent_calls"]).to_numpy()]
        positions += [i * 3 + 1, i * 3 + 2]
        colours += [OUTCOME_COLOURS.get(outcome, "#333333")] * 2
    boxes = ax.boxplot(data, positions=positions, widths=0.8, patch_artist=True, showfliers=True)
    for patch, colour, k in zip(boxes["boxes"], colours, range(len(colours)), strict=True):
        patch.set(facecolor=colour, alpha=0.9 if k % 2 else 0.45)
    ax.set_xticks([i * 3 + 1.5 for i in range(len(groups))], groups, fontsize=8)
    ax.set(title=title, ylabel="calls (light: orchestrator, dark: coder)")


def plot_outcomes_over_time(ax: Any, tasks: pd.DataFrame, clock: Clock) -> None:
    title = "Tasks finished per interval, by outcome"
    tasks = tasks[tasks["ended_at"].notna()]
    if tasks.empty:
        return no_data(ax, title)
    counts = tasks.groupby([clock.bucket(tasks["ended_at"]), "outcome"]).size().unstack(fill_value=0)
    x = clock.bucket_x(counts.index.to_numpy())
    bottom = np.zeros(len(counts))
    for outcome in outcome_order(counts.columns):
        ax.bar(x, counts[outcome], width=clock.width / clock.unit * 0.9, bottom=bottom, label=outcome,
               color=OUTCOME_COLOURS.get(outcome, "#333333"))
        bottom += counts[outcome].to_numpy()
    ax.set(title=title, ylabel="tasks", xlabel=clock.label)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


@dataclass(frozen=True)
class Panel:
    """What a time panel says besides its data: its title, its y axis's label, the factor from the recorded unit to
    that axis's, and the stack events marked on it."""

    title: str
    ylabel: str
    scale: float = 1.0
    events: pd.DataFrame | None = None


def plot_lines(ax: Any, lines: dict[str, pd.DataFrame], clock: Clock, panel: Panel) -> None:
    """One line per labelled (at, value) frame, stack events marked."""
    lines = {k: v for k, v in lines.items() if not v.empty}
    if not lines:
        return no_data(ax, panel.title)
    for label, frame in lines.items():
        ax.plot(clock.x(frame["at"]), frame["value"] * panel.scale, label=label, linewidth=1.2)
    if panel.events is not None:
        plot_events(ax, panel.events, clock)
    ax.set(title=panel.title, ylabel=panel.ylabel, xlabel=clock.label)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_events(ax: Any, events: pd.DataFrame, clock: Clock) -> None:
    seen = set()
    for row in events[events["kind"].isin(list(EVENT_STYLES))].itertuples():
        colour, style = EVENT_STYLES[str(row.kind)]
        label = None if row.kind in seen else row.kind
        seen.add(row.kind)
        ax.axvline(clock.x(row.at), color=colour, linestyle=style, linewidth=1, alpha=0.8, label=label)


def short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def plot_hist(ax: Any, values: pd.Series, title: str, xlabel: str) -> None:
    values = values.dropna()
    if values.empty:
        return no_data(ax, title)
    bins: Any = 40
    if values.min() > 0 and values.max() > 20 * values.median():
        # A long tail (stalls, cached replies) would squash the bulk into one bar: log bins keep both visible.
        bins = np.geomspace(values.min(), values.max(), 41)
        ax.set_xscale("log")
        xlabel += " (log scale)"
    ax.hist(values, bins=bins, color="#6a8caf")
    for q, colour in ((0.5, "#2e9d4a"), (0.9, "#f08c2a")):
        mark = values.quantile(q)
        ax.axvline(mark, color=colour, linestyle="--", label=f"p{int(q * 100)} {short(mark)}")
    ax.set(title=title, xlabel=xlabel, ylabel="calls")
    ax.legend(fontsize=8)


def plot_quantiles_over_time(ax: Any, calls: pd.DataFrame, column: str, clock: Clock, title: str,
                             ylabel: str) -> None:
    """Median and p90 per time bucket and endpoint."""
    rows = calls[calls[column].notna()]
    if rows.empty:
        return no_data(ax, title)
    grouped = rows.groupby([rows["endpoint"], clock.bucket(rows["started_at"])])[column]
    for q, style in ((0.5, "-"), (0.9, ":")):
        for endpoint, part in grouped.quantile(q).groupby(level=0):
            x = clock.bucket_x(part.index.get_level_values("bucket").to_numpy())
            ax.plot(x, part.to_numpy(), style, marker="." if len(part) < 20 else None,
                    label=f"{endpoint} p{int(q * 100)}")
    if rows[column].min() > 0 and rows[column].max() > 20 * rows[column].median():
        ax.set_yscale("log")
    ax.set(title=title, ylabel=ylabel, xlabel=clock.label)
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


def plot_integrity(ax: Any, frame: pd.DataFrame, clock: Clock) -> None:
    title = "Mangled tool calls, share of tool-using calls per interval"
    if frame.empty:
        return no_data(ax, title)
    for role, part in frame.groupby("role"):
        ax.plot(clock.x(part["at"]), part["mangled_share"] * 100, marker=".", label=role)
    ax.set(title=title, xlabel=clock.label, ylabel="% of calls")
    ax.legend(fontsize=7)


def plot_per_run(ax: Any, values: dict[str, pd.Series], title: str, ylabel: str) -> None:
    """Box per run, for night-vs-night or engine-vs-engine."""
    values = {k: v.dropna() for k, v in values.items() if not v.dropna().empty}
    if not values:
        return no_data(ax, title)
    ax.boxplot(list(values.values()), showfliers=False)
    ax.set_xticks(range(1, len(values) + 1), list(values), fontsize=8)
    ax.set(title=title, ylabel=ylabel)


def plot_sessions(ax: Any, ramps: dict[str, list[SessionLevel]], measure: str, title: str, ylabel: str) -> None:
    """One line per configuration over the sessions gate's ramp; a hollow marker is a level that was not warm."""
    ramps = {name: [level for level in levels if getattr(level, measure) is not None] for name, levels in ramps.items()}
    if not any(ramps.values()):
        return no_data(ax, title)
    for name, levels in ramps.items():
        counts, values = [level.sessions for level in levels], [getattr(level, measure) for level in levels]
        (line,) = ax.plot(counts, values, label=name)
        ax.scatter(counts, values, color=line.get_color(), zorder=3,
                   facecolors=[line.get_color() if level.warm else "none" for level in levels])
    counts = sorted({level.sessions for levels in ramps.values() for level in levels})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(count) for count in counts])
    ax.set_ylim(bottom=0)
    ax.set(title=title, xlabel="concurrent sessions", ylabel=ylabel)
    ax.legend(fontsize=7)


PASS_COLOUR, FAIL_COLOUR, CHANGE_COLOUR = "#0072B2", "#E69F00", "#D55E00"
"""Okabe–Ito blue, orange and vermilion: told apart with any colour vision."""


def plot_window_measure(ax: Any, windows: pd.DataFrame, column: str, clock: Clock, panel: Panel,
                        findings: list[dict[str, Any]]) -> None:
    """One figure per window (at its middle), its interval as a band where it has one, the changes found in it
    marked where they start, restarts and error-budget events on the same axis."""
    known = windows[windows[column].notna()]
    if known.empty:
        return no_data(ax, panel.title)
    middle, scale = clock.x(known["at"] + known["width_s"] / 2), panel.scale
    ax.plot(middle, known[column] * scale, marker="o", markersize=3, linewidth=1.2, color=PASS_COLOUR)
    if column == "pass_rate":
        ax.fill_between(middle, known["pass_low"].astype(float) * scale, known["pass_high"].astype(float) * scale,
                        color=PASS_COLOUR, alpha=0.15, linewidth=0)
    for found in findings:
        if found["measure"] == column:
            at = clock.x(windows["at"].iloc[0] + found["at_s"])
            ax.axvline(at, color=CHANGE_COLOUR, linestyle="--" if found["kind"] == "change" else ":", linewidth=1.5,
                       label=f"{found['kind']}: {found['said']}")
    if panel.events is not None:
        plot_events(ax, panel.events, clock)
    ax.set(title=panel.title, ylabel=panel.ylabel, xlabel=clock.label)
    ax.label_outer()  # on a shared axis only the lowest panel keeps its labels
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_repeat_strip(ax: Any, table: pd.DataFrame) -> None:
    """A row per task, a cell per try in the order tried: passed (blue) or not (orange); tasks that passed and
    failed first."""
    title = "Each task's tries, in order (blue passed, orange did not)"
    if table.empty:
        return no_data(ax, title)
    table = table.sort_values(["flaky", "passes"], ascending=[False, True], kind="stable")
    width = int(table["tries"].max())
    cells = np.full((len(table), width), np.nan)
    for row, outcomes in enumerate(table["outcomes"]):
        cells[row, :len(outcomes)] = [1.0 if outcome == "pass" else 0.0 for outcome in outcomes]
    colours = matplotlib.colors.ListedColormap([FAIL_COLOUR, PASS_COLOUR]).with_extremes(bad="#f2f2f2")
    ax.imshow(np.ma.masked_invalid(cells), aspect="auto", cmap=colours, vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks(range(len(table)), [str(task) for task in table.index], fontsize=6)
    ax.set_xticks(range(width), [str(n + 1) for n in range(width)], fontsize=7)
    ax.set(title=title, xlabel="try")
    ax.grid(False)


def plot_cost_front(ax: Any, points: list[dict[str, Any]]) -> None:
    """One point per configuration: solved tasks per hour against kJ per solved task; the Pareto front (none better
    on both) joined and filled, the others hollow."""
    title = "Solved tasks per hour against energy per solved task"
    shown = [p for p in points if p["solved_per_hour"] is not None and p["joules_per_pass"] is not None]
    if not shown:
        return no_data(ax, title)
    front = sorted((p for p in shown if p["front"]), key=lambda p: p["solved_per_hour"])
    ax.plot([p["solved_per_hour"] for p in front], [p["joules_per_pass"] / 1000 for p in front], color=PASS_COLOUR,
            linewidth=1, label="Pareto front")
    for p in shown:
        ax.scatter(p["solved_per_hour"], p["joules_per_pass"] / 1000, s=40, color=PASS_COLOUR,
                   facecolors=PASS_COLOUR if p["front"] else "none")
        ax.annotate(p["name"], (p["solved_per_hour"], p["joules_per_pass"] / 1000), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set(title=title, xlabel="solved tasks per hour (more is better)", ylabel="kJ per solved task (less is better)")
    ax.legend(fontsize=7)
