"""The routing file applied: what the night does with each task (skip, escalate, cap or extend), in one place. The
file's shape is the record's (soak.record.info.Routing, recorded in run.json); `soak route` writes it
(soak.decisions.route)."""

from pathlib import Path
from typing import NamedTuple

from soak.files import load_model
from soak.record.info import Routing
from soak.tasks.spec import TaskSpec


class Applied(NamedTuple):
    """What a night does with one task under the routing file."""

    task: TaskSpec
    """The task with a `cap` (its max_calls) or an `extend` (its budget_seconds) on it."""
    skip: bool
    coder: str | None
    """The endpoint an `escalate` gives the coder role; None: the configured coder."""
    label: str
    """The route's label for the attempt's row, "" when the task is not routed."""


def applied(routing: Routing, task: TaskSpec) -> Applied:
    """The one place a routing file acts on a task: skip, escalate, cap or extend."""
    route = routing.tasks.get(task.id)
    if route is None:
        return Applied(task, False, None, "")
    if route.action == "cap":
        task = task.model_copy(update={"max_calls": route.max_calls})
    elif route.action == "extend":
        task = task.model_copy(update={"budget_seconds": route.budget_seconds})
    coder = route.endpoint if route.action == "escalate" else None
    return Applied(task, route.action == "skip", coder, route.label())


def load_routing(path: Path | None) -> Routing:
    """routing.toml, checked; no path: the empty routing, which changes nothing."""
    return Routing() if path is None else load_model(path, Routing, "routing file")
