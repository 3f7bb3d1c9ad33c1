"""Do the night's pass^k intervals hold the truth: generated nights whose tasks have known pass probabilities p_i
(Beta-distributed: a realistic spread of easy, middling and hard tasks), n tries each, k = 1..3; per cell the share
of nights whose 95 % interval (soak.decisions.repeats.interval) holds the true pass^k, beside the percentile
bootstrap over tasks it replaced.

The estimand is pass^k over the population of tasks the suite samples, E[p^k] = prod_{j<k} (a + j) / (a + b + j)
under Beta(a, b): what a user reads the figure as (how the stack does on tasks like these), and what an interval over
tasks (the tasks as units) estimates. The suite's own pass^k, mean_i p_i^k for these very tasks, has no task-sampling
error; an interval over tasks covers it more often than 95 %, which the last column shows.

    .venv/bin/python bench/passk_coverage.py              # 4,000 nights per cell, ~2 min on 2 cores
    .venv/bin/python bench/passk_coverage.py --nights 500 --cells   # every cell's line

Target: coverage within 93-97 % in every cell. BENCHMARKS.md keeps the runs.
"""

import argparse
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from soak.decisions.repeats import interval, pass_hat_k  # noqa: E402

SHAPES = {"U-shaped Beta(0.5, 0.5)": (0.5, 0.5), "mostly solved or not Beta(0.6, 0.4)": (0.6, 0.4),
          "middling Beta(2, 2)": (2.0, 2.0), "easy Beta(4, 1)": (4.0, 1.0), "hard Beta(1, 3)": (1.0, 3.0)}
"""Per-task pass probabilities: all-or-nothing tasks, a τ-bench-like suite (pass^1 0.6), middling, easy, hard."""
TASKS = (20, 50, 100, 200)
TRIES = (2, 3, 4, 5)
KS = (1, 2, 3)
BAND = (0.93, 0.97)
BOOTSTRAP_SAMPLES = 1000


@dataclass
class Cell:
    shape: str
    tasks: int
    tries: int
    k: int
    truth: float
    covered: float
    """Share of nights whose interval holds the population's pass^k."""
    bootstrap: float
    """The same for the 95 % percentile bootstrap over tasks."""
    suite: float
    """Share of nights whose interval holds the suite's own pass^k (mean of p_i^k over its tasks)."""


def estimates(passes: np.ndarray, tries: int, k: int) -> np.ndarray:
    """Per task C(c, k) / C(n, k), the night's own estimator, looked up by pass count."""
    table = np.array([pass_hat_k(tries, c, k) for c in range(tries + 1)], dtype=float)
    return table[passes]


def percentile_bootstrap(values: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The 95 % percentile bootstrap over tasks, every night at once: resampled means as multinomial weights times
    the estimates (one draw of weights per cell, shared by its nights)."""
    tasks = values.shape[1]
    weights = rng.multinomial(tasks, np.full(tasks, 1 / tasks), size=BOOTSTRAP_SAMPLES).T / tasks
    means = values @ weights
    low, high = np.quantile(means, [0.025, 0.975], axis=1)
    return low, high


def cell(shape: str, tasks: int, tries: int, k: int, nights: int, rng: np.random.Generator) -> Cell:
    a, b = SHAPES[shape]
    p = rng.beta(a, b, size=(nights, tasks))
    values = estimates(rng.binomial(tries, p), tries, k)
    truth = float(np.prod([(a + j) / (a + b + j) for j in range(k)]))
    suite = (p ** k).mean(axis=1)
    low, high = interval(values)
    b_low, b_high = percentile_bootstrap(values, rng)
    return Cell(shape, tasks, tries, k, truth, float(np.mean((low <= truth) & (truth <= high))),
                float(np.mean((b_low <= truth) & (truth <= b_high))), float(np.mean((low <= suite) & (suite <= high))))


def run(nights: int, seed: int) -> list[Cell]:
    rng = np.random.default_rng(seed)
    return [cell(shape, tasks, tries, k, nights, rng)
            for shape, tasks, tries, k in itertools.product(SHAPES, TASKS, TRIES, KS) if k <= tries]


def outside(value: float) -> bool:
    return not BAND[0] <= value <= BAND[1]


def summary(cells: list[Cell]) -> list[str]:
    """Per number of tasks: the range of coverage of each interval over shapes, tries and k, and the cells out of
    the band; then those cells."""
    lines = [f"{'tasks':>5}  {'cells':>5}  {'interval: min-max':>18}  {'out of band':>11}  "
             f"{'bootstrap: min-max':>19}  {'out of band':>11}  {'suite estimand: min-max':>24}"]
    for tasks in TASKS:
        group = [c for c in cells if c.tasks == tasks]
        ours, boot, suite = ([getattr(c, name) for c in group] for name in ("covered", "bootstrap", "suite"))
        lines.append(f"{tasks:>5}  {len(group):>5}  {min(ours):>9.1%}-{max(ours):.1%}  "
                     f"{sum(map(outside, ours)):>11}  {min(boot):>10.1%}-{max(boot):.1%}  "
                     f"{sum(map(outside, boot)):>11}  {min(suite):>15.1%}-{max(suite):.1%}")
    strays = [c for c in cells if outside(c.covered)]
    if strays:
        lines += ["", "interval out of the band:"]
        lines += [line(c) for c in strays]
    return lines


def line(c: Cell) -> str:
    return (f"  {c.shape:<36} T={c.tasks:<4} n={c.tries} k={c.k}  pass^k {c.truth:.3f}  interval {c.covered:.1%}  "
            f"bootstrap {c.bootstrap:.1%}  suite {c.suite:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=4000, help="generated nights per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells", action="store_true", help="print every cell")
    args = parser.parse_args()
    started = time.perf_counter()
    cells = run(args.nights, args.seed)
    if args.cells:
        print("\n".join(line(c) for c in cells))
    print(f"{len(cells)} cells x {args.nights} nights, coverage of the true pass^k by the 95 % interval "
          f"(target {BAND[0]:.0%}-{BAND[1]:.0%}):")
    print("\n".join(summary(cells)))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
