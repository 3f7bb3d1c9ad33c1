"""The run record: row models for every CSV and run.json (the schema lives here, once), and their writers."""

import csv
import io
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soak.errors import BadInput

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
    session: int = 0
    """Run segment: 0 for the first start, +1 per resume; (task_id, cycle, session) names one attempt."""
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
    session: int = 0
    """Same as TaskRow.session: the call belongs to the attempt (task_id, cycle, session). Calls of an attempt cut
    short by a crash are kept (the server did serve them) and are the ones whose attempt has no tasks.csv row."""
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


# --- run.json -----------------------------------------------------------------------------------


class Limits(BaseModel):
    """When a run ends by itself; none set means one pass over the suite."""

    model_config = ConfigDict(extra="forbid")

    duration_seconds: float | None = None
    """Active running time over all sessions (time between a crash and its resume does not count)."""
    max_tasks: int | None = None
    """Finished attempts (cancelled ones excluded) over all sessions."""
    max_cycles: int | None = None


class Session(BaseModel):
    """One start or resume of a run."""

    model_config = ConfigDict(extra="forbid")

    session: int
    pid: int
    started_at: float
    last_seen_at: float
    """Heartbeat; a crashed session's active time ends here."""
    stopped_at: float | None = None
    """None while running, or forever after a crash."""
    reason: str = ""
    """deadline | tasks | cycles | signal | error_budget | error"""
    exit_code: int | None = None
    detached: bool = False

    @property
    def active_seconds(self) -> float:
        return max(0.0, (self.stopped_at or self.last_seen_at) - self.started_at)


class RunInfo(BaseModel):
    """run.json: the resolved config (redacted), limits, versions, host and the history of sessions."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_at: float
    started_at: float | None = None
    """Start of the first session."""
    ended_at: float | None = None
    """Set when a session stops (any reason), cleared by a resume; None after a crash."""
    config: dict[str, Any]
    """SoakConfig as resolved from soak.toml and flags, secrets redacted."""
    limits: Limits
    routing: dict[str, Any] = Field(default_factory=dict)
    """The routing file applied (`soak run --routing`), so a resume applies it too."""
    stack: dict[str, Any] = Field(default_factory=dict)
    """What soak started itself, e.g. the embedded default's engine, version and settings."""
    versions: dict[str, str] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    sessions: list[Session] = Field(default_factory=list)
    """The resume history: one entry per start or resume."""
    in_flight: list[str] = Field(default_factory=list)
    """`<task_id>/<cycle>` of the attempts running at the last heartbeat."""

    @property
    def active_seconds(self) -> float:
        return sum(s.active_seconds for s in self.sessions)


