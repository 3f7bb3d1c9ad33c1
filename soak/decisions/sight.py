"""What the course of a night could have seen, and how the server's memory grew. A night that held says, per measure,
the smallest change its own noise and attempt count would have let the detector (soak.decisions.drift) find at its
thresholds with 80 % power: a night of 40 attempts and one of 4,000 do not hold up alike. The sizes are the usual
normal approximations (a two-proportion test, a shift in log call times for the rank test, PELT's penalty against a
step's cost, a line's slope for a leak) at the place in the middle half of the night where a change is hardest to
see, corrected for few windows (the noise PELT is scaled by is itself estimated from them, and a step falls inside a
window, which blurs it); bench/course_calibration.py checks them on nights of known truth. Memory that grows
several-fold is named whatever its shape: a ramp that levels off is growth (weights, caches), one that does not is a
leak."""

import math
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from soak.decisions.drift import MIN_WINDOWS, PASS_RATE, PENALTY, SIGNIFICANCE, Measure, sigma

POWER = float(stats.norm.ppf(0.8))
"""The z of 80 % power."""
TEST = float(stats.norm.ppf(1 - SIGNIFICANCE / 2))
SIDE = 0.25
"""A step a quarter into the night (or three quarters: fewest attempts on one side of the middle half's steps); a
leak from three quarters in (the shortest of the middle half's)."""
RANK_EFFICIENCY = 3 / math.pi
"""The rank test's efficiency against a t test on normal data: it needs 1/0.955 as many calls."""
SEVERAL = 2.0
"""Growth by this factor from the first reading is named in the verdict."""
MB = 1e6


MAD_EFFICIENCY = 0.37
"""The median absolute deviation's efficiency against the standard deviation on normal data: a noise read from the
n − 1 differences of n windows is worth about 0.37·(n − 1) degrees of freedom (4 on a 1-hour night's 12)."""


def step_margin(windows: int, estimated: bool) -> float:
    """How many of its own standard errors a step must be to pass PELT's penalty with 80 % power. Where the penalty
    scales with the series' own noise, read from these few windows, the step is weighed against an estimate: the
    normal approximation of the noncentral t widens the power term by √(1 + c²/2ν)."""
    bar = math.sqrt(PENALTY * math.log(windows))
    spread = math.sqrt(1 + bar**2 / (2 * MAD_EFFICIENCY * (windows - 1))) if estimated else 1.0
    return bar + POWER * spread


def kept(windows: int) -> float:
    """The share of a step the two sides' difference keeps: a change sets in inside a window, whose mix of both levels
    the detector counts with one side (the nearer, in PELT), a quarter of a window's step lost on average, from the
    shorter side's windows at worst."""
    return 1 - 0.25 / (windows * SIDE)


def pass_rate(known: pd.DataFrame) -> float:
    """Points of pass rate: the two-proportion test's, PELT's and the size gate's smallest drop, the largest of them,
    of a drop blurred by the window it sets in."""
    n = float(known["model_attempts"].sum())
    p = float(known["passes"].sum()) / n
    spread = math.sqrt(p * (1 - p) / n / (SIDE * (1 - SIDE)))
    by_pelt = step_margin(len(known), False) * sigma(PASS_RATE, known) / math.sqrt(len(known) * SIDE * (1 - SIDE))
    return max((TEST + POWER) * spread, by_pelt, PASS_RATE.matters + POWER * spread) / kept(len(known))


def call_time(measure: Measure, known: pd.DataFrame, calls: pd.DataFrame) -> float:
    """A factor (×, or ÷ for a speed): the rank test's on the calls' own figures (a shift in their logarithm), PELT's
    and the size gate's on the windows' values, the largest of them, of a change blurred by the window it sets in;
    infinite where no fall could be seen."""
    figures = pd.to_numeric(calls.loc[calls["status"] == "ok", measure.per_call], errors="coerce")
    logs = np.log(figures[figures > 0].to_numpy(dtype=float))
    spread_log = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    share = kept(len(known))
    by_test = math.exp((TEST + POWER) * spread_log / math.sqrt(len(logs) * SIDE * (1 - SIDE) * RANK_EFFICIENCY)
                       / share)
    level = float(np.median(known[measure.column]))
    error = sigma(measure, known) / math.sqrt(len(known) * SIDE * (1 - SIDE)) / level
    gate = measure.matters * (1 + POWER * error)
    step = max(step_margin(len(known), True) * error, gate - 1 if measure.worse > 0 else 1 - 1 / gate) / share
    return max(by_test, 1 + step if measure.worse > 0 else (1 / (1 - step) if step < 1 else math.inf))


