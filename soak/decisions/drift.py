"""The course of the night's detector: in one figure's series of windows, the steps (ruptures' PELT, a mean shift,
penalty PENALTY·σ²·ln n with σ the series' own noise, so a steady night raises no alarm) kept only when the two
sides differ beyond chance and by a size that matters, and slow drift (a Mann–Kendall test, scipy), sized by a line
from the window where it set in. Its thresholds were set on generated nights of known truth (soak.sim.nights,
bench/course_calibration.py), whose quiet nights they keep quiet."""

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import ruptures
from scipy import stats

MIN_WINDOWS = 6
"""Fewer windows with data than this: too short a night to tell a change from noise."""
PENALTY = 3.0
SIGNIFICANCE = 0.001
"""Both sides of a change must differ at this level (a two-proportion z test, Mann–Whitney U for call times); a
trend's Mann–Kendall p-value likewise."""


BENT_BETTER = 0.75
"""A drift rather than a step where its bent line leaves at most this share of the best step's squared error; a bend
rather than one straight line likewise."""


class Measure(NamedTuple):
    """A figure watched for change: its column, its words, which way is worse, the smallest change that matters (a
    difference, or for `ratio` measures a factor), how it is written, and the calls' column its windows summarise
    (empty: the windows' values are all there is)."""

    column: str
    words: str
    worse: int
    """+1: a rise is a degradation (latency, memory); -1: a fall is (pass rate, decode speed)."""
    matters: float
    ratio: bool
    unit: str
    per_call: str = ""


PASS_RATE = Measure("pass_rate", "pass rate", -1, 0.15, False, "%")
STREAMED = (Measure("ttft_p95", "TTFT p95", +1, 1.25, True, "s", "ttft_s"),
            Measure("decode_tps", "decode tok/s", -1, 1.25, True, "tok/s", "decode_tps"))
"""Latency where calls are streamed: the first token's wait and the decode speed."""
UNSTREAMED = (Measure("duration_p95", "call duration p95", +1, 1.25, True, "s", "duration_s"),
              Measure("s_per_token", "s per completion token", +1, 1.25, True, "s", "s_per_token"))
"""Latency where calls are not streamed (no first token to time): the whole call, and its time per token made."""
MEMORY = (Measure("server_rss_bytes", "server RSS", +1, 256 * 2**20, False, "bytes"),
          Measure("gpu_memory_bytes", "GPU memory", +1, 512 * 2**20, False, "bytes"))


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


def sigma(measure: Measure, known: pd.DataFrame) -> float:
    """A window's noise in the measure: binomial for the pass rate (from the night's own rate and attempts a window),
    the series' own otherwise, never below 2 % of its level."""
    values = known[measure.column].to_numpy(dtype=float)
    if measure is PASS_RATE:
        p, per_window = values.mean(), known["model_attempts"].mean()
        return math.sqrt(max(p * (1 - p), 0.05) / per_window)
    return max(noise(values), 0.02 * float(np.median(np.abs(values))), 1e-9)


def matters(measure: Measure, before: float, after: float) -> bool:
    if measure.ratio:
        low, high = sorted((before, after))
        return low > 0 and high / low >= measure.matters
    return abs(after - before) >= max(measure.matters, 0.1 * abs(before) if measure.unit == "bytes" else 0.0)


def differs(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, cut: int, start: float) -> float:
    """The p-value of the two sides of a cut: pooled counts for the pass rate, the calls' own figures for latency
    (Mann–Whitney U), the windows' means against the series' own noise otherwise (memory: its readings follow one
    another too closely to count as many, and a rank test of a few windows a side can never reach SIGNIFICANCE)."""
    left, right = frame[frame["window"] < cut], frame[frame["window"] >= cut]
    if measure is PASS_RATE:
        n1, n2 = left["model_attempts"].sum(), right["model_attempts"].sum()
        c1, c2 = left["passes"].sum(), right["passes"].sum()
        pooled = (c1 + c2) / (n1 + n2)
        spread = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2)) if n1 and n2 else 0.0
        return float(2 * stats.norm.sf(abs(c1 / n1 - c2 / n2) / spread)) if spread > 0 else 1.0
    if measure.per_call:
        ok = calls[calls["status"] == "ok"]
        edge = start + cut * float(frame["width_s"].iloc[0])
        column = measure.per_call
        a, b = ok.loc[ok["started_at"] < edge, column].dropna(), ok.loc[ok["started_at"] >= edge, column].dropna()
        return float(stats.mannwhitneyu(a, b).pvalue) if len(a) and len(b) else 1.0
    a, b = left[measure.column].dropna(), right[measure.column].dropna()
    known = frame[frame[measure.column].notna()]
    spread = sigma(measure, known) * math.sqrt(1 / len(a) + 1 / len(b)) if len(a) and len(b) else 0.0
    return float(2 * stats.norm.sf(abs(a.mean() - b.mean()) / spread)) if spread > 0 else 1.0


