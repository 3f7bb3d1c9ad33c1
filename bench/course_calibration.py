"""The course of the night's operating characteristics, measured on nights of known truth (soak.sim.nights): each
night is written as a run folder through soak.record, read back as `soak report` reads it, and its course compared
with what was set. Quiet nights give the false "degraded" verdicts per night by length and attempt rate; nights with
one change (onset drawn over the middle 80 % of the night) the detection rate and the onset error in windows by
effect size, length and rate, and how often another measure is blamed. Seeds are fixed: `--seeds tune` is the range
the detector's thresholds were set on, `--seeds report` (the default) another, never tuned on.

    .venv/bin/python bench/course_calibration.py                 # the full table (about 1,500 nights)
    .venv/bin/python bench/course_calibration.py --scale 0.2     # a fifth of the nights per cell, for a quick look
    .venv/bin/python bench/course_calibration.py --processes 1
    .venv/bin/python bench/course_calibration.py --part could_see   # only the could_see check, on the same nights

It prints one table; BENCHMARKS.md keeps the runs.
"""

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from soak.decisions import course  # noqa: E402
from soak.record.read import load_run, time_span  # noqa: E402
from soak.sim.nights import MEASURE, Change, Night  # noqa: E402

SEEDS = {"tune": 0, "report": 1_000_000}
QUIET_CELLS = [(hours, rate, nights) for hours in (1, 4, 12) for rate, nights in ((50, 30), (500, 30), (2000, 15))]
QUIET_CELLS += [(8, 50, 100), (8, 500, 150), (8, 2000, 50)]
"""(hours, attempts an hour, nights): quiet nights, most of them 8 h long (the false-alarm target's night)."""
SIZES: dict[Change, tuple[float, ...]] = {"pass_rate": (0.1, 0.2, 0.4), "ttft": (1.2, 1.5, 2.0),
                                          "decode": (1.2, 1.5, 2.0), "leak": (1.0, 10.0, 50.0)}
TARGET_SIZES: dict[Change, float] = {"pass_rate": 0.2, "ttft": 1.5, "decode": 1.5, "leak": 10.0}
CHANGE_CELLS = [(1, 500, 10), (8, 50, 10), (8, 500, 25), (8, 2000, 10), (12, 500, 10)]
"""(hours, rate, nights) for each change and size; 8 h at 500 an hour is the detection target's night."""
TARGETS = {"false": 0.01, "detection": 0.9, "onset": 0.8, "could_see": 0.8}
SIGHT_CELLS = [(1, 500, 20), (8, 50, 20), (8, 500, 20), (8, 2000, 20)]
"""(hours, rate, nights): quiet nights whose `could_see` is checked: each again with a change of the size it states
(onset drawn over the middle half of the night) should find it in 80 % of nights or more."""
CHANGE_OF = {measure: change for change, measure in MEASURE.items()}


def plan(base: int, scale: float) -> list[Night]:
    """Every night of the table, each with its own seed from `base` on: the same plan and base, the same nights."""
    nights: list[Night] = []
    rng = np.random.default_rng(base)
    for hours, rate, count in QUIET_CELLS:
        nights += [Night(hours, rate, base + len(nights) + n) for n in range(max(1, round(count * scale)))]
    for change, sizes in SIZES.items():
        for size in sizes:
            for hours, rate, count in CHANGE_CELLS:
                for _ in range(max(1, round(count * scale))):
                    onset = float(rng.uniform(0.1, 0.9)) * hours * 3600
                    nights.append(Night(hours, rate, base + len(nights), change, size, onset))
    return nights


def judge(night: Night) -> dict[str, Any]:
    """The night's course beside its truth: degraded or not, whether a degradation was found in the measure that
    changed and how far from the onset (in windows), and whether another measure was blamed."""
    from soak.sim.nights import write

    root = Path(tempfile.mkdtemp(prefix="night-"))
    try:
        run = load_run(write(night, root / "night"))
        start, end = time_span(run)
        found = course.course(run.tasks, run.calls, run.samples, run.events, start, end)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    width = found["window_s"]
    worse = [f for f in found["findings"] if f["degrades"]]
    right = [f for f in worse if f["measure"] == night.measure]
    error = min((abs(f["at_s"] - night.onset_s) / width for f in right), default=None)
    return {"night": night, "degraded": found["held"] is False, "found": bool(right), "onset_windows": error,
            "wrong": any(f["measure"] != night.measure for f in worse), "could_see": found.get("could_see", {})}


def sighted(nights: list[Night], scale: float) -> list[Night]:
    """The quiet nights whose `could_see` is checked: the first of each SIGHT_CELLS cell."""
    chosen = []
    for hours, rate, count in SIGHT_CELLS:
        quiet = [n for n in nights if (n.change, n.hours, n.rate) == (None, hours, rate)]
        chosen += quiet[: max(1, round(count * scale))]
    return chosen


def sight_plan(results: list[dict[str, Any]]) -> list[Night]:
    """The checked quiet nights again, each with a change of each measure's stated `could_see` (its onset drawn from
    the night's own seed, so a run of the check alone makes the same nights)."""
    nights = []
    for r in results:
        hours, rate = r["night"].hours, r["night"].rate
        rng = np.random.default_rng(r["night"].seed)
        for measure, seen in r["could_see"].items():
            if measure in CHANGE_OF and np.isfinite(seen["size"]):
                onset = float(rng.uniform(0.25, 0.75)) * hours * 3600
                nights.append(Night(hours, rate, r["night"].seed, CHANGE_OF[measure], seen["size"], onset))
    return nights


