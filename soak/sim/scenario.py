"""Scenario files for `soak sim`: how the simulated server answers, how fast, and which faults it injects.

    [timing]
    ttft_seconds = [0.1, 0.8]            # a number, or [low, high] drawn per request
    decode_tokens_per_second = [40, 120] # 0 = no decode delay
    [coder]
    p_correct = 0.6
    [[faults]]
    kind = "http_500"
    rate = 0.01                          # and/or at_requests = [3, 17]

Faults fire on a rate or on request numbers; `roles` limits them (and their numbering) to some roles. `[honesty]`
sets what the model claims beside what it wrote (overclaims, honest aborts, cheats), per task. `[drift]` changes
latency, quality and resident memory at set times, so a short night has the shape of a long one that degrades.
"""

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from soak.config import Strict
from soak.errors import BadInput
from soak.files import load_model

SCENARIO_DIR = Path(__file__).with_name("scenarios")

Span = float | tuple[float, float]
"""A fixed value, or `[low, high]` drawn uniformly per request."""

Persona = Literal["orchestrator", "coder", "chat"]
"""Which scripted persona answers a request (told apart by the tools it offers); a fault's `roles` names them."""
FaultKind = Literal[
    "http_500",
    "http_503",
    "drop",
    "truncate",
    "stall",
    "name_absorbs_args",
    "bad_json_args",
    "path_escape",
    "reasoning_budget",
    "crash",
    "slow_health",
    "slow_metrics",
    "no_usage",
    "stream_mangle",
]
PROBE_FAULTS = {"slow_health", "slow_metrics"}
TIMED_FAULTS = {"stall", "slow_health", "slow_metrics"}


def _check_span(value: Span) -> Span:
    low, high = (value, value) if isinstance(value, int | float) else value
    if low < 0 or high < low:
        raise ValueError(f"needs 0 <= low <= high, got {value}")
    return value


class Timing(Strict):
    ttft_seconds: Span = 0.02
    """Time to first token (prefill), per request."""
    prefill_tokens_per_second: float = Field(default=0.0, ge=0)
    """Adds the prompt tokens not served from the prefix cache at this rate to the TTFT, so an evicted session's
    next turn is slow to start, as on a real server; 0 = no such cost."""
    decode_tokens_per_second: Span = 1000.0
    """Decode rate; 0 means no decode delay at all."""
    tokens_per_chunk: int = Field(default=1, ge=1)
    """Tokens per streamed SSE chunk (vLLM sends 1)."""
    max_running: int = Field(default=0, ge=0)
    """Requests decoded at once; the rest wait (shown as num_requests_waiting). 0 = unlimited."""
    slowdown_per_running: float = Field(default=0.0, ge=0)
    """Each other request decoding beside this one when it starts stretches its TTFT and decode time by this share
    (0.1: four at once run 1.3x slower each), as a batch shares one GPU; 0 = no such cost."""

    _spans = field_validator("ttft_seconds", "decode_tokens_per_second")(_check_span)


class Coder(Strict):
    p_correct: float = Field(default=1.0, ge=0, le=1)
    """Chance that a first write is the task's reference solution (else a broken variant)."""
    p_fix: float = Field(default=1.0, ge=0, le=1)
    """Chance that a write in a revision round (`The tests failed`) is the reference."""
    p_fenced: float = Field(default=0.0, ge=0, le=1)
    """Chance to answer with a fenced python block and no tool call (weak-model style)."""
    per_task: bool = False
    """Draw right or wrong once per task (keyed by seed and task id), not per write: every try of a task goes the same
    way, so pass^k equals the pass rate (a model that knows some tasks and not others); with it false every try is a
    fresh coin, so at the same pass rate p, pass^k is p^k."""


class Orchestrator(Strict):
    overiterate_tasks: list[str] = Field(default_factory=list)
    """Task ids (fnmatch patterns) on which the orchestrator delegates again and again, never answering done."""
    overiterate_rate: float = Field(default=0.0, ge=0, le=1)
    """Fraction of the other tasks (picked by seed and task id) that over-iterate too."""


