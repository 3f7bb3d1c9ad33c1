"""The course of the night: did the stack hold up from start to end? The night is cut into 12–24 windows (an
attempt belongs to the window it started in, a call likewise), each with its quality, latency, error and memory
figures. Changes in them are found by ruptures' PELT (a mean shift; penalty 3·σ²·ln n, σ the series' own noise, so a
steady night raises no alarm) and kept only when the two sides differ beyond chance and by a size that matters;
slow drift by a Mann–Kendall test (scipy), sized by a line from the window where it set in. The verdict is the one
line a person reads first.
"""

import math
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import ruptures
from scipy import stats

from soak.decisions import energy
from soak.record import series
from soak.record.schema import MANGLED, MODEL_OUTCOMES
from soak.record.summary import wilson

WIDTHS = (5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 14400)
"""Window lengths in seconds: the shortest that cuts the night into at most MAX_WINDOWS."""
MAX_WINDOWS = 24
MIN_WINDOWS = 6
"""Fewer windows with data than this: too short a night to tell a change from noise."""
PENALTY = 3.0
SIGNIFICANCE = 0.001
"""Both sides of a change must differ at this level (a two-proportion z test, Mann–Whitney U for call times); a
trend's Mann–Kendall p-value likewise."""


class Measure(NamedTuple):
    """A figure watched for change: its column, its words, which way is worse, the smallest change that matters (a
    difference, or for `ratio` measures a factor), and how it is written."""

    column: str
    words: str
    worse: int
    """+1: a rise is a degradation (latency, memory); -1: a fall is (pass rate, decode speed)."""
    matters: float
    ratio: bool
    unit: str


MEASURES = (
    Measure("pass_rate", "pass rate", -1, 0.15, False, "%"),
    Measure("ttft_p95", "TTFT p95", +1, 1.5, True, "s"),
    Measure("decode_tps", "decode tok/s", -1, 1.5, True, "tok/s"),
    Measure("server_rss_bytes", "server RSS", +1, 256 * 2**20, False, "bytes"),
    Measure("gpu_memory_bytes", "GPU memory", +1, 512 * 2**20, False, "bytes"),
)


def window_width(length: float) -> float:
    return next((width for width in WIDTHS if length / width <= MAX_WINDOWS), length / MAX_WINDOWS)


def length_text(seconds: float) -> str:
    """8 h 02 min, 4 min 05 s, 40 s: a night's length as the verdict says it."""
    whole = round(seconds)
    hours, minutes, rest = whole // 3600, whole % 3600 // 60, whole % 60
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def clock(at: float, width: float) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M" if width >= 60 else "%H:%M:%S")


def server_memory(samples: pd.DataFrame) -> pd.DataFrame:
    """The model servers' resident memory over time (at, value): what the server reports of itself (Prometheus'
    `process_resident_memory_bytes`, vLLM), else the process trees soak started."""
    reported = series.window(samples, "server:*", "process_resident_memory_bytes")
    if reported.empty:
        reported = series.window(samples, "server:*", "rss_bytes")
    return reported.groupby("at")["value"].sum().reset_index()


