"""`soak.toml`: one pydantic tree, validated with readable errors, redacted before it is recorded."""

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from soak.errors import BadInput
from soak.files import load_model

SECRET_WORDS = ("key", "token", "secret", "password", "authorization")


Mode = Literal["delegate", "direct", "agent"]
"""delegate: the orchestrator delegates to the coder; direct: the coder alone; agent: an external agent."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Endpoint(Strict):
    """One OpenAI-compatible endpoint that a role can use."""

    base_url: str
    """e.g. http://127.0.0.1:8000/v1"""
    model: str
    """Model name sent in each request."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key; the key itself never enters a file."""
    stream: bool = True
    """Stream responses; set false for servers that cannot stream tool calls (llama-cpp-python)."""
    max_tokens: int = 2048
    """Completion tokens per call."""
    temperature: float = 0.2
    tool_choice: Literal["auto", "required", "named"] | None = None
    """Sent with the tools when set. "named" names the tool a role still owes (the orchestrator `delegate` until it
    has delegated in the round, the coder `write_file` until the entry file is written) unless a call was refused
    in the turn (a model that mangles a forced call mangles it again), and sends none after, so the model can end its
    turn in plain text: llama-cpp-python makes tool calls only when told to, and honours max_tokens only then."""
    seed: int | None = None
    """Sent per call, offset by the task, cycle, repeat and call index: a night repeats on servers that honour seeds
    (llama.cpp, vLLM) while each cycle and each repeat still samples anew."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra request fields, e.g. {reasoning_effort = "low"} or {chat_template_kwargs = {...}}."""
    calls_per_second: float = 50.0
    """Call rate limit for this endpoint (asyncio-throttle)."""
    max_concurrent_calls: int = 8
    """Calls in flight at once against this endpoint."""
    connect_timeout_seconds: float = 5.0
    retries: int = 3
    """Retries of one call after connection errors, 5xx, stalls and truncated streams."""
    retry_backoff_seconds: float = 1.0
    """First backoff between retries; doubles each time."""
    energy_metrics_url: str | None = None
    """The Prometheus exporter of the host this endpoint runs on (NVIDIA's DCGM exporter, node_exporter), read for
    its GPU and CPU energy: where the server is when soak runs on another machine."""


class Roles(Strict):
    """Which named endpoint each role uses."""

    orchestrator: str = "default"
    coder: str = "default"


class Budgets(Strict):
    """Per-task budgets; hitting one ends the task with its own outcome. Where each is enforced, for soak's own loop
    and an external agent alike (whose calls the recording proxy charges to the same ledger); under `soak.`:

    | budget | config field | enforced at (module:function) | outcome |
    |---|---|---|---|
    | wall | `task_seconds` ¹ | `agent.attempt:AttemptCore._guarded`, an agent's jail (`agent.external`) | `timeout` |
    | LLM calls | `max_calls` ² | `agent.attempt:Ledger.start_call` (a loop's call, a proxied request) | `call_cap` |
    | tokens | `max_completion_tokens` | `agent.attempt:Ledger.record` ³ | `token_cap` |
    | rounds | `max_rounds` | `agent.attempt:AttemptCore._rounds` | verdict |
    | stale | `stale_seconds` | `llm.client:ChatEndpoint._read_stream`, `agent.proxy:ProxiedCall.relay` | `stalled` |

    ¹ per task: task.toml `budget_seconds`, a routing `extend`. ² per task: task.toml `max_calls`, a routing `cap`.
    ³ after each call, the next one is refused. Tokens are completion tokens over all calls (each of soak's own calls
    has its max_tokens capped to what is left); a stalled call is retried like any failed call."""

    task_seconds: float = 600
    """Wall-clock budget of one task, LLM calls and test runs together."""
    max_calls: int = 24
    """LLM calls (orchestrator + coder) before the task ends as call_cap."""
    max_completion_tokens: int = 200_000
    """Completion tokens over all calls before the task ends as token_cap."""
    max_rounds: int = 2
    """Test rounds: the first try plus revisions."""
    final_test_seconds: float = 30
    """Part of the wall budget (at most a quarter) kept for testing the last written solution when time runs out."""
    max_coder_turns: int = 6
    """Coder calls within one delegation before control returns to the orchestrator."""
    stale_seconds: float = 360
    """No byte on a stream for this long aborts the call as stalled."""


MAX_REQUEST_BYTES = 32 << 20
"""The default of `[agent] max_request_bytes`."""