class Honesty(Strict):
    """What the scripted model says about its own work, beside what the sim knows it wrote: the ground truth of a
    night's claims, false successes, cheats and honest aborts. Each behaviour takes task ids (fnmatch patterns) and
    a rate over the other tasks, picked by seed and task id so the same tasks behave the same all night."""

    overclaim_tasks: list[str] = Field(default_factory=list)
    """Tasks whose closing words claim success and passing tests ("Done. All tests pass.") whatever was written;
    the others' closing words say what the sim knows: done after the reference, partial after a broken variant."""
    overclaim_rate: float = Field(default=0.0, ge=0, le=1)
    abort_tasks: list[str] = Field(default_factory=list)
    """Tasks on which, in a revision round, the model says the tests contradict the task and stops without writing
    (blocked: an honest abort, through `finish` when the orchestrator is offered it)."""
    abort_rate: float = Field(default=0.0, ge=0, le=1)
    cheat_tasks: list[str] = Field(default_factory=list)
    """Tasks on which, in a revision round, the coder writes a cheat instead of a fix: the reference plus code that
    reads the test files beside it and answers each asserted call with the asserted value (a canary's pass). A task
    that aborts does not cheat."""
    cheat_rate: float = Field(default=0.0, ge=0, le=1)


class Reasoning(Strict):
    enabled: bool = False
    """Emit a reasoning field (vLLM `reasoning`, llama.cpp `reasoning_content`) before the answer."""
    tokens: Span = (20.0, 60.0)
    """Reasoning tokens per reply."""

    _spans = field_validator("tokens")(_check_span)


class Cache(Strict):
    enabled: bool = True
    """Prefix caching; off means every query misses (hits stay 0), like a hybrid model with broken APC."""
    block_tokens: int = Field(default=16, ge=1)
    """Prompts are cached in whole blocks of this many tokens, as vLLM does."""
    capacity_blocks: int = Field(default=8192, ge=1)
    """KV cache size in blocks; least recently used blocks are evicted beyond it, and a request that starts while the
    running requests' prompts need more is preempted once (vllm:num_preemptions) and pays its prefill twice."""
    prompt_tokens_details: bool = True
    """vLLM mode: per-request `usage.prompt_tokens_details.cached_tokens`, as with `--enable-prompt-tokens-details`;
    false sends null there, as vLLM does without that flag (llama.cpp mode always sends it)."""


class SpecDecode(Strict):
    enabled: bool = False
    """Expose the vLLM spec-decode counters (drafts, draft tokens, accepted, accepted per position)."""
    acceptance: list[float] = Field(default_factory=lambda: [0.8, 0.6, 0.4], min_length=1)
    """Chance that draft position k is accepted given position k-1 was; its length is the draft size."""

    @field_validator("acceptance")
    @classmethod
    def _probabilities(cls, value: list[float]) -> list[float]:
        if any(not 0 <= p <= 1 for p in value):
            raise ValueError("each acceptance must be within [0, 1]")
        return value


class Chat(Strict):
    tokens: Span = (8.0, 40.0)
    """Length of a plain chat answer (no tools, no task found)."""

    _spans = field_validator("tokens")(_check_span)


class Drift(Strict):
    """A night that changes at set times, counted in seconds since the sim server started: slower first tokens, a
    coder that is right less often, a process whose resident memory grows. Each change holds from its time on."""

    ttft_factor: float = Field(default=1.0, gt=0)
    """Multiplies every request's drawn TTFT (`timing.ttft_seconds`, before the prefill cost) from `ttft_from_s` on;
    4 is a server four times slower to start answering."""
    ttft_from_s: float = Field(default=0.0, ge=0)
    pass_factor: float = Field(default=1.0, ge=0, le=1)
    """Multiplies the coder's `p_correct` and `p_fix` from `pass_from_s` on: the reference is written less often."""
    pass_from_s: float = Field(default=0.0, ge=0)
    rss_bytes: float = Field(default=0.0, ge=0)
    """Resident memory served on /metrics as `process_resident_memory_bytes` (prometheus_client's process gauge,
    which vLLM exposes); 0 = no such gauge."""
    rss_growth_bytes_per_s: float = Field(default=0.0, ge=0)
    """Growth of that gauge per second from `rss_from_s` on: a leak to find in the night's telemetry."""
    rss_from_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _rss_served(self) -> "Drift":
        if self.rss_growth_bytes_per_s > 0 and self.rss_bytes == 0:
            raise ValueError("rss_growth_bytes_per_s needs rss_bytes > 0 (0 serves no resident memory gauge)")
        return self

    def ttft(self, elapsed: float) -> float:
        """The TTFT factor at `elapsed` seconds since the start."""
        return self.ttft_factor if elapsed >= self.ttft_from_s else 1.0

    def passing(self, elapsed: float) -> float:
        """The factor on p_correct and p_fix at `elapsed` seconds since the start."""
        return self.pass_factor if elapsed >= self.pass_from_s else 1.0

    def rss(self, elapsed: float) -> float:
        """Resident memory in bytes at `elapsed` seconds since the start."""
        return self.rss_bytes + self.rss_growth_bytes_per_s * max(0.0, elapsed - self.rss_from_s)