def windows(tasks: pd.DataFrame, calls: pd.DataFrame, samples: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """One row per window: its offsets, attempts, passes and pass rate of ordinary tasks (Wilson interval), false
    successes, call timing (TTFT p50/p95, decode and prefill tok/s), mangled tool calls, timeouts, failed calls,
    the share of prompt tokens served from cache, the samplers' server RSS, GPU memory and KV-cache usage, and the
    power and joules per solved task of the energy the night counts (soak.decisions.energy)."""
    width = window_width(max(end - start, 1.0))
    count = max(1, math.ceil((end - start) / width))

    def index(at: pd.Series) -> pd.Series:
        return ((at - start) // width).clip(0, count - 1).astype(int)

    frame = pd.DataFrame({"window": range(count)})
    frame["from_s"] = frame["window"] * width
    frame["at"] = start + frame["from_s"]
    model = tasks[tasks["outcome"].isin(MODEL_OUTCOMES)]
    ordinary = model[model["canary"].fillna("").astype(str) == ""]
    failed = model[~model["outcome"].isin(["pass", "cheat"])]
    counts = {
        "attempts": tasks.groupby(index(tasks["started_at"])).size(),
        "model_attempts": ordinary.groupby(index(ordinary["started_at"])).size(),
        "passes": ordinary[ordinary["outcome"] == "pass"].groupby(index(ordinary["started_at"])).size(),
        "failed": failed.groupby(index(failed["started_at"])).size(),
        "false_successes": failed[failed["false_success"].astype(bool)].groupby(index(failed["started_at"])).size(),
        "timeouts": tasks[tasks["outcome"] == "timeout"].groupby(index(tasks["started_at"])).size(),
        "calls": calls.groupby(index(calls["started_at"])).size(),
        "failed_calls": calls[calls["status"] != "ok"].groupby(index(calls["started_at"])).size(),
        "mangled": calls[calls["integrity"].isin(MANGLED)].groupby(index(calls["started_at"])).size(),
    }
    for name, values in counts.items():
        frame[name] = frame["window"].map(values).fillna(0).astype(int)
    frame["pass_rate"] = (frame["passes"] / frame["model_attempts"]).where(frame["model_attempts"] > 0)
    bounds = [wilson(int(c), int(n)) if n else (None, None) for c, n in zip(frame["passes"],
                                                                              frame["model_attempts"], strict=True)]
    frame["pass_low"], frame["pass_high"] = [b[0] for b in bounds], [b[1] for b in bounds]
    frame["false_success_rate"] = (frame["false_successes"] / frame["failed"]).where(frame["failed"] > 0)
    ok = calls[calls["status"] == "ok"]
    ok = ok.assign(window=index(ok["started_at"]), **{column: pd.to_numeric(ok[column], errors="coerce") for column in
                                                      ("ttft_s", "decode_tps", "prompt_tokens", "cached_tokens")})
    uncached = ok["prompt_tokens"].fillna(0) - ok["cached_tokens"].fillna(0)
    ok = ok.assign(prefill_tps=(uncached / ok["ttft_s"]).where(ok["ttft_s"] > 0))
    grouped = ok.groupby("window")
    frame["ttft_p50"] = frame["window"].map(grouped["ttft_s"].median())
    frame["ttft_p95"] = frame["window"].map(grouped["ttft_s"].quantile(0.95))
    frame["decode_tps"] = frame["window"].map(grouped["decode_tps"].median())
    frame["prefill_tps"] = frame["window"].map(grouped["prefill_tps"].median())
    prompt = grouped["prompt_tokens"].sum()
    frame["cache_share"] = frame["window"].map(grouped["cached_tokens"].sum() / prompt.where(prompt > 0))
    sampled = {"server_rss_bytes": server_memory(samples),
               "gpu_memory_bytes": series.summed(samples, "gpu", "gpu_memory_used_bytes"),
               "kv_usage": series.window(samples, "server:*", "vllm:kv_cache_usage_perc")}
    for name, readings in sampled.items():
        frame[name] = (frame["window"].map(readings.groupby(index(readings["at"]))["value"].mean()) if len(readings)
                       else None)
    frame["watts"] = np.nan
    for meter in energy.counted(energy.meters(samples, start, end)):
        # Each meter's mean power over the part of the window its readings cover (a source gone dark covers less).
        where = index(pd.Series((meter.starts + meter.ends) / 2)).to_numpy()
        spent = pd.DataFrame({"joules": meter.joules, "seconds": meter.ends - meter.starts}).groupby(where).sum()
        watts = frame["window"].map(spent["joules"] / spent["seconds"].where(spent["seconds"] > 0))
        frame["watts"] = frame["watts"].add(watts, fill_value=0).where(frame["watts"].notna() | watts.notna())
    frame["joules_per_pass"] = (frame["watts"] * width / frame["passes"]).where(frame["passes"] > 0)
    return frame.assign(width_s=width)


class Finding(NamedTuple):
    measure: Measure
    kind: str
    """`change` (a step, from `window` on) or `trend` (slow drift, from `window` on: its onset)."""
    window: int
    before: float
    after: float
    p_value: float

    @property
    def degrades(self) -> bool:
        return (self.after - self.before) * self.measure.worse > 0


def noise(values: np.ndarray) -> float:
    """The series' own noise: the median absolute first difference, scaled to a standard deviation (a step changes
    one difference, so it barely moves this)."""
    diffs = np.abs(np.diff(values))
    return float(1.4826 * np.median(diffs) / math.sqrt(2)) if len(diffs) else 0.0


def matters(measure: Measure, before: float, after: float) -> bool:
    if measure.ratio:
        low, high = sorted((before, after))
        return low > 0 and high / low >= measure.matters
    return abs(after - before) >= max(measure.matters, 0.1 * abs(before) if measure.unit == "bytes" else 0.0)


def differs(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, cut: int, start: float) -> float:
    """The p-value of the two sides of a cut: pooled counts for the pass rate, the calls' own times for latency,
    the windows' values otherwise."""
    left, right = frame[frame["window"] < cut], frame[frame["window"] >= cut]
    if measure.column == "pass_rate":
        n1, n2 = left["model_attempts"].sum(), right["model_attempts"].sum()
        c1, c2 = left["passes"].sum(), right["passes"].sum()
        pooled = (c1 + c2) / (n1 + n2)
        spread = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2)) if n1 and n2 else 0.0
        return float(2 * stats.norm.sf(abs(c1 / n1 - c2 / n2) / spread)) if spread > 0 else 1.0
    if measure.column in ("ttft_p95", "decode_tps"):
        column = "ttft_s" if measure.column == "ttft_p95" else "decode_tps"
        ok = calls[calls["status"] == "ok"]
        edge = start + cut * float(frame["width_s"].iloc[0])
        a, b = ok.loc[ok["started_at"] < edge, column].dropna(), ok.loc[ok["started_at"] >= edge, column].dropna()
        return float(stats.mannwhitneyu(a, b).pvalue) if len(a) and len(b) else 1.0
    a, b = left[measure.column].dropna(), right[measure.column].dropna()
    return float(stats.mannwhitneyu(a, b).pvalue) if len(a) > 1 and len(b) > 1 else 1.0


