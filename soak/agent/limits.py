"""The limits one attempt runs under: the night's budgets as the task's own settings (task.toml `budget_seconds`,
`max_calls`) and its route (`cap`, `extend`) leave them. Worked out once, here; the attempt core enforces them and its
row records them (tasks.csv `limit_*`), so a page, the route or an export reads the limit the attempt had, never the
night's default."""

from typing import Any, NamedTuple

from soak.config import Budgets
from soak.tasks.spec import TaskSpec


class AttemptLimits(NamedTuple):
    seconds: float
    """The wall budget, tests included."""
    calls: int
    tokens: int
    """Completion tokens."""
    rounds: int

    @classmethod
    def of(cls, task: TaskSpec, budgets: Budgets) -> "AttemptLimits":
        """`task` as routed (soak.night.loop.routed puts a route's cap or extension on the task)."""
        return cls(task.budget_seconds or budgets.task_seconds, task.max_calls or budgets.max_calls,
                   budgets.max_completion_tokens, budgets.max_rounds)

    def row_fields(self) -> dict[str, Any]:
        return {"limit_seconds": self.seconds, "limit_calls": self.calls, "limit_tokens": self.tokens,
                "limit_rounds": self.rounds}