def sight_table(results: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[str, float, float], list[bool]] = defaultdict(list)
    stated: dict[tuple[str, float, float], list[float]] = defaultdict(list)
    for r in results:
        cells[r["night"].change, r["night"].hours, r["night"].rate].append(r["found"])
        stated[r["night"].change, r["night"].hours, r["night"].rate].append(r["night"].size)
    lines = ["could_see checked: a change of the size a quiet night states, found (target >= 80 %)",
             f"{'change':<10}{'hours':>6}{'rate/h':>8}  {'stated (median)':>16}  {'found':<18}"]
    lines += [f"{change:<10}{hours:>6g}{rate:>8g}  {np.median(stated[change, hours, rate]):>16.3f}  "
              f"{share(sum(v), len(v)):<18}" for (change, hours, rate), v in sorted(cells.items())]
    missed = [cell for cell, v in cells.items() if sum(v) < TARGETS["could_see"] * len(v)]
    lines.append(f"target could_see: {'met in every cell' if not missed else f'NOT met in {sorted(missed)}'}")
    return lines


def run_all(nights: list[Night], processes: int) -> list[dict[str, Any]]:
    if processes <= 1:
        return [judge(night) for night in nights]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return pool.map(judge, nights, chunksize=4)


def share(hits: int, of: int) -> str:
    return f"{hits}/{of} ({100 * hits / of:.1f} %)" if of else "n/a"


def quiet_table(results: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[float, float], list[bool]] = defaultdict(list)
    for r in results:
        if r["night"].change is None:
            cells[r["night"].hours, r["night"].rate].append(r["degraded"])
    lines = ["quiet nights: false \"degraded\" per night", f"{'hours':>6}{'rate/h':>8}  {'false degraded':<20}"]
    lines += [f"{h:>6g}{rate:>8g}  {share(sum(v), len(v)):<20}" for (h, rate), v in sorted(cells.items())]
    eight = [d for (h, _), v in cells.items() if h == 8 for d in v]
    lines.append(f"8-h nights, all rates: {share(sum(eight), len(eight))} (target <= {TARGETS['false']:.0%})")
    return lines


def change_table(results: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[str, float, float, float], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        n = r["night"]
        if n.change is not None:
            cells[n.change, n.size, n.hours, n.rate].append(r)
    lines = ["nights with one change: detection, onset error, wrong measure blamed",
             f"{'change':<10}{'size':>6}{'hours':>6}{'rate/h':>8}  {'detected':<18}{'onset <= 1 window':<20}"
             f"{'median onset err':>17}  {'wrong measure':<16}"]
    for (change, size, hours, rate), rs in sorted(cells.items()):
        found = [r for r in rs if r["found"]]
        near = sum(r["onset_windows"] <= 1 for r in found)
        median = f"{np.median([r['onset_windows'] for r in found]):.2f}" if found else "n/a"
        lines.append(f"{change:<10}{size:>6g}{hours:>6g}{rate:>8g}  {share(len(found), len(rs)):<18}"
                     f"{share(near, len(found)):<20}{median:>17}  {share(sum(r['wrong'] for r in rs), len(rs)):<16}")
    return lines


def targets(results: list[dict[str, Any]]) -> list[str]:
    """Each target, met or not, on its own nights."""
    lines = []
    for change, size in TARGET_SIZES.items():
        rs = [r for r in results if (r["night"].change, r["night"].size, r["night"].hours, r["night"].rate)
              == (change, size, 8, 500)]
        found = [r for r in rs if r["found"]]
        detected = len(found) / len(rs) if rs else 0.0
        near = sum(r["onset_windows"] <= 1 for r in found) / len(found) if found else 0.0
        lines.append(f"target {change} {size:g} at 500/h over 8 h: detected {detected:.0%} "
                     f"({'met' if detected >= TARGETS['detection'] else 'NOT met'}), onset within one window "
                     f"{near:.0%} ({'met' if near >= TARGETS['onset'] else 'NOT met'})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", choices=sorted(SEEDS), default="report")
    parser.add_argument("--scale", type=float, default=1.0, help="nights per cell, as a share of the full table")
    parser.add_argument("--processes", type=int, default=2, choices=(1, 2))
    parser.add_argument("--part", choices=("all", "could_see"), default="all",
                        help="could_see: only the quiet nights whose could_see is checked, and the check")
    args = parser.parse_args()
    nights = plan(SEEDS[args.seeds], args.scale)
    started = time.perf_counter()
    checked = sighted(nights, args.scale)
    results = run_all(nights if args.part == "all" else checked, args.processes)
    checks = run_all(sight_plan([r for r in results if r["night"] in set(checked)]), args.processes)
    print(f"{len(results) + len(checks)} nights (seeds: {args.seeds}), {time.perf_counter() - started:.0f} s "
          f"with {args.processes} processes")
    blocks = [quiet_table(results), change_table(results), targets(results)] if args.part == "all" else []
    for block in [*blocks, sight_table(checks)]:
        print("\n".join(block) + "\n")


if __name__ == "__main__":
    main()
