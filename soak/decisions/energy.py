"""What a solved task costs: the night's energy per source (the GPUs through NVML, the CPU packages through RAPL, the
exporter of the server's host), joules and money per solved task, tokens per joule, and how often a GPU was held back
by its power or thermal limits. Read from samples.csv (soak.stack.energy wrote it).

A meter is one source's counter (`*_energy_joules`) where it has one, else its power (`*_power_watts`) integrated
over the readings, and says which. The night's energy counts the GPUs and the CPU packages once each: the exporter of
the server's host where an endpoint names one (the server runs there), else this host's own. It is the whole device's
energy, idle included, not soak's share: a solved task is charged with the night's energy over the passes of
ordinary tasks, and the idle share says how much of it went by while no call was in flight."""

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from soak.config import Cost
from soak.record.read import RunRecord
from soak.stack.energy import POWER_EVENTS, THERMAL_EVENTS

KINDS = {"gpu": "GPU", "cpu": "CPU packages"}
THROTTLE_NOTED = 0.01
"""A GPU held back in at least this share of its readings is named in the report's lines."""


@dataclass
class Meter:
    """One source's energy of one kind over the night: the intervals between its readings, each with its joules."""

    source: str
    kind: str
    method: str
    """`counter` (the device's own energy counter), `power` (its power integrated over the readings) or both."""
    devices: int
    starts: np.ndarray
    ends: np.ndarray
    joules: np.ndarray

    @property
    def total(self) -> float:
        return float(self.joules.sum())

    @property
    def span(self) -> float:
        return float(self.ends.max() - self.starts.min()) if len(self.starts) else 0.0

    @property
    def name(self) -> str:
        where = "this host" if self.source in KINDS else f"the exporter of {self.source.removeprefix('energy:')}"
        how = {"gpu": "NVML", "cpu": "RAPL"}[self.kind] if self.source in KINDS else "Prometheus"
        return f"{KINDS[self.kind]} ({how}, {where})"


def device_intervals(readings: pd.DataFrame, kind: str) -> tuple[str, np.ndarray, np.ndarray, np.ndarray] | None:
    """(method, starts, ends, joules) of one device's readings: its counter's steps (a step down is a reset after
    a restart, and counts nothing), else its power integrated by the trapezoid rule; None with fewer than two."""
    for name, method in ((f"{kind}_energy_joules", "counter"), (f"{kind}_power_watts", "power")):
        series = readings[readings["metric"] == name].dropna(subset=["value"]).sort_values("at")
        if len(series) < 2:
            continue
        at, value = series["at"].to_numpy(float), series["value"].to_numpy(float)
        if method == "counter":
            joules = np.clip(np.diff(value), 0.0, None)
        else:
            joules = np.diff(at) * (value[1:] + value[:-1]) / 2
        return method, at[:-1], at[1:], joules
    return None


def meters(samples: pd.DataFrame, start: float, end: float) -> list[Meter]:
    """Every source's meter per kind, its devices summed, over the night's span."""
    energy = samples[samples["metric"].str.match(r"^(gpu|cpu)_(energy_joules|power_watts)$")]
    energy = energy[(energy["at"] >= start) & (energy["at"] <= end)]
    found = []
    for (source, kind), rows in energy.groupby([energy["source"], energy["metric"].str.split("_").str[0]], sort=True):
        parts = [part for _, device in rows.groupby("labels")
                 if (part := device_intervals(device, str(kind))) is not None]
        if not parts:
            continue
        methods = sorted({method for method, *_ in parts})
        found.append(Meter(str(source), str(kind), " and ".join(methods), len(parts),
                           np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
                           np.concatenate([p[3] for p in parts])))
    return found


def counted(found: list[Meter]) -> list[Meter]:
    """One meter per kind: the server host's exporter where there is one, else this host's."""
    chosen = []
    for kind in KINDS:
        of_kind = [m for m in found if m.kind == kind]
        remote = [m for m in of_kind if m.source not in KINDS]
        chosen += remote or of_kind
    return chosen