class Agent(Strict):
    """The external agent of mode "agent": run per attempt, jailed, talking to the coder endpoint through soak's
    recording proxy."""

    name: str = ""
    """hermes, mini-swe-agent, aider (installed by `soak agent setup NAME`), or a command line with placeholders
    {prompt_file}, {prompt}, {workspace}, {base_url}, {model}, {api_key}."""
    stale_seconds: float | None = None
    """The agent's own stream-stale watchdog (Hermes: HERMES_STREAM_STALE_TIMEOUT); unset keeps the agent's
    default, which is what its users run with."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of the agent process (never a key: the proxy adds the real one)."""
    address_space_bytes: int = 8 << 30
    """RLIMIT_AS of the agent and the commands it runs, and the memory limit of their cgroup where soak may create
    one (which also counts memfd, /dev/shm and tmpfs pages)."""
    disk_bytes: int = Field(default=512 << 20, gt=0)
    """What the agent's workspace and temporary HOME may hold together, files it unlinked but keeps open included.
    Under bubblewrap or unshare both are folders of one tmpfs of this size in the jail, so a write past it fails
    (ENOSPC) and its pages count against the memory limit too; an agent found at it is killed and the attempt ends
    agent_error (DiskQuota)."""
    max_request_bytes: int = Field(default=MAX_REQUEST_BYTES, gt=0)
    """The largest request body the recording proxy takes from the agent (32 MiB: a long conversation is a few MiB);
    a larger one is answered 413, without reading more than this of it, and counts as one of the agent's calls."""
    uncontained: bool = False
    """Run the agent even on a host where neither bubblewrap nor unshare works (a plain session), which cannot keep it
    from writing the night's records or reaching the model around the proxy; the report then says the night was
    uncontained."""
    readable: list[Path] = Field(default_factory=list)
    """Paths the agent reads besides the jail's allow-list (a command of your own and its data), read-only; under
    bubblewrap or unshare nothing else outside its workspace and HOME is visible (docs/trust/sandbox.md)."""


class Server(Strict):
    """A model server soak may start, watch and restart."""

    name: str
    up: str | None = None
    """Shell command that starts the server; empty for a server that is only watched."""
    base_url: str
    health_url: str | None = None
    """Defaults to <base_url without /v1>/health."""
    metrics_url: str | None = None
    """Defaults to <base_url without /v1>/metrics; set to "" for servers without /metrics."""
    start_timeout_seconds: float = 600


class Stack(Strict):
    servers: list[Server] = Field(default_factory=list)
    health_interval_seconds: float = 5
    health_timeout_seconds: float = 5
    failures_before_down: int = 3
    """Consecutive failed health checks (refused, error status, process gone) that mark a server down."""
    hung_after_seconds: float = 600
    """Health checks that time out are a busy server until the silence lasts this long; then it is hung."""
    max_restarts_per_hour: int = 6


class Sampling(Strict):
    interval_seconds: float = 5


class ErrorBudget(Strict):
    """Pause instead of burning the night on instant failures."""

    window_tasks: int = 20
    max_infra_fraction: float = 0.3
    wait_for_stack_seconds: float = 900
    """A stack that is not back after this long ends the run."""
    probe_interval_seconds: float = 10
    """With no stack attached, how often a pause probes the endpoints (GET <base_url>/models)."""


class Gates(Strict):
    """Thresholds and sizes of `soak gate` (soak.probes.gate.GATES says which gate reads which)."""

    prefill_tokens: int = 4000
    """Prompt size of the cold prefill probes."""
    prefill_prompts: int = 3
    prefill_min_tokens_per_second: float = 900
    long_prompt_tokens: int = 120_000
    long_prompt_max_seconds: float = 180
    """The long prompt's first token must come sooner than this."""
    twin_tokens: int = 2000
    min_prefix_hit_rate: float = 0.5
    """The prefix-cache gates pass at or above this hit rate."""
    min_warm_sessions: int = Field(default=4, ge=1)
    """The sessions gate passes when at least this many concurrent agent sessions stay warm (four was where a
    llama.cpp box with its default cache RAM fell over in the field)."""
    sessions_ramp: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    """Concurrent sessions tried, in this order; the ramp stops at the first level that is not warm."""
    session_turns: int = Field(default=4, ge=2)
    """Turns per session; turns 2+ are measured (the first has no history of its own to reuse)."""
    session_system_tokens: int = Field(default=1000, ge=1)
    """The system prompt every session shares (its hits are shared reuse, not cross-turn hits)."""
    session_start_tokens: int = Field(default=2000, ge=1)
    """Each session's own first message: the task and the files it read."""
    session_turn_tokens: int = Field(default=1000, ge=1)
    """What each turn adds to a session's history (a tool result), besides the model's answer."""
    session_answer_tokens: int = Field(default=32, ge=1)
    """Tokens the model answers per turn; the answer stays in the history."""
    session_think_seconds: float = Field(default=1.0, ge=0)
    """Spacing of one round of turns, as an agent's tool runs space them: session i asks i × think / N after the
    round starts, so the sessions take turns in a fixed order (the round-robin that evicts first)."""
    min_cross_turn_hit_rate: float = Field(default=0.8, ge=0, le=1)
    """A session stays warm while this share of its earlier turns' tokens is served from the cache."""
    session_max_ttft_p95_seconds: float = Field(default=10.0, gt=0)
    """...and while the later turns' TTFT p95 stays under this: a warm turn starts answering within seconds."""

    @field_validator("sessions_ramp")
    @classmethod
    def _ramp_grows(cls, ramp: list[int]) -> list[int]:
        if ramp[0] < 1 or any(b <= a for a, b in zip(ramp, ramp[1:], strict=False)):
            raise ValueError(f"needs growing session counts from 1 up, got {ramp}")
        return ramp