def changes(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, start: float) -> list[Finding]:
    known = frame[frame[measure.column].notna()]
    if len(known) < MIN_WINDOWS:
        return []
    values = known[measure.column].to_numpy(dtype=float)
    if measure.column == "pass_rate":  # binomial noise of a window's rate, from the night's own figures
        p, per_window = values.mean(), known["model_attempts"].mean()
        sigma = math.sqrt(max(p * (1 - p), 0.05) / per_window)
    else:
        sigma = max(noise(values), 0.02 * float(np.median(np.abs(values))), 1e-9)
    cuts = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(values.reshape(-1, 1)).predict(
        pen=PENALTY * sigma**2 * math.log(len(values)))
    found, windows_known = [], known["window"].to_numpy()
    for cut, before, after in steps(values, cuts):
        window = int(windows_known[cut])
        p_value = differs(measure, frame, calls, window, start)
        if matters(measure, before, after) and p_value < SIGNIFICANCE:
            found.append(Finding(measure, "change", window, before, after, p_value))
    return found


def steps(values: np.ndarray, cuts: list[int]) -> list[tuple[int, float, float]]:
    """(cut, level before, level after) of PELT's segments. A step rarely falls on a window's edge: the window it
    falls in sits between the two levels, and PELT gives it a short segment of its own. A segment of one or two
    windows strictly between its neighbours is such a transition: one step from one neighbour to the other, dated at
    the larger of its two jumps."""
    edges = [0, *cuts]
    segments = list(zip(edges, edges[1:], strict=False))
    levels = [float(values[a:b].mean()) for a, b in segments]
    found, index = [], 1
    while index < len(segments):
        before, level = levels[index - 1], levels[index]
        short = segments[index][1] - segments[index][0] <= 2
        if short and index + 1 < len(segments) and (before - level) * (level - levels[index + 1]) > 0:
            after = levels[index + 1]
            larger = abs(level - before) >= abs(after - level)
            found.append((segments[index][0] if larger else segments[index + 1][0], before, after))
            index += 2
        else:
            found.append((segments[index][0], before, level))
            index += 1
    return found


