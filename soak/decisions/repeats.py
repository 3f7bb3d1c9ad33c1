"""Does the stack get the same task right every time: per task its tries and passes over the night, pass@k and
pass^k by the unbiased estimators, and whether it is flaky; per night pass^k for k = 1..K with a 95 % interval
over tasks. A try is an attempt of an ordinary task that the model answered for (MODEL_OUTCOMES): a canary cannot
pass, and an attempt the harness or the endpoint lost says nothing of the model."""

from collections.abc import Iterable
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from soak.record.schema import MODEL_OUTCOMES
from soak.record.summary import Z

MAX_K = 8
"""The largest k reported: τ-bench's figure, and about what one night's tries per task allow."""


def pass_hat_k(tries: int, passes: int, k: int) -> float | None:
    """pass^k: the chance that k tries drawn without replacement from the task's n all pass, C(c, k) / C(n, k)."""
    return comb(passes, k) / comb(tries, k) if 0 < k <= tries else None


def pass_at_k(tries: int, passes: int, k: int) -> float | None:
    """pass@k: the chance that at least one of k such tries passes, 1 - C(n - c, k) / C(n, k)."""
    return 1 - comb(tries - passes, k) / comb(tries, k) if 0 < k <= tries else None


INFRA_COUNTED = (*MODEL_OUTCOMES, "infra_error")
"""The tries when a request the stack failed counts as a failed try: the figures beside the usual ones, so a stack
that fails requests cannot read as 100 % on the attempts it happened to serve."""


def tries(tasks: pd.DataFrame, counted: Iterable[str] = MODEL_OUTCOMES) -> pd.DataFrame:
    """Per ordinary task: `tries`, `passes`, `flaky` (passed and failed), and the cycles' outcomes in order; a try is
    an attempt of a `counted` outcome."""
    model = tasks[tasks["outcome"].isin(list(counted)) & (tasks["canary"].fillna("").astype(str) == "")]
    model = model.sort_values("started_at", kind="stable")
    grouped = model.groupby("task_id", sort=True)
    table = pd.DataFrame({
        "tries": grouped.size(), "passes": grouped["outcome"].apply(lambda s: int((s == "pass").sum())),
        "outcomes": grouped["outcome"].apply(list),
    })
    if table.empty:
        return table.assign(flaky=pd.Series(dtype=bool))
    return table.assign(flaky=(table["passes"] > 0) & (table["passes"] < table["tries"]))


def per_task(tasks: pd.DataFrame, k: int) -> pd.DataFrame:
    """`tries` with pass@k and pass^k at this k (None where a task has fewer tries)."""
    table = tries(tasks)
    pairs = list(zip(table["tries"], table["passes"], strict=True))
    return table.assign(pass_at_k=pd.Series([pass_at_k(n, c, k) for n, c in pairs], index=table.index, dtype=float),
                        pass_hat_k=pd.Series([pass_hat_k(n, c, k) for n, c in pairs], index=table.index, dtype=float))


PSEUDO_TASK = 0.5
"""The weight of the two pseudo-tasks, one at 0 and one at 1, that enter the dispersion (never the estimate): a night
whose tasks all passed, or that happened not to see the rare task passing all its tries, still gets an honest width
(bench/passk_coverage.py measures it)."""


def interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95 % interval of the suite's pass^k, one per row of per-task estimates (a row a night, a column a task).

    The estimand is pass^k over the population of tasks the suite samples (what another suite of such tasks would
    show), so the tasks are the units. A Wilson score interval on the mean, with the tasks counted as T / φ
    effective 0/1 trials: φ is the estimates' variance over a 0/1 variable's of the same mean, m(1 - m), so a night
    of all-or-nothing tasks gets the plain Wilson interval over its tasks and one of middling tasks a narrower one.
    Why not the percentile bootstrap over tasks: on generated nights of 20 tasks it held the true pass^k in as few as
    65 % of them where pass^k is small (the skewed mean's tail unseen, the interval a point at 0), this one in
    92.5-97.8 % (bench/passk_coverage.py, BENCHMARKS.md); the Wilson form stays inside [0, 1] and off a point at 0
    or 1."""
    values = np.atleast_2d(np.asarray(values, dtype=float))
    tasks = values.shape[1]
    mean = values.mean(axis=1)
    total = tasks + 2 * PSEUDO_TASK
    padded = (values.sum(axis=1) + PSEUDO_TASK) / total
    spread = (((values - padded[:, None]) ** 2).sum(axis=1)
              + PSEUDO_TASK * (padded ** 2 + (1 - padded) ** 2)) / (total - 1)
    trials = tasks * padded * (1 - padded) / spread
    centre = (mean + Z * Z / (2 * trials)) / (1 + Z * Z / trials)
    half = Z * np.sqrt(mean * (1 - mean) / trials + Z * Z / (4 * trials * trials)) / (1 + Z * Z / trials)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def night(tasks: pd.DataFrame, counted: Iterable[str] = MODEL_OUTCOMES) -> dict[str, Any]:
    """pass^k for k = 1..K over the tasks tried at least k times (K: the most tries every tried task had, at most
    MAX_K, at least 1), each the mean of the tasks' estimates with its 95 % interval over tasks (`interval`); the
    flaky tasks; the tries per task. `counted=INFRA_COUNTED` counts the stack's failed requests as failed tries."""
    table = tries(tasks, counted)
    if table.empty:
        return {"tasks": 0, "k": [], "flaky": [], "min_tries": 0}
    most = max(1, min(MAX_K, int(table["tries"].min())))
    rows = []
    for k in range(1, most + 1):
        values = np.array([pass_hat_k(n, c, k) for n, c in zip(table["tries"], table["passes"], strict=True)],
                          dtype=float)
        low, high = interval(values)
        rows.append({"k": k, "pass_hat_k": float(values.mean()), "interval": [float(low[0]), float(high[0])]})
    flaky = table[table["flaky"]]
    return {"tasks": len(table), "min_tries": int(table["tries"].min()), "max_tries": int(table["tries"].max()),
            "k": rows, "flaky": [{"task_id": str(task_id), "tries": int(row.tries), "passes": int(row.passes)}
                                 for task_id, row in flaky.iterrows()]}