def write_json_atomic(path: Path, data: str) -> None:
    """Readers see the old file or the new one, never half of either (temp file, fsync, os.replace)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- CSV writers --------------------------------------------------------------------------------

MAX_TEXT_CHARS = 32_000
"""Longest text kept in one CSV field (spreadsheets stop at 32,767); the middle of longer text is cut."""

R = TypeVar("R", bound=Row)


def clean_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """NUL bytes dropped (csv readers choke on them); over `limit`, head and tail kept around a marker."""
    text = text.replace("\x00", "")
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[: limit // 2]}…[truncated {cut} chars]{text[len(text) - limit // 2 :]}"


def csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    return str(value)


def encode_row(values: list[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue().encode("utf-8", "backslashreplace")


def complete_length(data: bytes) -> int:
    """Bytes up to the end of the last complete row: a newline outside quotes (an even count of quotes before it)."""
    quotes_before = data.count(b'"')
    hi = len(data)
    while (pos := data.rfind(b"\n", 0, hi)) >= 0:
        quotes_before -= data.count(b'"', pos, hi)
        if quotes_before % 2 == 0:
            return pos + 1
        hi = pos
    return 0


def repair_tail(path: Path) -> int:
    """Cut a row torn by a crash mid-write; returns the bytes dropped."""
    data = path.read_bytes()
    keep = complete_length(data)
    if keep < len(data):
        with path.open("r+b") as handle:
            handle.truncate(keep)
            os.fsync(handle.fileno())
    return len(data) - keep


class CsvLog(Generic[R]):
    """Append-only CSV of one row model: one write() per row, so a crash tears at most the last one."""

    def __init__(self, path: Path, model: type[R], *, durable: bool = False):
        self.path, self.model, self.durable = path, model, durable
        self.columns = list(model.model_fields)
        self.repaired_bytes = repair_tail(path) if path.exists() else 0
        self.lock = threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size == 0:
            self.write(encode_row(self.columns))
        else:
            with path.open(newline="", encoding="utf-8", errors="replace") as handle:
                header = next(csv.reader(handle), [])
            if header != self.columns:
                os.close(self.fd)
                raise BadInput(f"{path}: its columns are not those of this soak version's {model.__name__}")

    def write(self, data: bytes) -> None:
        with self.lock:
            while data:
                data = data[os.write(self.fd, data) :]
            if self.durable:
                os.fsync(self.fd)

    def append(self, row: R) -> None:
        """Write one row now; a durable log (tasks.csv) also fsyncs it."""
        if not isinstance(row, self.model):
            raise TypeError(f"{self.path.name} takes {self.model.__name__}, not {type(row).__name__}")
        self.write(encode_row([csv_value(getattr(row, column)) for column in self.columns]))

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


def nullable_fields(model: type[BaseModel]) -> set[str]:
    return {name for name, field in model.model_fields.items() if type(None) in get_args(field.annotation)}


def read_rows(path: Path, model: type[R]) -> Iterator[R]:
    """Rows of a CSV written by CsvLog, as models (an empty cell is None where the field allows it)."""
    if not path.exists():
        return
    nullable = nullable_fields(model)
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        for raw in csv.DictReader(handle):
            yield model.model_validate({k: None if v == "" and k in nullable else v for k, v in raw.items()})


# --- the run folder -----------------------------------------------------------------------------

class RowListener(Protocol):
    """Sees every row as it is written (the live view, the Prometheus exporter)."""

    def task(self, row: TaskRow) -> None: ...
    def call(self, row: CallRow) -> None: ...
    def event(self, row: EventRow) -> None: ...
    def sample(self, row: SampleRow) -> None: ...


class RunFolder:
    """`data/<run_id>/`: run.json, the four CSVs (opened for appending) and `work/<task>/<cycle>/`."""

    def __init__(self, path: Path):
        self.path = path
        self.run_id = path.name
        self.info_path = path / "run.json"
        self.listeners: list[RowListener] = []

    def open(self) -> None:
        """Create or reopen the CSVs, repairing torn tails; tasks.csv is fsynced per row."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.tasks = CsvLog(self.path / "tasks.csv", TaskRow, durable=True)
        self.calls = CsvLog(self.path / "calls.csv", CallRow)
        self.events = CsvLog(self.path / "events.csv", EventRow)
        self.samples = CsvLog(self.path / "samples.csv", SampleRow)

    @property
    def logs(self) -> list[CsvLog]:
        return [self.tasks, self.calls, self.events, self.samples]

    def close(self) -> None:
        for log in self.logs:
            log.close()

    def record_task(self, row: TaskRow) -> None:
        self.tasks.append(row)
        for listener in self.listeners:
            listener.task(row)

    def record_call(self, row: CallRow) -> None:
        self.calls.append(row)
        for listener in self.listeners:
            listener.call(row)

    def record_sample(self, row: SampleRow) -> None:
        """The telemetry writer (soak.monitor.Monitor's `write`)."""
        self.samples.append(row)
        for listener in self.listeners:
            listener.sample(row)

    def event(self, kind: EventKind, detail: str = "", source: str = "runner") -> EventRow:
        row = EventRow(run_id=self.run_id, at=time.time(), kind=kind, source=source, detail=detail)
        self.events.append(row)
        for listener in self.listeners:
            listener.event(row)
        return row

    def work_dir(self, task_id: str, cycle: int) -> Path:
        return self.path / "work" / task_id / str(cycle)

    def read_info(self) -> RunInfo:
        try:
            return RunInfo.model_validate_json(self.info_path.read_text())
        except FileNotFoundError:
            raise BadInput(f"{self.path}: no run.json, not a run folder") from None
        except ValidationError as error:
            problems = error.error_count()
            raise BadInput(f"{self.info_path}: not a run.json this soak version reads ({problems} problems)") from None

    def write_info(self, info: RunInfo) -> None:
        write_json_atomic(self.info_path, info.model_dump_json(indent=2))
