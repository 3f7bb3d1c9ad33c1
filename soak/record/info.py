"""What run.json (RunInfo) records of a night's setup beside its config and limits: the routing file applied, what soak
started itself and the host. Each is written with the keys it was given and no others, as when they were plain
tables, so a folder reads alike whichever soak version wrote it and whichever reads it."""

from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from soak.errors import BadInput


class AsGiven(BaseModel):
    """A part of run.json written with the keys it was given (read or set), never a default it was not: a key an older
    soak left out stays out, and a reader takes the absent key as unknown."""

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


Action = Literal["escalate", "skip", "cap", "extend"]


class Route(AsGiven):
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


class Routing(AsGiven):
    """The routing file (routing.toml, `soak run --routing`): what the next night does differently per task. `soak
    route` writes it (soak.decisions.route); soak.decisions.routing applies it to a task."""

    model_config = ConfigDict(extra="forbid")

    tasks: dict[str, Route] = {}

    def check(self, endpoints: Collection[str]) -> None:
        """Every escalation names an endpoint of the config (BadInput otherwise), before any folder exists."""
        for task_id, route in self.tasks.items():
            if route.action == "escalate" and route.endpoint not in endpoints:
                raise BadInput(f"routing: {task_id} escalates to endpoint '{route.endpoint}', not in the config")


class StartedStack(AsGiven):
    """What soak started itself: the embedded default's engine, version and settings, or the rehearsal's sim."""

    model_config = ConfigDict(extra="ignore")

    engine: str | None = None
    version: str | None = None
    settings: dict[str, str] = {}
    """The embedded server's command-line settings, by flag."""
    embedded: bool = False
    """The embedded server serves the night; a resume starts it afresh when it is gone."""
    rehearsal: bool = False
    """`soak run --rehearse`: soak started `soak sim` as both roles."""


class Host(AsGiven):
    """The machine the night ran on and what it offers an external agent; a key not recorded is unknown."""

    model_config = ConfigDict(extra="ignore")

    hostname: str | None = None
    platform: str | None = None
    cpus: int | None = None
    memory_bytes: int | None = None
    agent_isolation: str | None = None
    """The isolation an external agent ran under (the report tells an uncontained night by it)."""
    agent_name: str | None = None
    agent_stale_seconds: float | None = None
    """The agent's own stale-stream watchdog as it ran here; None when none is known."""
