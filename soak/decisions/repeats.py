"""Does the stack get the same task right every time: per task its tries and passes over the night, pass@k and
pass^k by the unbiased estimators, and whether it is flaky; per night pass^k for k = 1..K with a bootstrap interval
over tasks. A try is an attempt of an ordinary task that the model answered for (MODEL_OUTCOMES): a canary cannot
pass, and an attempt the harness or the endpoint lost says nothing of the model."""

from math import comb
from typing import Any

import numpy as np
import pandas as pd

from soak.record.schema import MODEL_OUTCOMES

BOOTSTRAP_SAMPLES = 2000
MAX_K = 8
"""The largest k reported: τ-bench's figure, and about what one night's tries per task allow."""


def pass_hat_k(tries: int, passes: int, k: int) -> float | None:
    """pass^k: the chance that k tries drawn without replacement from the task's n all pass, C(c, k) / C(n, k)."""
    return comb(passes, k) / comb(tries, k) if 0 < k <= tries else None


def pass_at_k(tries: int, passes: int, k: int) -> float | None:
    """pass@k: the chance that at least one of k such tries passes, 1 - C(n - c, k) / C(n, k)."""
    return 1 - comb(tries - passes, k) / comb(tries, k) if 0 < k <= tries else None


def tries(tasks: pd.DataFrame) -> pd.DataFrame:
    """Per ordinary task: `tries`, `passes`, `flaky` (passed and failed), and the cycles' outcomes in order."""
    model = tasks[tasks["outcome"].isin(MODEL_OUTCOMES) & (tasks["canary"].fillna("").astype(str) == "")]
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


def night(tasks: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """pass^k for k = 1..K over the tasks tried at least k times (K: the most tries every tried task had, at most
    MAX_K, at least 1), each the mean of the tasks' estimates with a 95 % percentile bootstrap interval over tasks;
    the flaky tasks; the tries per task."""
    table = tries(tasks)
    if table.empty:
        return {"tasks": 0, "k": [], "flaky": [], "min_tries": 0}
    most = max(1, min(MAX_K, int(table["tries"].min())))
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, most + 1):
        values = np.array([pass_hat_k(n, c, k) for n, c in zip(table["tries"], table["passes"], strict=True)],
                          dtype=float)
        picks = rng.integers(0, len(values), size=(BOOTSTRAP_SAMPLES, len(values)))
        means = values[picks].mean(axis=1)
        low, high = np.quantile(means, [0.025, 0.975])
        rows.append({"k": k, "pass_hat_k": float(values.mean()), "interval": [float(low), float(high)]})
    flaky = table[table["flaky"]]
    return {"tasks": len(table), "min_tries": int(table["tries"].min()), "max_tries": int(table["tries"].max()),
            "k": rows, "flaky": [{"task_id": str(task_id), "tries": int(row.tries), "passes": int(row.passes)}
                                 for task_id, row in flaky.iterrows()]}
