"""The part of ATIF soak writes, as pydantic models: the field names and shapes of Harbor's RFC 0001 and of its
reference models (`harbor.models.trajectories`), which the tests validate every export against. Optional fields
left None are not written. Plus `AtifIndex`, soak's own list of the files of one export."""

from typing import Any, Literal

from pydantic import BaseModel, Field

from soak.config import Strict

ATIF_VERSION = "ATIF-v1.8"
"""The RFC's current version (its changelog's v1.8, the reference models' default). Nothing soak writes needs more
than v1.7 (embedded subagents, `llm_call_count`, `extra` on tool calls)."""


class Agent(Strict):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    """OpenAI function schemas the agent was offered, where the run folder keeps them."""
    extra: dict[str, Any] | None = None


class ToolCall(Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    """The model's arguments as an object; {} when they were none (the raw text is then in `extra`)."""
    extra: dict[str, Any] | None = None


class SubagentTrajectoryRef(Strict):
    trajectory_id: str
    """The `trajectory_id` of an entry of the root's `subagent_trajectories`."""


class ObservationResult(Strict):
    source_call_id: str | None = None
    content: str | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None


class Observation(Strict):
    results: list[ObservationResult]


class Metrics(Strict):
    prompt_tokens: int | None = None
    """All input tokens, cached ones included (as calls.csv counts them)."""
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    extra: dict[str, Any] | None = None


class Step(Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = None
    """1 for a step that is one LLM call; 0 for soak's own dispatch of an agent (no LLM)."""
    extra: dict[str, Any] | None = None


class FinalMetrics(Strict):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_steps: int
    extra: dict[str, Any] | None = None


class Trajectory(Strict):
    schema_version: str = ATIF_VERSION
    session_id: str
    trajectory_id: str
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics
    extra: dict[str, Any] | None = None
    subagent_trajectories: list["Trajectory"] | None = None

    def json_text(self) -> str:
        return self.model_dump_json(exclude_none=True, indent=1) + "\n"


class IndexEntry(BaseModel):
    """One exported attempt."""

    path: str
    """The trajectory file, relative to the index."""
    task_id: str
    cycle: int
    repeat: int = 1
    session: int
    outcome: str
    agent: str
    model: str
    steps: int
    """Steps of the root and of its subagents together."""
    subagents: int


class Skipped(BaseModel):
    task_id: str
    cycle: int
    repeat: int = 1
    reason: str


class AtifIndex(BaseModel):
    """`index.json` of an export: what was written, what was left out and why."""

    format: str = ATIF_VERSION
    run_id: str
    run_folder: str
    running: bool
    """The run had not ended when it was exported: only the attempts finished by then are in it."""
    trajectories: list[IndexEntry]
    skipped: list[Skipped] = Field(default_factory=list)
