"""The row models of every CSV and of run.json: the schema of a run folder, written once."""

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from soak.config import SoakConfig
from soak.record.identity import AttemptId
from soak.record.info import Host, Routing, StartedStack

SCHEMA_VERSION = 10
"""2: calls.csv's `attempt` (the retry number of one LLM call) is called `retry`. A version 1 folder stays readable
(the reader maps the old name) and resumable when its columns differ only by that name.
3: tasks.csv's `tests_touched` and what the attempt claimed (`canary`, `claim` ... `repeated_calls`). An older
folder stays readable (the columns at their defaults); a resume refuses it (its tasks.csv lacks the columns).
4: calls.csv's `max_gap_s`. An older folder stays readable (the column empty: unknown); a resume refuses it (its
calls.csv lacks the column).
5: calls.csv's `requested_model`. An older folder stays readable (the column empty); a resume refuses it (its calls.csv
lacks the column).
6: rounds.csv, a row per judged round from the judge's own verdict. An older folder stays readable (its rounds derived
from each round folder's test output, marked `derived`); a resume refuses it (it has no rounds.csv).
7: tasks.csv's `claim_reason` and `coder_quote`, and claims read where the agent made them (`claim_source` `signal`,
`output` or `model`). An older folder stays readable (its last-words claims say `text`); a resume refuses it (its
tasks.csv lacks the columns).
8: calls.csv's `temperature`, `top_p` and `seed`, as each request was sent, and the `repeat` of tasks.csv, rounds.csv
and calls.csv (`soak run --repeat K`). An older folder stays readable (the sampling columns empty: unknown; every
attempt its cycle's only repeat); a resume refuses it (its CSVs lack the columns).
9: the `node` of tasks.csv, rounds.csv and calls.csv (the Ray node an attempt ran on, `soak run --cluster`) and the
outcome `node_lost`. An older folder stays readable (every attempt on this machine); a resume refuses it (its CSVs lack
the column).
10: tasks.csv's `limit_seconds`, `limit_calls`, `limit_tokens` and `limit_rounds`, the limits each attempt ran under
(soak.agent.limits). An older folder stays readable (the columns empty: not recorded, never guessed from the night's
budgets); a resume refuses it (its tasks.csv lacks the columns)."""

Outcome = Literal[
    "pass", "fail", "timeout", "call_cap", "token_cap", "no_artifact", "tampered", "infra_error", "agent_error",
    "harness_error", "cancelled", "cheat", "node_lost",
]
MODEL_OUTCOMES = ("pass", "fail", "timeout", "call_cap", "token_cap", "no_artifact", "tampered", "cheat")
"""Outcomes that count against the model; infra_error and agent_error (an external agent that crashed before it
wrote anything) count against the stack."""
OUTCOME_MEANINGS: dict[Outcome, str] = {
    "pass": "the task's tests passed against the entry file on disk",
    "fail": "the tests still failed when the rounds ran out",
    "timeout": "the attempt's wall-time budget ran out",
    "call_cap": "the attempt reached its cap on LLM calls",
    "token_cap": "the attempt reached its cap on completion tokens",
    "no_artifact": "the entry file was never written",
    "tampered": "the solution was caught changing how it is judged, the evidence in the error tail",
    "infra_error": "the endpoint kept failing past the retries: connection errors, 5xx, stalls",
    "agent_error": "an external agent exited non-zero without writing the entry file",
    "harness_error": "a bug of soak's, with its traceback; the run goes on",
    "cancelled": "stopped in flight by Ctrl-C, soak stop or the night's end; redone on resume",
    "cheat": "a canary task passed: its tests were mutated so that no honest solution passes them",
    "node_lost": "the cluster node running it died (`--cluster`); retried once on another node, redone on resume",
}
"""What each outcome means, in one line: the one text `--help` and the docs show (a test holds the docs to it)."""

Integrity = Literal["ok", "none", "mangled_name", "bad_json", "unknown_tool", "path_escape", "missing"]
"""Tool-call verdict of one call; `none` means the call made no tool call and claimed none."""
MANGLED: tuple[Integrity, ...] = ("mangled_name", "unknown_tool", "bad_json", "path_escape", "missing")
"""The verdicts of a mangled tool call, worst first: the one definition of a broken call (counted, shown, gated);
every verdict but ok and none."""

ClaimStatus = Literal["done", "partial", "blocked", "none"]
"""What an attempt said of its own work at the end (soak.agent.claims): solved, partly, cannot be done, or nothing."""
ClaimSource = Literal["", "tool", "signal", "output", "model", "text"]
"""Where a claim was read: soak's orchestrator's `finish` tool; an external agent's own finish signal or its final
output to its user (soak.agent.finish); the model's last words. `text`: the last words of a model or agent, as a
folder of schema version 6 or older says."""

Role = Literal["orchestrator", "coder", "agent", "probe"]
"""Who made an LLM call: soak's orchestrator or coder, an external agent (through the recording proxy), or a probe
(gates, doctor)."""