def leak(measure: Measure, known: pd.DataFrame, width: float) -> float:
    """MB a minute: the trend test's smallest slope over the last quarter's windows (a line's slope at the test's
    level with 80 % power), or the size gate's growth over them, the larger."""
    x = known["window"].to_numpy(dtype=float)
    bent = np.maximum(0.0, x - x[0] - (1 - SIDE) * (x[-1] - x[0]))
    noise = sigma(measure, known)
    by_test = (TEST + POWER) * noise / math.sqrt(float(((bent - bent.mean()) ** 2).sum()))
    level = float(np.median(known[measure.column]))
    by_size = (max(measure.matters, 0.1 * level) + POWER * noise) / max(float(bent[-1]), 1.0)
    return max(by_test, by_size) / (width / 60) / MB


def could_see(frame: pd.DataFrame, calls: pd.DataFrame, watched: tuple[Measure, ...]) -> dict[str, dict[str, Any]]:
    """Per measure with enough windows: the smallest change it would have found (`size`: points, a factor or MB a
    minute) and how the verdict says it."""
    width = float(frame["width_s"].iloc[0])
    seen: dict[str, dict[str, Any]] = {}
    for measure in watched:
        known = frame[frame[measure.column].notna()]
        if len(known) < MIN_WINDOWS:
            continue
        if measure is PASS_RATE:
            size = pass_rate(known)
            said = f"{measure.words} −{100 * size:.0f} points"
        elif measure.per_call:
            size = call_time(measure, known, calls)
            said = f"{measure.words} {'×' if measure.worse > 0 else '÷'}{size:.2f}"
        else:
            size = leak(measure, known, width)
            said = f"a {measure.words} leak of {size:.0f} MB/min" if size >= 10 else \
                f"a {measure.words} leak of {size:.1f} MB/min"
        seen[measure.column] = {"size": size, "said": said}
    return seen


def could_see_text(seen: dict[str, dict[str, Any]]) -> str:
    """`would have seen: pass rate −14 points, TTFT p95 ×1.30, a server RSS leak of 6 MB/min or more`."""
    return f"would have seen: {', '.join(s['said'] for s in seen.values())} or more" if seen else ""


def size(measure: Measure, before: float, after: float, minutes: float) -> float:
    """A finding's size in could_see's terms: points of pass rate, a factor, or MB a minute over `minutes`."""
    if measure is PASS_RATE:
        return abs(after - before)
    if measure.per_call:
        low, high = sorted((before, after))
        return high / low if low > 0 else math.inf
    return abs(after - before) / max(minutes, 1.0) / MB


def unseen(held: dict[str, Any], other: dict[str, Any]) -> str:
    """Where one night held and another degraded by less than the first could have seen: the caveat that the first's
    holding is no evidence it is better (`soak compare`, `soak sweep`); empty otherwise. Both are course() results."""
    seen = held.get("could_see") or {}
    if held.get("held") is not True or other.get("held") is not False:
        return ""
    missed = [f for f in other["findings"] if f["degrades"] and f["measure"] in seen
              and f["size"] < seen[f["measure"]]["size"]]
    if not missed:
        return ""
    could = could_see_text({f["measure"]: seen[f["measure"]] for f in missed})
    return (f"held, but would not have seen {', '.join(f['said'] for f in missed)} (it {could}): holding is no "
            "evidence it is better")


class Growth(NamedTuple):
    """The server's memory from its first reading to the level it grew to, and when it got 90 % of the way."""

    first: float
    last: float
    reached_s: float
    levelled: bool
    """Reached within the first quarter of the night and held through the second: a ramp that levelled off."""

    def said(self, then_held: bool) -> str:
        grew = f"server RSS grew {self.first / 2**30:.1f} → {self.last / 2**30:.1f} GiB"
        if not self.levelled:
            return f"{grew} over the night"
        return f"{grew} in the first {span(self.reached_s)}" + (", then held" if then_held else "")


def span(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{max(minutes, 1)} min"


def growth(memory: pd.DataFrame, start: float, end: float, floor: float) -> Growth | None:
    """Growth of `memory` (at, value) by SEVERAL times and by `floor` bytes or more from its first reading: to the
    level it held over the night's second quarter, when it got 90 % of the way there in the first quarter (a ramp
    that levelled off; what it did after is the detector's to read), else to its level in the last tenth (a leak);
    None when it grew less."""
    if len(memory) < 2:
        return None
    at, values = memory["at"].to_numpy(dtype=float) - start, memory["value"].to_numpy(dtype=float)
    length, first = end - start, float(values[0])

    def grew(level: float) -> bool:
        return level >= SEVERAL * first and level - first >= floor

    def reached(level: float) -> float:
        return float(at[np.argmax(values >= first + 0.9 * (level - first))])

    plateau = values[(at >= 0.25 * length) & (at < 0.5 * length)]
    if len(plateau) and grew(level := float(np.median(plateau))) and reached(level) <= 0.25 * length:
        return Growth(first, level, reached(level), True)
    tail = values[at >= 0.9 * length]
    if len(tail) and grew(level := float(np.median(tail))):
        return Growth(first, level, reached(level), False)
    return None
