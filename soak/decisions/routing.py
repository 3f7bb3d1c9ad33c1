"""The routing file (routing.toml): what the next night does differently per task. `soak route` writes it
(soak.decisions.route); the night reads it here and applies it to each task in one place (`Routing.apply`)."""

from collections.abc import Collection
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from soak.errors import BadInput
from soak.files import load_model
from soak.tasks.spec import TaskSpec

Action = Literal["escalate", "skip", "cap", "extend"]


class Route(BaseModel):
    """What the next run does differently for one task."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    endpoint: str | None = None
    """escalate: the named endpoint (in soak.toml) that takes over the coder role for this task."""
    max_calls: int | None = None
    """cap: a lower call cap, so a task the coder loops on fails fast."""
    budget_seconds: float | None = None
    """extend: more wall time for a task that passes, but late."""

    def label(self) -> str:
        detail = self.endpoint or self.max_calls or self.budget_seconds
        return f"{self.action}:{detail:g}" if isinstance(detail, float) else f"{self.action}:{detail or ''}".rstrip(":")


class Applied(NamedTuple):
    """What a night does with one task under the routing file."""

    task: TaskSpec
    """The task with a `cap` (its max_calls) or an `extend` (its budget_seconds) on it."""
    skip: bool
    coder: str | None
    """The endpoint an `escalate` gives the coder role; None: the configured coder."""
    label: str
    """The route's label for the attempt's row, "" when the task is not routed."""


class Routing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: dict[str, Route] = {}

    def apply(self, task: TaskSpec) -> Applied:
        """The one place a routing file acts on a task: skip, escalate, cap or extend."""
        route = self.tasks.get(task.id)
        if route is None:
            return Applied(task, False, None, "")
        if route.action == "cap":
            task = task.model_copy(update={"max_calls": route.max_calls})
        elif route.action == "extend":
            task = task.model_copy(update={"budget_seconds": route.budget_seconds})
        coder = route.endpoint if route.action == "escalate" else None
        return Applied(task, route.action == "skip", coder, route.label())

    def check(self, endpoints: Collection[str]) -> None:
        """Every escalation names an endpoint of the config (BadInput otherwise), before any folder exists."""
        for task_id, route in self.tasks.items():
            if route.action == "escalate" and route.endpoint not in endpoints:
                raise BadInput(f"routing: {task_id} escalates to endpoint '{route.endpoint}', not in the config")


def load_routing(path: Path) -> Routing:
    return load_model(path, Routing, "routing file")