def changes(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, start: float) -> list[Finding]:
    known = frame[frame[measure.column].notna()]
    if len(known) < MIN_WINDOWS:
        return []
    values = known[measure.column].to_numpy(dtype=float)
    cuts = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(values.reshape(-1, 1)).predict(
        pen=PENALTY * sigma(measure, known) ** 2 * math.log(len(values)))
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


def bend(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Where a drift sets in, and the squared error of its bent line: the bend that fits best (a quarter-window grid,
    since a leak rarely sets in on a window's edge), when it fits clearly better than one straight line (a leak
    from 02:00); else the first window's start (a leak all night)."""
    grid = np.arange(x[0] - 0.5, x[-3], 0.25)
    errors = np.array([hinge(x, y, at)[2] for at in grid])
    best = int(np.argmin(errors))
    best = best if errors[best] < BENT_BETTER * errors[0] else 0
    return float(grid[best]), float(errors[best])


def centres(known: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The windows' middles (a window's mean stands for its middle, in windows from the night's start) and values."""
    return known["window"].to_numpy(dtype=float) + 0.5, known[column].to_numpy(dtype=float)


def bent(measure: Measure, known: pd.DataFrame, p_value: float) -> Finding | None:
    """A drift along the bent line that fits the windows best: dated from its bend, sized from there to the last
    window; None when that size does not matter."""
    x, y = centres(known, measure.column)
    at, _ = bend(x, y)
    level, slope, _ = hinge(x, y, at)
    before, after = level, level + slope * (x[-1] - at)
    return Finding(measure, "trend", max(0, int(at)), before, after, p_value) if matters(measure, before, after) \
        else None


def trend(measure: Measure, frame: pd.DataFrame) -> Finding | None:
    """Slow drift: a Mann–Kendall test over the windows, then the bent line."""
    known = frame[frame[measure.column].notna()]
    if len(known) < MIN_WINDOWS:
        return None
    x, y = centres(known, measure.column)
    tau = stats.kendalltau(x, y)
    return bent(measure, known, float(tau.pvalue)) if tau.pvalue < SIGNIFICANCE else None


def ramp_fits_better(measure: Measure, frame: pd.DataFrame) -> bool:
    """Whether the drift's bent line fits the windows clearly better than the best single step anywhere: a ramp,
    which PELT cuts into stairs or once, or a step (whose window half-way through, and the noise after it, can make it
    look like a ramp)."""
    known = frame[frame[measure.column].notna()]
    x, y = centres(known, measure.column)
    total, squares, count = np.cumsum(y), np.cumsum(y**2), np.arange(1, len(y) + 1)
    cuts = np.arange(2, len(y) - 1)
    left = squares[cuts - 1] - total[cuts - 1] ** 2 / cuts
    right = (squares[-1] - squares[cuts - 1]) - (total[-1] - total[cuts - 1]) ** 2 / (count[-1] - cuts)
    return bend(x, y)[1] < BENT_BETTER * float((left + right).min())


def findings(measure: Measure, frame: pd.DataFrame, calls: pd.DataFrame, start: float) -> list[Finding]:
    """The steps PELT found, or one slow drift instead where a bent line fits them better than any one step (its
    p-value theirs: a leak that sets in late is too short for the trend test), or where the trend test holds and no
    step does (a ramp cut into stairs by PELT is a drift, as a leak is, from whenever it set in)."""
    steps = changes(measure, frame, calls, start)
    if steps and ramp_fits_better(measure, frame):
        drift = bent(measure, frame[frame[measure.column].notna()], min(f.p_value for f in steps))
        return [drift] if drift is not None else steps
    drift = None if steps else trend(measure, frame)
    return [drift] if drift is not None else steps
