"""The run record: row models for every CSV (the schema lives here, once)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 1

Outcome = Literal[
    "pass", "fail", "timeout", "call_cap", "token_cap", "no_artifact", "infra_error", "harness_error", "cancelled"
]
MODEL_OUTCOMES = ("pass", "fail", "timeout", "call_cap", "token_cap", "no_artifact")
"""Outcomes that count against the model; infra_error counts against the stack."""

Integrity = Literal["ok", "none", "mangled_name", "bad_json", "unknown_tool", "path_escape", "missing"]
"""Tool-call verdict of one call; `none` means the call made no tool call and claimed none."""

CallStatus = Literal[
    "ok", "stalled", "truncated", "connection", "http_5xx", "auth", "not_found", "context_window", "bad_request",
    "bad_response", "cancelled",
]


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str


class TaskRow(Row):
    """One finished task attempt (tasks.csv)."""

    cycle: int
    task_id: str
    suite: str
    route: str = ""
    """The routing rule applied to this attempt, empty when none."""
    started_at: float
    """Unix seconds."""
    ended_at: float
    duration_s: float
    outcome: Outcome
    rounds: int = 0
    orchestrator_calls: int = 0
    coder_calls: int = 0
    delegations: int = 0
    fallback_writes: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    tests_passed: int = 0
    tests_total: int = 0
    test_seconds: float = 0.0
    error_kind: str = ""
    error_tail: str = ""
    mangled_tool_calls: int = 0
    """Calls whose tool-call integrity verdict was not ok/none."""
    reasoning_exhausted: int = 0
    """Calls where reasoning ate the whole token budget."""
    orchestrator_model: str = ""
    coder_model: str = ""


class CallRow(Row):
    """One LLM call attempt (calls.csv); retries are rows of their own."""

    task_id: str
    cycle: int
    call_index: int
    """Position of the call within its task, counting retries."""
    attempt: int = 1
    role: Literal["orchestrator", "coder", "probe"]
    endpoint: str
    model: str
    stream: bool
    started_at: float
    first_byte_s: float | None = None
    ttft_s: float | None = None
    """First content, reasoning or tool-call token, from the request start."""
    last_token_s: float | None = None
    duration_s: float
    decode_tps: float | None = None
    prompt_tokens: int | None = None
    """None when the server did not report usage (never a made-up zero)."""
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    max_tokens: int | None = None
    finish_reason: str = ""
    tool_calls: int = 0
    tool_names: str = ""
    integrity: Integrity = "none"
    reasoning_exhausted: bool = False
    status: CallStatus = "ok"
    http_status: int | None = None
    error: str = ""


EventKind = Literal[
    "run_start", "run_end", "resume", "signal", "pause", "unpause", "error_budget",
    "server_start", "server_ready", "server_stop", "down", "restart", "up", "health_fail", "note",
]


class EventRow(Row):
    """Something that happened to the run or the stack (events.csv)."""

    at: float
    kind: EventKind
    source: str = "runner"
    detail: str = ""


class SampleRow(Row):
    """One telemetry reading, long format (samples.csv)."""

    at: float
    source: str
    """host | harness | gpu | server:<name>"""
    metric: str
    value: float | None = None
    labels: str = ""
    """e.g. position=0"""
    error: str = ""
