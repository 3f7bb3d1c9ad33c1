"""What every later stage shows of a record: the per-problem table (route, compare and the report read the same
one), and how long something took as text (the live view, `soak status`/`runs`, the report)."""

import math
from typing import get_args

import pandas as pd

from soak.record.schema import MODEL_OUTCOMES, Outcome

OUTCOMES = list(get_args(Outcome))
"""Every outcome in schema order."""
PROBLEM_COLUMNS = ["suite", "attempts", "model_attempts", "passes", "pass_rate", "failure_rate", "infra_errors",
                   "median_calls", "median_s", "median_pass_s", "dominant_outcome", "outcomes", "last_error_kind",
                   "route", "tampered", "suspicious_passes", "tests_touched"]


def with_calls(tasks: pd.DataFrame) -> pd.DataFrame:
    """tasks.csv rows plus `calls`: every call of the attempt (both roles', or an external agent's)."""
    return tasks.assign(calls=tasks["orchestrator_calls"] + tasks["coder_calls"] + tasks["agent_calls"])


def problem_table(tasks: pd.DataFrame) -> pd.DataFrame:
    """One row per problem (index task_id), highest failure rate first.

    `attempts` counts every attempt, `model_attempts` those judged against the model (MODEL_OUTCOMES); the pass
    and failure rates and the medians are over the model-judged attempts only: an infra error or a cancelled
    attempt says something about the stack, not the problem (a problem with none of them has NaN rates).
    `last_error_kind` and `route` are the latest non-empty ones by `ended_at`. `tampered` counts the attempts that
    tried to change how they were judged (failures, like any non-pass model outcome); `suspicious_passes` the
    passes whose solution the static look flagged (still passes: they say which ones to distrust); `tests_touched`
    the attempts that left files in their workspace to configure pytest or mimic the tests (ignored by the judge)."""
    if tasks.empty:
        return pd.DataFrame(columns=PROBLEM_COLUMNS, index=pd.Index([], name="task_id"))
    frame = with_calls(tasks).sort_values("ended_at", kind="stable").assign(
        passed=lambda f: f["outcome"] == "pass", model=lambda f: f["outcome"].isin(MODEL_OUTCOMES),
        infra=lambda f: f["outcome"] == "infra_error", tampered=lambda f: f["outcome"] == "tampered",
        flagged=lambda f: (f["outcome"] == "pass") & (f["suspicious"].fillna("").astype(str) != ""),
        touched=lambda f: f["tests_touched"].fillna("").astype(str) != "",
    )
    grouped = frame.groupby("task_id")
    judged = frame[frame["model"]]
    by_judged = judged.groupby("task_id")
    out = pd.DataFrame({
        "suite": grouped["suite"].last(), "attempts": grouped.size(), "model_attempts": grouped["model"].sum(),
        "passes": grouped["passed"].sum(), "infra_errors": grouped["infra"].sum(),
        "tampered": grouped["tampered"].sum(), "suspicious_passes": grouped["flagged"].sum(),
        "tests_touched": grouped["touched"].sum(),
        "median_calls": by_judged["calls"].median(), "median_s": by_judged["duration_s"].median(),
        "median_pass_s": judged[judged["passed"]].groupby("task_id")["duration_s"].median(),
        "dominant_outcome": by_judged["outcome"].agg(lambda s: s.value_counts().idxmax()),
    })
    out["pass_rate"] = out["passes"] / out["model_attempts"].where(out["model_attempts"] > 0)
    out["failure_rate"] = 1 - out["pass_rate"]
    counts = frame.groupby(["task_id", "outcome"]).size().unstack(fill_value=0)
    order = [o for o in OUTCOMES if o in counts.columns]
    out["outcomes"] = counts[order].apply(lambda r: " · ".join(f"{o} {n}" for o, n in r.items() if n), axis=1)
    errors = frame[frame["error_kind"] != ""]
    out["last_error_kind"] = errors.groupby("task_id")["error_kind"].last()
    routed = frame[frame["route"] != ""]
    out["route"] = routed.groupby("task_id")["route"].last()
    out = out.fillna({"last_error_kind": "", "route": "", "dominant_outcome": ""})
    out = out.rename_axis("task_id").reset_index().sort_values(
        ["failure_rate", "attempts", "task_id"], ascending=[False, False, True], na_position="last")
    return out.set_index("task_id")[PROBLEM_COLUMNS]


def span_text(seconds: float | None) -> str:
    """8.0 h, 12 min or 45 s: the unit a reader expects for that length."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