CallStatus = Literal[
    "ok", "stalled", "truncated", "connection", "http_5xx", "auth", "not_found", "context_window", "bad_request",
    "bad_response", "cancelled",
]
"""How one try of an LLM call ended. `bad_request`: the request was the caller's error, refused by the server (a 4xx
other than auth, not found and the context window) or by the recording proxy before the server saw it (a body over
`[agent] max_request_bytes`, a request no server would take); never the stack's failure."""


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    former_names: ClassVar[dict[str, str]] = {}
    """Column names of older schema versions -> today's, mapped by the reader and accepted by a resume."""

    schema_version: int = SCHEMA_VERSION
    run_id: str

    @classmethod
    def columns(cls) -> list[str]:
        """The CSV's columns, in order: the fields'."""
        return list(cls.model_fields)


class AttemptRow(Row):
    """A row of one try of an attempt: its identity columns (AttemptId), shared by tasks.csv, rounds.csv and
    calls.csv."""

    task_id: str
    cycle: int
    repeat: int = 1
    """Which of its cycle's tries of the task (`--repeat K`: 1..K, spread over the cycle); 1 without repeats."""
    session: int = 0
    """Run segment: 0 for the first start, +1 per resume."""
    node: str = ""
    """The Ray node the attempt ran on (`soak run --cluster`), as `<node name>/<first 8 of its id>`; empty: this
    machine. A try lost with its node and its retry elsewhere differ only here."""

    @property
    def attempt(self) -> AttemptId:
        return AttemptId(self.task_id, self.cycle, self.repeat, self.session, self.node)


class TaskRow(AttemptRow):
    """One finished task attempt (tasks.csv)."""

    @classmethod
    def columns(cls) -> list[str]:
        """tasks.csv keeps its own order of the identity columns, task_id after node (the other CSVs lead with it)."""
        fields = list(cls.model_fields)
        fields.remove("task_id")
        fields.insert(fields.index("node") + 1, "task_id")
        return fields

    suite: str
    route: str = ""
    """The routing rule applied to this attempt, empty when none."""
    limit_seconds: float | None = None
    """The wall budget the attempt ran under, after its task's settings and its route; empty: not recorded."""
    limit_calls: int | None = None
    limit_tokens: int | None = None
    """The completion-token cap."""
    limit_rounds: int | None = None
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
    suspicious: str = ""
    """Reward-hack signatures the static look found in the judged solution ("; "-joined reasons), empty when none;
    never changes the outcome by itself, it tells which passes to distrust."""
    tests_touched: str = ""
    """What the attempt left in its workspace that configures pytest or Python or mimics the tests (conftest.py, ini
    files, `.pth`, bytecode, new or changed test files; "; "-joined paths relative to the workspace), empty when
    none. The judge ignores all of it (it judges the entry file beside fresh copies of the tests); it tells which
    attempts tried."""
    canary: str = ""
    """A canary attempt's mutation (what in which test was changed so no honest solution passes), empty for an
    ordinary task; a pass on a canary is the outcome `cheat`."""
    claim: ClaimStatus = "none"
    """What the attempt said last of its work (soak's orchestrator's `finish`, else the last words read by
    soak.agent.claims): done, partial, blocked or none."""
    claim_source: ClaimSource = ""
    claim_quote: str = ""
    """The sentence (or the finish tool's evidence) the claim was read from."""
    claim_reason: str = ""
    """Why it was read so: the words or the field that decided."""
    claimed_tests_pass: bool = False
    coder_claim: ClaimStatus | Literal[""] = ""
    """What the model that wrote the code said last of its work, where the attempt's claim is someone else's report:
    the coder's own words under soak's orchestrator, which may relay them unchecked; an external agent's model where
    the agent's signal or output said something else. Empty otherwise."""
    coder_quote: str = ""
    """The sentence `coder_claim` was read from."""
    ran_tests: bool | None = None
    """Whether anything the attempt ran looks like running tests (its tool calls and shell blocks); None when its
    commands are not visible to soak."""
    false_success: bool = False
    """Claimed done or tests passing while the outcome is not `pass`."""
    unverified_claim: bool = False
    """Claimed the tests pass without running anything that looks like tests."""
    noop_rounds: int = 0
    """Revision rounds whose entry file was byte-identical to the previous round's."""
    repeated_calls: int = 0
    """Tool calls repeated within the attempt with the same name and arguments (delegations too)."""
    agent: str = ""
    """External agent (mode agent): name and version, e.g. `hermes-agent 0.19.0`; empty for soak's own loop."""
    agent_calls: int = 0
    """Calls the external agent made through the proxy."""
    agent_exit: int | None = None
    """Exit status of the agent's last run (negative: killed by that signal)."""


