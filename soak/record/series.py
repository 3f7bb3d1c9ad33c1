"""Time series from samples.csv: gauges downsampled, counters turned into per-interval increments."""

from typing import Any

import numpy as np
import pandas as pd

MAX_POINTS = 600
"""Points per plotted series: enough for an 8 h night at ~1 min resolution, cheap to draw."""


def time_bucket(at: pd.Series, start: float, width: float) -> pd.Series:
    """Each timestamp's bucket: whole `width`s since `start`. The one bucketing of every rate, share and chart."""
    return ((at - start) // width).astype(int).rename("bucket")


def bucket_middle(bucket: Any, start: float, width: float) -> Any:
    """Unix time of a bucket's middle."""
    return start + (bucket + 0.5) * width


def window(samples: pd.DataFrame, source: str | None, metric: str) -> pd.DataFrame:
    """`at, source, labels, value` rows of one metric (any server when source is 'server:*'), numeric values only."""
    rows = samples[samples["metric"] == metric]
    if source == "server:*":
        rows = rows[rows["source"].str.startswith("server:")]
    elif source is not None:
        rows = rows[rows["source"] == source]
    return rows.loc[rows["value"].notna(), ["at", "source", "labels", "value"]]


def summed(samples: pd.DataFrame, source: str, metric: str) -> pd.DataFrame:
    """One value per timestamp, summed over labels (all GPUs together); columns at, value."""
    rows = window(samples, source, metric)
    return rows.groupby("at")["value"].sum().reset_index()


def downsample(frame: pd.DataFrame, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Mean per time bucket so a series (columns at, value) has at most `max_points` points."""
    if len(frame) <= max_points:
        return frame
    span = frame["at"].max() - frame["at"].min()
    width = span / max_points if span > 0 else 1.0
    buckets = time_bucket(frame["at"], frame["at"].min(), width)
    return frame.groupby(buckets)[["at", "value"]].mean().reset_index(drop=True)


def increments(samples: pd.DataFrame, metric: str, source: str | None = "server:*") -> pd.DataFrame:
    """Per-interval increase of a cumulative counter; a drop means a server restart, so the new value is the delta."""
    rows = window(samples, source, metric).sort_values(["source", "labels", "at"], kind="stable")
    if rows.empty:
        return rows.assign(delta=pd.Series(dtype=float))
    diff = rows["value"].diff()
    same = (rows["source"] == rows["source"].shift()) & (rows["labels"] == rows["labels"].shift())
    delta = np.where(~same, 0.0, np.where(diff < 0, rows["value"], diff))
    return rows.assign(delta=delta)


def stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The frames one under the other; the empty ones only lend their columns."""
    full = [frame for frame in frames if not frame.empty]
    return pd.concat(full, ignore_index=True) if full else frames[0]


def ratio_over_time(
    samples: pd.DataFrame, numerator: str, denominator: str | tuple[str, ...], start: float, width: float
) -> pd.DataFrame:
    """Σ Δnumerator / Σ Δdenominator per server and time bucket (hit rates, tok/s); columns source, at, value.

    Several denominator counters are summed (llama-server counts cached and evaluated prompt tokens apart)."""
    names = (denominator,) if isinstance(denominator, str) else denominator
    num, den = increments(samples, numerator), stacked([increments(samples, name) for name in names])
    if num.empty or den.empty:
        return pd.DataFrame(columns=["source", "at", "value"])
    parts = []
    for frame, name in ((num, "num"), (den, "den")):
        buckets = time_bucket(frame["at"], start, width)
        parts.append(frame.groupby([frame["source"], buckets])["delta"].sum().rename(name))
    joined = pd.concat(parts, axis=1).fillna(0.0)
    joined = joined[joined["den"] > 0]
    out = joined.reset_index()
    out["at"] = bucket_middle(out["bucket"], start, width)
    out["value"] = out["num"] / out["den"]
    return out[["source", "at", "value"]]


def counter_total(samples: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Total increase of a counter over the run per source and labels (restarts handled)."""
    rows = increments(samples, metric)
    return rows.groupby(["source", "labels"])["delta"].sum().reset_index()


def spec_decode(samples: pd.DataFrame) -> pd.DataFrame:
    """Per server and draft position: acceptance = Δaccepted_per_pos / Δdrafts (vLLM spec_decode/metrics.py)."""
    drafts = counter_total(samples, "vllm:spec_decode_num_drafts_total")
    per_pos = counter_total(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total")
    if drafts.empty or per_pos.empty:
        return pd.DataFrame(columns=["source", "position", "acceptance"])
    per_pos["position"] = pd.to_numeric(per_pos["labels"].str.extract(r"position=(\d+)")[0], errors="coerce")
    merged = per_pos.merge(drafts[["source", "delta"]].rename(columns={"delta": "drafts"}), on="source")
    merged = merged[(merged["drafts"] > 0) & merged["position"].notna()]
    merged["acceptance"] = merged["delta"] / merged["drafts"]
    return merged[["source", "position", "acceptance"]].sort_values(["source", "position"], ignore_index=True)


def spec_decode_summary(samples: pd.DataFrame) -> pd.DataFrame:
    """Per server: acceptance rate Δaccepted/Δdraft_tokens and mean acceptance length 1 + Δaccepted/Δdrafts, from
    vLLM's or llama-server's counters (same names under each prefix)."""
    totals = {
        name: stacked([counter_total(samples, f"{engine}:spec_decode_num_{name}_total") for engine in
                       ("vllm", "llamacpp")]).groupby("source")["delta"].sum()
        for name in ("drafts", "draft_tokens", "accepted_tokens")
    }
    frame = pd.DataFrame(totals).fillna(0.0)
    frame = frame[(frame["drafts"] > 0) & (frame["draft_tokens"] > 0)]
    if frame.empty:
        return pd.DataFrame(columns=["source", "drafts", "acceptance_rate", "mean_acceptance_length"])
    frame["acceptance_rate"] = frame["accepted_tokens"] / frame["draft_tokens"]
    frame["mean_acceptance_length"] = 1 + frame["accepted_tokens"] / frame["drafts"]
    return frame.reset_index(names="source")[["source", "drafts", "acceptance_rate", "mean_acceptance_length"]]


def memory_trend(samples: pd.DataFrame) -> pd.DataFrame:
    """Start vs end (median of the first and last tenth) of host MemAvailable and every process RSS, in MB."""
    rows = []
    host = summed(samples, "host", "mem_available_bytes")
    if not host.empty:
        rows.append(("host MemAvailable", host, -1.0))
    rss = window(samples, None, "rss_bytes")
    for source, part in rss.groupby("source", sort=True):
        rows.append((f"{source} RSS", part.groupby("at")["value"].sum().reset_index(), 1.0))
    gpu = summed(samples, "gpu", "gpu_memory_used_bytes")
    if not gpu.empty:
        rows.append(("GPU memory used", gpu, 1.0))
    out = []
    for label, series, sign in rows:
        series = series.sort_values("at")
        tenth = max(len(series) // 10, 1)
        start, end = series["value"].iloc[:tenth].median(), series["value"].iloc[-tenth:].median()
        out.append({
            "series": label, "start_mb": start / 2**20, "end_mb": end / 2**20,
            "growth_mb": sign * (end - start) / 2**20, "hours": (series["at"].iloc[-1] - series["at"].iloc[0]) / 3600,
        })
    return pd.DataFrame(out, columns=["series", "start_mb", "end_mb", "growth_mb", "hours"])


def sampler_errors(samples: pd.DataFrame) -> pd.DataFrame:
    """Telemetry gaps: error samples per source with one example."""
    errors = samples[(samples["error"] != "") | (samples["metric"] == "error")]
    if errors.empty:
        return pd.DataFrame(columns=["source", "count", "example"])
    grouped = errors.groupby("source")
    return pd.DataFrame({"count": grouped.size(), "example": grouped["error"].first()}).reset_index().sort_values(
        "count", ascending=False, ignore_index=True)