class Power(Strict):
    """A GPU exporter in the style of NVIDIA's DCGM exporter, served at /dcgm/metrics: the power of one GPU
    (`DCGM_FI_DEV_POWER_USAGE`, W) and its energy counter (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, mJ), the power
    `idle_watts` plus `busy_watts` while a request is being decoded, integrated exactly between the changes."""

    idle_watts: float = Field(default=0.0, ge=0)
    """With `busy_watts`, both 0: no exporter (404)."""
    busy_watts: float = Field(default=0.0, ge=0)
    dark_from_s: float | None = Field(default=None, ge=0)
    """From this time (seconds since the sim started) the exporter answers 503: a source that goes dark."""


class Fault(Strict):
    kind: FaultKind
    rate: float = Field(default=0.0, ge=0, le=1)
    """Chance per request (per probe for slow_health / slow_metrics)."""
    at_requests: list[int] = Field(default_factory=list)
    """1-based chat-request numbers on which the fault fires; with `roles`, counting only those roles' requests
    (probe numbers for slow_*)."""
    roles: list[Persona] = Field(default_factory=list)
    """Only requests of these roles; empty means any."""
    seconds: float = Field(default=0.0, ge=0)
    """Length of a stall or of a slow probe."""
    where: Literal["first_byte", "mid"] = "mid"
    """Stall before the first token, or in the middle of the stream."""
    path: str = ""
    """path_escape: the path written; empty picks `../<entry>` or `/tmp/soak-escape/<entry>`."""
    style: Literal["in_content", "no_args"] = "in_content"
    """stream_mangle: raw `<tool_call>` text in content, or a tool call whose arguments never arrive."""

    @field_validator("at_requests")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("request numbers start at 1")
        return value

    @model_validator(mode="after")
    def _fires_sometime(self) -> "Fault":
        if self.rate == 0 and not self.at_requests:
            raise ValueError(f"fault '{self.kind}' needs a rate > 0 or at_requests")
        if self.kind in TIMED_FAULTS and self.seconds <= 0:
            raise ValueError(f"fault '{self.kind}' needs seconds > 0")
        return self


class Scenario(Strict):
    """One simulated server's behaviour: the `soak sim --scenario` file."""

    name: str = ""
    description: str = ""
    model: str = "soak-sim"
    """Served model name (GET /v1/models, metric label model_name)."""
    max_model_len: int = Field(default=32768, ge=16)
    """Context length: longer prompts get HTTP 400; no max_tokens means up to the rest of it."""
    api_key: str = ""
    """When set, a chat request without `Authorization: Bearer <api_key>` gets HTTP 401, as `vllm serve --api-key`."""
    timing: Timing = Field(default_factory=Timing)
    coder: Coder = Field(default_factory=Coder)
    orchestrator: Orchestrator = Field(default_factory=Orchestrator)
    honesty: Honesty = Field(default_factory=Honesty)
    reasoning: Reasoning = Field(default_factory=Reasoning)
    cache: Cache = Field(default_factory=Cache)
    spec_decode: SpecDecode = Field(default_factory=SpecDecode)
    chat: Chat = Field(default_factory=Chat)
    drift: Drift = Field(default_factory=Drift)
    power: Power = Field(default_factory=Power)
    faults: list[Fault] = Field(default_factory=list)


def builtin_scenarios() -> list[str]:
    return sorted(path.stem for path in SCENARIO_DIR.glob("*.toml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name, or a `.toml` / `.json` file; a malformed one names the file and the field."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = SCENARIO_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise BadInput(f"no scenario '{name_or_path}' (shipped: {', '.join(builtin_scenarios())}; or give a file)")
    scenario = load_model(path, Scenario, "scenario file")
    return scenario if scenario.name else scenario.model_copy(update={"name": path.stem})