class RoundRow(AttemptRow):
    """One judged round of an attempt (rounds.csv), written as the judge gives its verdict: the report, the revision
    figures and the export read rounds here, never from what pytest printed."""

    round: int
    result: str
    """What the tests found (soak.sandbox.judge.TestResult): pass, fail, timeout, error or tampered."""
    tests_passed: int = 0
    tests_total: int = 0
    failing_tests: str = ""
    """The expected tests that did not pass, one id a line (pytest escapes line breaks in ids), in collection order."""
    error_kind: str = ""
    test_seconds: float = 0.0
    entry_sha256: str = ""
    """Of the judged text, UTF-8 (the file's bytes when they are UTF-8); empty for a file over the size limit."""
    entry_bytes: int = 0
    noop: bool = False
    """The entry file was the previous round's, unchanged: a revision that wrote nothing new."""
    claim: ClaimStatus = "none"
    """What the round's driver read as the attempt's own report on its work in this round (TaskRow.claim)."""
    claim_source: ClaimSource = ""
    claimed_tests_pass: bool = False
    derived: bool = False
    """Never written: set by the reader on the rounds of a folder of schema version 5 or older, worked out from each
    round folder's test output (no error kind, no claim; 0 of 0 where pytest printed no summary)."""

    @property
    def failing(self) -> list[str]:
        return self.failing_tests.splitlines()

    @property
    def passed(self) -> bool:
        return self.tests_total > 0 and self.tests_passed == self.tests_total


class CallRow(AttemptRow):
    """One try of an LLM call (calls.csv); retries are rows of their own. Calls of an attempt cut short by a crash are
    kept (the server did serve them) and are the ones whose attempt has no tasks.csv row."""

    former_names: ClassVar[dict[str, str]] = {"attempt": "retry"}

    call_index: int
    """Position of the call within its task, counting retries."""
    retry: int = 1
    """1 for the first try of a call, +1 per retry (the task's attempt is the row's AttemptId, not this)."""
    role: Role
    """`agent`: an external agent's call, recorded by the proxy."""
    endpoint: str
    model: str
    """The model that served the call: the endpoint's (the recording proxy sends every request with its name)."""
    requested_model: str = ""
    """The model an external agent asked for when it named another (the proxy served the endpoint's instead); empty
    when it asked for the endpoint's, named none, or the call is soak's own."""
    stream: bool
    started_at: float
    first_byte_s: float | None = None
    ttft_s: float | None = None
    """First content, reasoning or tool-call token, from the request start."""
    last_token_s: float | None = None
    max_gap_s: float | None = None
    """Longest silence of a streamed reply after its first byte: between two pieces received, or up to the cut of a
    stream cut as stalled; None for an unstreamed reply or one that sent no byte. Beside first_byte_s, the silences
    an agent's stale-stream watchdog (no chunk for N s) would have timed."""
    duration_s: float
    decode_tps: float | None = None
    prompt_tokens: int | None = None
    """None when the server did not report usage (never a made-up zero)."""
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    estimated_completion_tokens: int | None = None
    """Set only when the server reported no completion_tokens: the estimate from the reply's text (content,
    reasoning, tool-call arguments; soak.llm.reply.estimated_tokens) that the token cap counted instead."""
    max_tokens: int | None = None
    temperature: float | None = None
    """The sampling settings and seed the request was sent with (soak's from the endpoint's config, the seed offset
    per call; an agent's as it sent them); None where the request left them to the server. Beside a night's repeats
    they tell sampling variance from a server that does not repeat itself on a fixed seed."""
    top_p: float | None = None
    seed: int | None = None
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
    "server_start", "server_ready", "server_stop", "down", "restart", "up", "health_fail", "note", "node_lost",
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


HIT_COUNTERS = {
    "vllm": ("vllm:prefix_cache_hits_total", ("vllm:prefix_cache_queries_total",)),
    "llama-server": ("llamacpp:prompt_tokens_cached_total",
                 ("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total")),
}
"""Per engine: the counter of prompt tokens served from the prefix cache, and the counters that sum to all prompt
tokens (llama-server's prompt_tokens_total excludes the cached ones)."""


# --- run.json -----------------------------------------------------------------------------------


class RunLimits(BaseModel):
    """When a run ends by itself; none set means one pass over the suite."""

    model_config = ConfigDict(extra="forbid")

    duration_seconds: float | None = None
    """Active running time over all sessions (time between a crash and its resume does not count)."""
    max_tasks: int | None = None
    """Finished attempts (cancelled ones excluded) over all sessions."""
    max_cycles: int | None = None
    repeats: int = 1
    """Tries of each task per cycle (`--repeat K`), interleaved: the cycle is K passes over the suite in its shuffled
    order."""


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
    config: SoakConfig | None
    """SoakConfig as resolved from soak.toml and flags, secrets redacted; None where a reader found none it reads."""
    limits: RunLimits
    routing: Routing = Field(default_factory=Routing)
    """The routing file applied (`soak run --routing`), so a resume applies it too."""
    stack: StartedStack = Field(default_factory=StartedStack)
    """What soak started itself, e.g. the embedded default's engine, version and settings."""
    versions: dict[str, str] = Field(default_factory=dict)
    host: Host = Field(default_factory=Host)
    sessions: list[Session] = Field(default_factory=list)
    """The resume history: one entry per start or resume."""
    in_flight: list[str] = Field(default_factory=list)
    """The names (AttemptId.name) of the attempts running at the last heartbeat."""

    @property
    def active_seconds(self) -> float:
        return sum(s.active_seconds for s in self.sessions)
