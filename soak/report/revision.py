"""Did revision help? Round 1 against round 2 of every attempt whose first round failed (from its judged rounds:
rounds.csv, or those derived from an older folder), and attempts that go round without progress."""

from typing import Any

import pandas as pd

from soak.record.schema import RoundRow
from soak.report.attempt import similar_runs

CATEGORIES = ["fixed", "better", "unchanged", "worse", "no_round_2"]
"""What round 2 did to an attempt whose round 1 failed: all tests pass; more pass; as many; fewer; never judged (a
budget, tampering or the end of the night came first)."""
LOOP_ROUNDS = 2
"""The same failing tests this many rounds in a row: the feedback did not move the model."""
LOOP_WRITES = 3
"""This many accepted writes in a row, each near-identical to the one before: a coder going round."""


def category(rounds: list[RoundRow]) -> str:
    """'' when round 1 passed or was never judged; else one of CATEGORIES."""
    first = next((r for r in rounds if r.round == 1), None)
    if first is None or first.passed:
        return ""
    second = next((r for r in rounds if r.round == 2), None)
    if second is None:
        return "no_round_2"
    if second.passed:
        return "fixed"
    before, after = first.tests_passed, second.tests_passed
    return "better" if after > before else "worse" if after < before else "unchanged"


def loop_reason(rounds: list[RoundRow], writes: list[str]) -> str:
    """Why the attempt counts as looping without progress, '' when it does not."""
    reasons = []
    streak, longest, failing = 1, 1, rounds[0].failing if rounds else []
    for before, after in zip(rounds, rounds[1:], strict=False):
        same = bool(after.failing) and after.failing == before.failing and after.tests_passed <= before.tests_passed
        streak = streak + 1 if same else 1
        if streak > longest:
            longest, failing = streak, after.failing
    if longest >= LOOP_ROUNDS:
        shown = ", ".join(failing[:3]) + (f" and {len(failing) - 3} more" if len(failing) > 3 else "")
        reasons.append(f"the same failing test{'s' if len(failing) > 1 else ''} for {longest} rounds: {shown}")
    written = similar_runs(writes)
    if written >= LOOP_WRITES:
        reasons.append(f"{written} coder turns in a row wrote near-identical files")
    return "; ".join(reasons)


def table(attempts: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Per `by` (task_id or model): attempts whose round 1 failed and what round 2 did, most failed first."""
    frame = pd.DataFrame([{by: a[by], "revision": a["revision"], "loop": bool(a["loop"])} for a in attempts],
                         columns=[by, "revision", "loop"])
    loops = frame.groupby(by)["loop"].sum()
    frame = frame[frame["revision"] != ""]
    if frame.empty:
        return []
    counts = frame.groupby([by, "revision"]).size().unstack(fill_value=0).reindex(columns=CATEGORIES, fill_value=0)
    counts["failed_round_1"] = counts.sum(axis=1)
    counts["looping"] = loops.reindex(counts.index).fillna(0).astype(int)  # every attempt's, a pass's too
    revised = counts["failed_round_1"] - counts["no_round_2"]
    counts["fix_rate"] = (counts["fixed"] / revised.where(revised > 0)).astype(float)
    counts = counts.reset_index().sort_values(["failed_round_1", by], ascending=[False, True])
    return [{str(k): (None if isinstance(v, float) and v != v else v.item() if hasattr(v, "item") else v)
             for k, v in row.items()} for row in counts.to_dict("records")]


def view(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The index's section: totals, per problem, per model, and the attempts flagged as looping."""
    counted = [a for a in attempts if a["revision"]]
    totals = {c: sum(a["revision"] == c for a in counted) for c in CATEGORIES}
    return {"failed_round_1": len(counted), "totals": totals,
            "revised": len(counted) - totals["no_round_2"],
            "problems": table(attempts, "task_id"), "models": table(attempts, "model"),
            "looping": [a for a in attempts if a["loop"]], "judged": len(attempts)}