def hinge(x: np.ndarray, y: np.ndarray, at: float) -> tuple[float, float, float]:
    """Least squares of a line flat until `at`, straight after it: its level, its slope and its squared error."""
    design = np.column_stack([np.ones_like(x), np.maximum(0.0, x - at)])
    (level, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(level), float(slope), float(((design @ (level, slope) - y) ** 2).sum())


def onset(x: np.ndarray, y: np.ndarray) -> int:
    """Where a drift sets in: the bend that fits best, when it halves the error of one straight line (a leak from
    02:00); else the first window (a leak all night)."""
    errors = [hinge(x, y, x[i])[2] for i in range(len(x) - 2)]
    best = int(np.argmin(errors))
    return best if errors[best] < 0.5 * errors[0] else 0


def trend(measure: Measure, frame: pd.DataFrame) -> Finding | None:
    """Slow drift: a Mann–Kendall test over the windows, its size the fitted line from its onset to the last window."""
    known = frame[frame[measure.column].notna()]
    if len(known) < MIN_WINDOWS:
        return None
    x, y = known["window"].to_numpy(dtype=float), known[measure.column].to_numpy(dtype=float)
    tau = stats.kendalltau(x, y)
    if not tau.pvalue < SIGNIFICANCE:
        return None
    start = onset(x, y)
    level, slope, _ = hinge(x, y, x[start])
    before, after = level, level + slope * (x[-1] - x[start])
    if not matters(measure, before, after):
        return None
    return Finding(measure, "trend", int(x[start]), before, after, float(tau.pvalue))


def ramp_fits_better(measure: Measure, frame: pd.DataFrame, step: Finding, drift: Finding) -> bool:
    """Whether the drift's bent line fits the windows better than the step's two levels: a leak that set in late,
    which PELT cuts once, or a new level."""
    known = frame[frame[measure.column].notna()]
    x, y = known["window"].to_numpy(dtype=float), known[measure.column].to_numpy(dtype=float)
    sides = [y[x < step.window], y[x >= step.window]]
    return hinge(x, y, drift.window)[2] < sum(float(((side - side.mean()) ** 2).sum()) for side in sides)


def findings(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, start: float) -> list[Finding]:
    """A step where one change explains the series; a slow drift where the trend test holds and the changes are not
    one step to a new level (a ramp cut into stairs by PELT is a drift, as a leak is, from whenever it set in)."""
    steps, drift = changes(measure, frame, calls, start), trend(measure, frame)
    if drift is not None and (len(steps) != 1 or ramp_fits_better(measure, frame, steps[0], drift)):
        return [drift]
    return steps


def figure(measure: Measure, value: float) -> str:
    if measure.unit == "%":
        return f"{100 * value:.0f} %"
    if measure.unit == "bytes":
        return f"{value / 2**30:.1f} GiB"
    return f"{value:.2f} {measure.unit}" if value < 10 else f"{value:.0f} {measure.unit}"


def said(finding: Finding) -> str:
    """`TTFT p95 1.2 → 4.8 s`, memory as a growth: `server RSS +3.1 GiB`."""
    m = finding.measure
    if m.unit == "bytes":
        growth = finding.after - finding.before
        return f"{m.words} {'+' if growth >= 0 else '−'}{abs(growth) / 2**30:.1f} GiB"
    return f"{m.words} {figure(m, finding.before)} → {figure(m, finding.after)}"


def course(tasks: pd.DataFrame, calls: pd.DataFrame, samples: pd.DataFrame, events: pd.DataFrame, start: float,
           end: float) -> dict[str, Any]:
    """The windows, the changes and trends found, and the verdict (a line, and `held` true, false or None when the
    night is too short to tell)."""
    frame = windows(tasks, calls, samples, start, end)
    width = float(frame["width_s"].iloc[0])
    found = [f for m in MEASURES for f in findings(m, frame, calls, start)]
    restarts = events.loc[events["kind"] == "restart", "at"].tolist() if not events.empty else []
    judged = int(frame["model_attempts"].gt(0).sum())
    worse = sorted((f for f in found if f.degrades), key=lambda f: f.window)
    length = length_text(end - start)
    if judged < MIN_WINDOWS:
        held, line = None, f"too short to judge its course ({judged} windows with attempts, {MIN_WINDOWS} needed)"
    elif not worse:
        held, line = True, f"held up for {length} (no change beyond noise in quality, latency or memory)"
    else:
        first = worse[0]
        parts = [said(f) + ("" if f.window == first.window else f" from {clock(start + f.window * width, width)}")
                 + (" (slow drift)" if f.kind == "trend" else "") for f in worse]
        recovered = [f for f in found if not f.degrades and f.kind == "change" and f.window > first.window
                     and f.measure.column in {w.measure.column for w in worse}]
        tail = ""
        if recovered:
            at = start + recovered[0].window * width
            near = [r for r in restarts if abs(r - at) <= 1.5 * width]
            tail = (f"; recovered after the restart at {clock(near[0], width)}" if near
                    else f"; recovered from {clock(at, width)}")
        since = ("over the night" if first.kind == "trend" and first.window == 0
                 else f"from {clock(start + first.window * width, width)}")
        held, line = False, f"degraded {since}: {', '.join(parts)}{tail}"
    return {
        "held": held, "verdict": line, "window_s": width, "windows": frame,
        "findings": [{"measure": f.measure.column, "words": f.measure.words, "kind": f.kind, "window": f.window,
                      "at_s": f.window * width, "clock": clock(start + f.window * width, width),
                      "before": f.before, "after": f.after, "p_value": f.p_value, "degrades": f.degrades,
                      "said": said(f)} for f in found],
        "restarts": [{"at_s": r - start, "clock": clock(r, width)} for r in restarts],
    }
