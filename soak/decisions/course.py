"""The course of the night: did the stack hold up from start to end? The night is cut into 12–24 windows (an
attempt belongs to the window it started in, a call likewise), each with its quality, latency, error and memory
figures; soak.decisions.drift finds the changes and slow drift in them, soak.decisions.sight says what a night that
held could have seen and how the server's memory grew. The verdict is the one line a person reads first.
"""

import math
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from soak.decisions import energy, sight
from soak.decisions.drift import (
    MEMORY,
    MIN_WINDOWS,
    PASS_RATE,
    STREAMED,
    UNSTREAMED,
    Finding,
    Measure,
    findings,
    matters,
)
from soak.record import series
from soak.record.schema import MANGLED, MODEL_OUTCOMES
from soak.record.summary import wilson

WIDTHS = (5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 14400)
"""Window lengths in seconds: the shortest that cuts the night into at most MAX_WINDOWS."""
MAX_WINDOWS = 24


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


def timed(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls with their seconds per completion token: a call that is not streamed has no decode speed, and its
    duration grows with what it wrote as well as with a slower server."""
    tokens = pd.to_numeric(calls["completion_tokens"], errors="coerce")
    seconds = pd.to_numeric(calls["duration_s"], errors="coerce")
    return calls.assign(duration_s=seconds, s_per_token=(seconds / tokens).where(tokens > 0))


def windows(tasks: pd.DataFrame, calls: pd.DataFrame, samples: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """One row per window: its offsets, attempts, passes and pass rate of ordinary tasks (Wilson interval), false
    successes, call timing (TTFT p50/p95, decode and prefill tok/s; call duration p95 and seconds per completion token
for calls not streamed), mangled tool calls, timeouts, failed calls,
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
    ok = timed(calls[calls["status"] == "ok"])
    ok = ok.assign(window=index(ok["started_at"]), **{column: pd.to_numeric(ok[column], errors="coerce") for column in
                                                      ("ttft_s", "decode_tps", "prompt_tokens", "cached_tokens")})
    uncached = ok["prompt_tokens"].fillna(0) - ok["cached_tokens"].fillna(0)
    ok = ok.assign(prefill_tps=(uncached / ok["ttft_s"]).where(ok["ttft_s"] > 0))
    grouped = ok.groupby("window")
    frame["ttft_p50"] = frame["window"].map(grouped["ttft_s"].median())
    frame["ttft_p95"] = frame["window"].map(grouped["ttft_s"].quantile(0.95))
    frame["decode_tps"] = frame["window"].map(grouped["decode_tps"].median())
    frame["prefill_tps"] = frame["window"].map(grouped["prefill_tps"].median())
    frame["duration_p95"] = frame["window"].map(grouped["duration_s"].quantile(0.95))
    frame["s_per_token"] = frame["window"].map(grouped["s_per_token"].median())
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


def measures(calls: pd.DataFrame) -> tuple[Measure, ...]:
    """The pass rate, latency as the calls were timed (TTFT and decode speed where they were streamed, else the call's
    duration and its seconds per completion token) and memory."""
    streamed = pd.to_numeric(calls.loc[calls["status"] == "ok", "ttft_s"], errors="coerce").notna().any()
    return (PASS_RATE, *(STREAMED if streamed else UNSTREAMED), *MEMORY)


def degraded(found: list[Finding], restarts: list[float], start: float, width: float) -> str:
    """`degraded from 02:10: TTFT p95 1.2 → 4.8 s, pass rate 71 % → 48 % from 02:30`, with a recovery after it."""
    worse = sorted((f for f in found if f.degrades), key=lambda f: f.window)
    first = worse[0]
    parts = [said(f) + ("" if f.window == first.window else f" from {clock(start + f.window * width, width)}")
             + (" (slow drift)" if f.kind == "trend" else "") for f in worse]
    recovered = [f for f in found if not f.degrades and f.kind == "change" and f.window > first.window
                 and f.measure.column in {w.measure.column for w in worse} and back(f, worse)]
    tail = ""
    if recovered:
        at = start + recovered[0].window * width
        near = [r for r in restarts if abs(r - at) <= 1.5 * width]
        tail = (f"; recovered after the restart at {clock(near[0], width)}" if near
                else f"; recovered from {clock(at, width)}")
    since = ("over the night" if first.kind == "trend" and first.window == 0
             else f"from {clock(start + first.window * width, width)}")
    return f"degraded {since}: {', '.join(parts)}{tail}"


def back(eased: Finding, worse: list[Finding]) -> bool:
    """A change for the better is a recovery only where it brings the measure back to within what matters of its level
    before it first degraded: a server slowed fourfold whose calls then ran twice as fast as at their worst is still
    slowed."""
    before = next(w.before for w in worse if w.measure.column == eased.measure.column)
    return not matters(eased.measure, before, eased.after)


def settled(frame: pd.DataFrame, grown: sight.Growth | None) -> pd.DataFrame:
    """The windows the detector reads: without the server's RSS up to where a ramp that levelled off got most of the
    way (its growth is named as such, not as a change)."""
    if grown is None or not grown.levelled:
        return frame
    ramp = int(grown.reached_s // float(frame["width_s"].iloc[0]))
    return frame.assign(server_rss_bytes=frame["server_rss_bytes"].where(frame["window"] > ramp))


def remarks(found: list[Finding], grown: sight.Growth | None, watched: tuple[Measure, ...]) -> list[str]:
    """What the verdict adds to its line: memory that grew several-fold (unless a leak finding names it already) and
    which latency it read where the calls were not streamed."""
    said = []
    leaked = any(f.measure.column == "server_rss_bytes" and f.degrades for f in found)
    if grown is not None and (grown.levelled or not leaked):
        said.append(grown.said(then_held=not leaked))
    if UNSTREAMED[0] in watched:
        said.append("latency read from call duration and seconds per completion token: the calls were not streamed")
    return said


def course(tasks: pd.DataFrame, calls: pd.DataFrame, samples: pd.DataFrame, events: pd.DataFrame, start: float,
           end: float) -> dict[str, Any]:
    """The windows, the changes and trends found, what the night could have seen (`could_see`) and the verdict (a
    line, and `held` true, false or None when the night is too short to tell)."""
    frame = windows(tasks, calls, samples, start, end)
    width = float(frame["width_s"].iloc[0])
    calls = timed(calls)
    watched = measures(calls)
    grown = sight.growth(server_memory(samples), start, end, MEMORY[0].matters)
    detect = settled(frame, grown)
    found = [f for m in watched for f in findings(m, detect, calls, start)]
    seen = sight.could_see(detect, calls, watched)
    restarts = events.loc[events["kind"] == "restart", "at"].tolist() if not events.empty else []
    judged = int(frame["model_attempts"].gt(0).sum())
    extra = "".join(f"; {remark}" for remark in remarks(found, grown, watched))
    if judged < MIN_WINDOWS:
        held, line = None, f"too short to judge its course ({judged} windows with attempts, {MIN_WINDOWS} needed)"
    elif not any(f.degrades for f in found):
        could = f"; {sight.could_see_text(seen)}" if seen else ""
        held, line = True, (f"held up for {length_text(end - start)} (no change beyond noise in quality, latency or "
                            f"memory{extra}{could})")
    else:
        held, line = False, degraded(found, restarts, start, width) + extra
    return {
        "held": held, "verdict": line, "window_s": width, "windows": frame, "could_see": seen,
        "latency": [m.column for m in watched if m.per_call],
        "memory_growth": grown._asdict() if grown else None,
        "findings": [{"measure": f.measure.column, "words": f.measure.words, "kind": f.kind, "window": f.window,
                      "at_s": f.window * width, "clock": clock(start + f.window * width, width),
                      "before": f.before, "after": f.after, "p_value": f.p_value, "degrades": f.degrades,
                      "said": said(f), "size": sight.size(f.measure, f.before, f.after,
                                                          (end - start - f.window * width) / 60)} for f in found],
        "restarts": [{"at_s": r - start, "clock": clock(r, width)} for r in restarts],
    }