def busy(calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The stretches of the night with at least one call in flight, merged: (starts, ends), sorted."""
    if calls.empty:
        return np.array([]), np.array([])
    begins = calls["started_at"].to_numpy(float)
    order = np.argsort(begins)
    begins, ends = begins[order], (begins + calls["duration_s"].fillna(0).to_numpy(float))[order]
    reach = np.maximum.accumulate(ends)
    new = np.r_[True, begins[1:] > reach[:-1]]
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(begins) - 1]
    return begins[new], reach[last]


def idle_joules(meter: Meter, stretches: tuple[np.ndarray, np.ndarray]) -> float:
    """The joules of the meter's intervals that no call in flight overlapped."""
    starts, ends = stretches
    if not len(starts):
        return meter.total
    after = np.searchsorted(ends, meter.starts, side="right")
    overlapped = (after < len(starts)) & (starts[np.minimum(after, len(starts) - 1)] < meter.ends)
    return float(meter.joules[~overlapped].sum())


def throttling(samples: pd.DataFrame) -> list[dict[str, Any]]:
    """Per GPU NVML read: the share of its readings held back by a power limit and by heat."""
    events = samples[(samples["source"] == "gpu") & (samples["metric"] == "gpu_clock_events")].dropna(subset=["value"])
    found = []
    for labels, rows in events.groupby("labels", sort=True):
        bits = rows["value"].astype(int)
        found.append({"gpu": str(labels).removeprefix("gpu="), "readings": len(rows),
                      "power_share": float(((bits & POWER_EVENTS) != 0).mean()),
                      "thermal_share": float(((bits & THERMAL_EVENTS) != 0).mean())})
    return found


def money(cost: Cost, kwh: float | None, hours: float) -> dict[str, Any] | None:
    """The night's price from the user's prices (energy at `kwh_price`, the hardware at `hardware_per_hour`), None
    when none is given: nothing is priced without them."""
    if cost.kwh_price is None and cost.hardware_per_hour is None:
        return None
    energy = kwh * cost.kwh_price if cost.kwh_price is not None and kwh is not None else None
    hardware = hours * cost.hardware_per_hour if cost.hardware_per_hour is not None else None
    parts = [part for part in (energy, hardware) if part is not None]
    return {"currency": cost.currency, "energy": energy, "hardware": hardware, "total": sum(parts) if parts else None}


def night_energy(samples: pd.DataFrame, tasks: pd.DataFrame, calls: pd.DataFrame, start: float, end: float,
                 cost: Cost) -> dict[str, Any]:
    """The night's energy figures (summary.json's `energy`); `measured` False when no source had two readings."""
    found = meters(samples, start, end)
    chosen = counted(found)
    joules = sum(m.total for m in chosen) if chosen else None
    span = max((m.span for m in chosen), default=0.0)
    ordinary = tasks[tasks["canary"].fillna("").astype(str) == ""]
    passes = int((ordinary["outcome"] == "pass").sum())
    answered = calls[calls["status"] == "ok"] if not calls.empty else calls
    tokens = int(answered["completion_tokens"].fillna(0).sum()) if not answered.empty else 0
    stretches = busy(calls)
    idle = sum(idle_joules(m, stretches) for m in chosen)
    kwh = joules / 3.6e6 if joules is not None else None
    price = money(cost, kwh, (end - start) / 3600)
    figures: dict[str, Any] = {
        "measured": bool(chosen),
        "sources": [{"source": m.source, "kind": m.kind, "name": m.name, "method": m.method, "devices": m.devices,
                     "joules": m.total, "kwh": m.total / 3.6e6, "span_s": m.span,
                     "mean_watts": m.total / m.span if m.span else None, "counted": m in chosen} for m in found],
        "joules": joules, "kwh": kwh,
        "mean_watts": joules / span if joules is not None and span else None,
        "passes": passes, "joules_per_pass": joules / passes if joules is not None and passes else None,
        "idle_share": idle / joules if joules else None,
        "completion_tokens": tokens, "tokens_per_joule": tokens / joules if joules else None,
        "throttle": throttling(samples), "cost": price,
        "cost_per_pass": price["total"] / passes if price and price["total"] is not None and passes else None,
    }
    figures["said"] = said(figures)
    return figures


def timeline(samples: pd.DataFrame, start: float, end: float, bins: int = 200) -> dict[str, pd.DataFrame]:
    """Each meter's power over the night (its devices summed), as (at, value) in watts over `bins` even stretches:
    what the report draws."""
    edges = np.linspace(start, end, bins + 1)
    width = (end - start) / bins if end > start else 1.0
    lines = {}
    for meter in meters(samples, start, end):
        middle = (meter.starts + meter.ends) / 2
        where = np.clip(np.searchsorted(edges, middle, side="right") - 1, 0, bins - 1)
        joules = np.bincount(where, weights=meter.joules, minlength=bins)
        seen = np.bincount(where, minlength=bins) > 0
        lines[meter.name] = pd.DataFrame({"at": (edges[:-1] + width / 2)[seen], "value": joules[seen] / width})
    return lines


def run_energy(run: RunRecord, start: float, end: float) -> dict[str, Any]:
    """`night_energy` of a run folder over its span, priced by its own `[cost]` (none in an older soak's run.json)."""
    cost = run.config.cost if run.config else Cost()
    return night_energy(run.samples, run.tasks, run.calls, start, end, cost)


def said(figures: dict[str, Any]) -> str:
    """The headline's line: "2.41 kWh (mean 301 W), 58.2 kJ per solved task (idle 12 %), 1.8 tokens/J"."""
    if not figures["measured"]:
        return "energy not measured (no NVML, RAPL or exporter readings)"
    parts = [f"{figures['kwh']:.3g} kWh"]
    if figures["mean_watts"] is not None:
        parts[0] += f" (mean {figures['mean_watts']:.0f} W)"
    if figures["joules_per_pass"] is not None:
        idle = figures["idle_share"] * 100
        parts.append(f"{figures['joules_per_pass'] / 1000:.3g} kJ per solved task (idle {idle:.0f} %)")
    else:
        parts.append("no task solved")
    if figures["tokens_per_joule"]:
        parts.append(f"{figures['tokens_per_joule']:.3g} tokens/J")
    if figures["cost_per_pass"] is not None:
        parts.append(f"{figures['cost_per_pass']:.3g} {figures['cost']['currency']} per solved task".rstrip())
    for gpu in figures["throttle"]:
        for what in ("power", "thermal"):
            if gpu[f"{what}_share"] >= THROTTLE_NOTED:
                parts.append(f"GPU {gpu['gpu']} {what}-throttled {gpu[f'{what}_share'] * 100:.0f} % of the night")
    return ", ".join(parts)
