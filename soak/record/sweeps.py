"""The schema of a sweep folder's sweep.json: each configuration's entry, its gate records and the sessions probe's
turns and levels."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soak.record.schema import SCHEMA_VERSION, RunLimits

SweepStatus = Literal["pending", "running", "done", "stack_down", "stopped"]
"""pending: not started; running: started and not ended (a resume carries it on); done: its night ended by its
limit; stack_down: its servers never came up (skipped); stopped: its night ended early (error budget)."""


class SessionTurn(BaseModel):
    """One turn of one session of the sessions probe, in the server's own counts."""

    session: int
    turn: int
    prompt_tokens: int
    cached_tokens: int | None
    """The server's per-request count (usage.prompt_tokens_details.cached_tokens); None when it reports none and
    the level's hit rates come from its /metrics counters instead."""
    history_tokens: int
    """Tokens of this session's own earlier turns that a warm cache would serve: the previous turn's prompt less
    the shared system prompt (0 on turn 1)."""
    cross_turn_hits: int | None
    """Cached tokens beyond the shared system prompt, at most history_tokens."""
    ttft_s: float


class SessionLevel(BaseModel):
    """One step of the ramp: N concurrent growing sessions, judged on their later turns (2+)."""

    sessions: int
    cross_turn_hit_rate: float | None
    """Later turns' cross-turn hits / their history tokens: how much of what the sessions said before was still
    cached."""
    coldest_session: float | None
    """The lowest of the sessions' own cross-turn hit rates: one evicted session cannot hide in the aggregate."""
    shared_hit_rate: float | None
    """Cached share of the shared system prompt over all turns: reuse across sessions, not of their own history."""
    full_price_turns: int | None
    """Later turns that got (nearly) none of their history from the cache (cross-turn hit below 10 %)."""
    ttft_p50_s: float
    ttft_p95_s: float
    largest_prompt: int
    warm: bool
    source: Literal["usage", "metrics"]
    """Where cached tokens came from: the per-request usage, or /metrics counter deltas per round."""
    turns: list[SessionTurn] = Field(default_factory=list)


class GateMeasure(BaseModel):
    """What one gate measured against its threshold (soak.probes.gate judges it)."""

    name: str
    measured: float | None
    threshold: float
    unit: str
    higher_is_better: bool = True
    detail: str = ""
    levels: list[SessionLevel] = Field(default_factory=list)
    """The sessions gate's ramp, one entry per level tried; empty for the other gates."""

    def measured_text(self) -> str:
        return "not measured" if self.measured is None else f"{self.measured:,.3g} {self.unit}"

    def threshold_text(self) -> str:
        return f"threshold {'>=' if self.higher_is_better else '<='} {self.threshold:g}"


class GateRecord(GateMeasure):
    """One gate's result as `soak gate --output` and sweep.json keep it."""

    passed: bool


class SweepEntry(BaseModel):
    """One configuration of a sweep: its resolved config, its run and how far it got."""

    model_config = ConfigDict(extra="forbid")

    name: str
    run_id: str
    """Its ordinary run folder under the data dir: `<sweep_id>.<name>`."""
    config: dict[str, Any]
    """The configuration's SoakConfig (the sweep's base with its overrides), secrets redacted."""
    limits: RunLimits
    gates: list[str] = Field(default_factory=list)
    """Gate names probed once its stack is up, before its first attempt."""
    status: SweepStatus = "pending"
    detail: str = ""
    gate_results: list[GateRecord] = Field(default_factory=list)
    started_at: float | None = None
    ended_at: float | None = None


class SweepInfo(BaseModel):
    """sweep.json: the plan (every configuration resolved before the first starts) and each one's progress."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    sweep_id: str
    created_at: float
    source: str
    """The sweep file it was planned from."""
    suite: str
    seed: int
    configurations: list[SweepEntry]
    levels: list[int] = Field(default_factory=list)
    """A capacity sweep's agents at once, one per configuration in order (soak.night.capacity); empty for a sweep of
    stacks."""