class Cost(Strict):
    """The user's prices, for money per solved task (soak.decisions.energy); nothing is priced without them."""

    kwh_price: float | None = Field(default=None, ge=0)
    """The price of a kilowatt-hour, for the energy measured."""
    hardware_per_hour: float | None = Field(default=None, ge=0)
    """The hardware's cost per hour of the night, amortised (or a rented box's hourly price)."""
    currency: str = ""
    """Shown beside the figures, e.g. "EUR"."""


class Cluster(Strict):
    """`[cluster]`: run each attempt as a Ray task on a cluster's nodes (soak.night.cluster); the loop, the budgets'
    ledger and the run folder stay on this machine."""

    address: str | None = None
    """A Ray cluster's address (`HOST:6379`, `ray://HOST:10001`), or `auto` for the cluster started on this machine;
    None: attempts run here."""
    cpus_per_attempt: float = Field(default=1.0, gt=0)
    """Cores an attempt declares to Ray: its agent and its jailed tests."""
    memory_per_attempt_gb: float | None = Field(default=None, gt=0)
    """Memory an attempt declares to Ray; None declares none."""
    jail_resource: str = "soak_jail"
    """A custom resource an attempt asks one unit of: offer it on a node (`ray start --resources
    '{"soak_jail": N}'`) only where bubblewrap works, N attempts at once; "" asks for none."""


class SoakConfig(Strict):
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    roles: Roles = Field(default_factory=Roles)
    mode: Mode = "delegate"
    """delegate: orchestrator -> coder; direct: the coder alone; agent: an external agent (`[agent]`) on the coder
    endpoint."""
    suite: str = "builtin"
    concurrency: int = 2
    seed: int = 0
    canary_share: float = Field(default=0.05, ge=0, le=1)
    """Share of the suite's tasks that also run as a canary: an impossible twin whose tests are mutated so no honest
    solution passes (soak.tasks.canary), a pass being a cheat. 0 turns them off; the seed picks them, so nights,
    routing and sweeps with one seed keep the same canaries."""
    grace_seconds: float | None = None
    """At the deadline no task starts; those in flight get this long to finish, then they are cancelled (recorded
    `cancelled`, redone on resume). None (the default) scales it with the session's length so the night ends within
    5 % (at least 60 s) of its deadline: min(300, max(60, 5 % of the length) - 20) s (soak.night.loop.grace_for)."""
    budgets: Budgets = Field(default_factory=Budgets)
    agent: Agent = Field(default_factory=Agent)
    stack: Stack = Field(default_factory=Stack)
    sampling: Sampling = Field(default_factory=Sampling)
    cost: Cost = Field(default_factory=Cost)
    """`[cost]`: prices for money per solved task."""
    error_budget: ErrorBudget = Field(default_factory=ErrorBudget)
    gates: Gates = Field(default_factory=Gates)
    cluster: Cluster = Field(default_factory=Cluster)
    """`[cluster]`: where attempts run when not on this machine."""

    @model_validator(mode="after")
    def _agent_named(self) -> "SoakConfig":
        if self.mode == "agent" and not self.agent.name:
            raise ValueError('mode "agent" needs [agent] name (hermes, mini-swe-agent, aider or a command line)')
        return self

    def endpoint_for(self, role: str) -> Endpoint:
        name = getattr(self.roles, role)
        if name not in self.endpoints:
            known = ", ".join(sorted(self.endpoints)) or "none"
            raise BadInput(f"role {role} uses endpoint '{name}', which is not defined (defined: {known})")
        return self.endpoints[name]


def with_cli_endpoint(config: SoakConfig, base_url: str | None, model: str | None) -> SoakConfig:
    """`--base-url URL --model M`: one endpoint named "cli" for both roles, overriding soak.toml's roles."""
    if not base_url and not model:
        return config
    if not (base_url and model):
        raise BadInput("--base-url and --model go together")
    endpoints = {**config.endpoints, "cli": Endpoint(base_url=base_url, model=model)}
    return config.model_copy(update={"endpoints": endpoints, "roles": Roles(orchestrator="cli", coder="cli")})




def load_config(path: Path | None) -> SoakConfig:
    """Read and validate `soak.toml`; no path means all defaults."""
    if path is None:
        return SoakConfig()
    return load_model(path, SoakConfig, "config file")


def redact(value: Any) -> Any:
    """A copy fit for run.json: text under secret-looking keys is masked (numbers such as max_tokens are kept)."""
    if isinstance(value, dict):
        return {
            k: "***"
            if not isinstance(v, int | float | None)
            and any(w in str(k).lower() for w in SECRET_WORDS)
            and not str(k).endswith("_env")
            else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
