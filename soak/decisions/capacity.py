"""How many agents at once: per level of a capacity sweep (soak.night.capacity) the figures that decide, the knee,
and the signal that limits the next level.

The answer is the level with the most solved tasks per hour among those whose quality held. From the fewest agents
up, a level holds when its pass rate is not below the fewest-agents level's beyond noise (their 95 % Wilson
intervals apart, as the sweep compares configurations) and, where the levels tried their tasks at least twice,
neither is its pass^k (the paired per-task difference of soak.decisions.sweep.repeat_gap). The first level that does
not hold ends the search: more agents only add to what broke it. Solved per hour counts the level's attempts from the
first start to the last end, so a stack's start and its gates do not dilute a short level.

The limiting signal is read from the server's own accounting, comparing the next level with the answer, in the order
the damage travels: queueing (time waiting for a decode slot: the mean of vLLM's num_requests_waiting or
llama-server's requests_deferred over the level, times its length, per attempt, by Little's law), the KV cache
(preemptions), the prefix cache (its hit rate falling: sessions evicted and prefilled again), the budgets (timeouts,
the stale watchdog), then latency (TTFT p95). When none moved, the limit is outside the server: the host that runs
the agents and their tests.
"""

from dataclasses import dataclass, field

import pandas as pd

from soak.decisions.sweep import Standing, repeat_gap, repeat_k, repeat_text, standing, sweep_runs
from soak.record import series
from soak.record.read import RunRecord
from soak.record.schema import HIT_COUNTERS, MODEL_OUTCOMES
from soak.record.sweeps import SweepInfo

WAITING = ("vllm:num_requests_waiting", "llamacpp:requests_deferred")
"""Requests queued for a decode slot, as each engine counts them."""
HIT_FALL = 0.1
"""A prefix-cache hit rate this much lower (absolute) is sessions being evicted."""
TTFT_RISE = 1.5
"""A TTFT p95 this many times higher is latency limiting."""


@dataclass
class Level:
    """One level: the sweep's standing of its run, and what the capacity question adds."""

    agents: int
    standing: Standing
    solved_per_hour: float | None = None
    timeouts: int = 0
    stalled: int = 0
    """Calls the stale watchdog cut (no byte for stale_seconds)."""
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    queued_s: float | None = None
    """Seconds an attempt spent queued at the server, on average (Little's law on the waiting gauge)."""
    hit_rate: float | None = None
    kv_peak: float | None = None
    preemptions: float | None = None
    budget_s: float | None = None
    """The attempts' wall budget (median of what they ran under)."""

    @property
    def name(self) -> str:
        return self.standing.name

    @property
    def measured(self) -> bool:
        return self.standing.status == "done" and self.standing.attempts > 0

    def rate_text(self) -> str:
        s = self.standing
        if not s.attempts:
            return "-"
        low, high = s.pass_interval
        return f"{s.passes}/{s.attempts} {s.pass_rate:.0%} [{low:.0%}-{high:.0%}]"


def attempts_span(tasks: pd.DataFrame) -> float:
    """Hours from the first attempt's start to the last one's end."""
    if tasks.empty:
        return 0.0
    return max(0.0, float(tasks["ended_at"].max() - tasks["started_at"].min())) / 3600


def queued_per_attempt(samples: pd.DataFrame, seconds: float, attempts: int) -> float | None:
    """Little's law: the waiting gauge's mean times the level's length is the queued request-seconds; per attempt."""
    for metric in WAITING:
        waiting = series.window(samples, "server:*", metric)
        if not waiting.empty and attempts:
            return float(waiting.groupby("at")["value"].sum().mean()) * seconds / attempts
    return None


def hit_rate(samples: pd.DataFrame) -> float | None:
    """The prefix cache's hit rate over the level from the server's own counters (vLLM or llama-server)."""
    for hits, queries in HIT_COUNTERS.values():
        queried = sum(series.counter_total(samples, name)["delta"].sum() for name in queries)
        if queried > 0:
            return float(series.counter_total(samples, hits)["delta"].sum() / queried)
    return None


def quantile(values: pd.Series, q: float) -> float | None:
    values = values.dropna()
    return float(values.quantile(q)) if len(values) else None


def level_of(agents: int, found: Standing, run: RunRecord | None) -> Level:
    """The capacity figures of one level's run (None: not started)."""
    level = Level(agents, found)
    if run is None:
        return level
    tasks = run.tasks[run.tasks["outcome"].isin(MODEL_OUTCOMES)]
    hours = attempts_span(run.tasks)
    level.solved_per_hour = found.passes / hours if hours else None
    level.timeouts = int((tasks["outcome"] == "timeout").sum())
    calls, samples = run.calls, run.samples
    level.stalled = int((calls["status"] == "stalled").sum())
    ok = calls[calls["status"] == "ok"]["ttft_s"]
    level.ttft_p50_s, level.ttft_p95_s = quantile(ok, 0.5), quantile(ok, 0.95)
    level.queued_s = queued_per_attempt(samples, hours * 3600, len(tasks))
    level.hit_rate = hit_rate(samples)
    kv = series.window(samples, "server:*", "vllm:kv_cache_usage_perc")["value"]
    level.kv_peak = float(kv.max()) if len(kv) else None
    preempted = series.counter_total(samples, "vllm:num_preemptions_total")
    level.preemptions = float(preempted["delta"].sum()) if len(preempted) else None
    level.budget_s = quantile(tasks["limit_seconds"], 0.5) if "limit_seconds" in tasks else None
    return level


def levels(info: SweepInfo, runs: dict[str, RunRecord] | None = None) -> list[Level]:
    """Every level of a capacity sweep, in order of agents, with the figures its run has so far (`runs`: the sweep's
    runs already read, by run id)."""
    runs = sweep_runs(info) if runs is None else runs
    return [level_of(agents, standing(entry, runs.get(entry.run_id)), runs.get(entry.run_id))
            for agents, entry in zip(info.levels, info.configurations, strict=True)]


def broke(base: Level, level: Level, k: int | None) -> str:
    """Why `level`'s quality did not hold against the fewest-agents level; empty when it held."""
    if level.standing.status == "stopped":
        return f"its night stopped early ({level.standing.detail or 'error budget'})"
    if not level.measured:
        return f"not measured ({level.standing.status})"
    b, s = base.standing, level.standing
    if s.pass_interval[1] < b.pass_interval[0]:
        return f"the pass rate falls {b.pass_rate:.0%} → {s.pass_rate:.0%}"
    gap = repeat_gap(b, s, k) if k else None
    if k and gap and gap[1] > 0:
        return f"pass^{k} falls {repeat_text(b, k)} → {repeat_text(s, k)}"
    return ""


def signals(at: Level, nxt: Level) -> list[tuple[str, str]]:
    """What moved from the answer to the next level, as (signal, words), in the order the damage travels."""
    found = []
    budget = f" of the {nxt.budget_s:.0f} s budget" if nxt.budget_s else ""
    if nxt.queued_s is not None and nxt.queued_s > max(1.0, (at.queued_s or 0.0) * 1.5, 0.05 * (nxt.budget_s or 0)):
        found.append(("queueing", f"queued {nxt.queued_s:.1f} s per attempt{budget}"))
    if nxt.preemptions and nxt.preemptions > (at.preemptions or 0):
        peak = f", KV cache {nxt.kv_peak:.0%} full" if nxt.kv_peak is not None else ""
        found.append(("kv cache", f"{nxt.preemptions:.0f} preemptions{peak}"))
    if at.hit_rate is not None and nxt.hit_rate is not None and at.hit_rate - nxt.hit_rate >= HIT_FALL:
        found.append(("prefix cache", f"prefix-cache hit rate {at.hit_rate:.0%} → {nxt.hit_rate:.0%}: sessions "
                                      "evicted and prefilled again"))
    if nxt.timeouts > at.timeouts:
        found.append(("timeouts", f"timeouts {nxt.timeouts} of {nxt.standing.attempts}"))
    if nxt.stalled > at.stalled:
        found.append(("stale watchdog", f"the stale watchdog cut {nxt.stalled} calls"))
    if at.ttft_p95_s and nxt.ttft_p95_s and nxt.ttft_p95_s >= TTFT_RISE * at.ttft_p95_s:
        found.append(("latency", f"TTFT p95 {at.ttft_p95_s:.2f} → {nxt.ttft_p95_s:.2f} s"))
    if all(name in ("timeouts", "stale watchdog") for name, _ in found):
        found.insert(0, ("host", "no server signal moved: the host running the agents and their tests is the "
                                 "likelier limit"))
    return found


@dataclass
class Answer:
    """How many agents to run, in one line, and what limits the next level."""

    agents: int | None
    line: str
    limit: str = ""
    """The signal that limits the next level (queueing, kv cache, prefix cache, timeouts, stale watchdog, latency,
    host); empty when there is no next level."""
    signals: list[str] = field(default_factory=list)
    """Everything that moved at the next level, the limiting one first."""
    held: dict[int, str] = field(default_factory=dict)
    """Per level tried: empty when its quality held, else why not."""

    def lines(self, found: list[Level]) -> list[str]:
        k = repeat_k([level.standing for level in found if level.standing.repeatability])
        width = 18 if k else 0
        rows = [f"{'agents':>6}  {'status':<10}{'solved/h':>9}  {'pass rate [95% CI]':<24}"
                f"{f'pass^{k}' if k else '':<{width}}{'timeouts':>9}{'stale':>6}{'TTFT p50/p95 s':>16}"
                f"{'queued s':>10}{'hit rate':>9}{'preempt':>8}{'kJ/solved':>10}"]
        for level in found:
            s = level.standing
            repeat = repeat_text(s, k) if k and k in s.repeatability else ""
            ttft = f"{_num(level.ttft_p50_s, 2)}/{_num(level.ttft_p95_s, 2)}"
            rows.append(f"{level.agents:>6}  {s.status:<10}{_num(level.solved_per_hour, 1):>9}  "
                        f"{level.rate_text():<24}{repeat:<{width}}{level.timeouts:>9}{level.stalled:>6}{ttft:>16}"
                        f"{_num(level.queued_s, 1):>10}{_pct(level.hit_rate):>9}{_num(level.preemptions, 0):>8}"
                        f"{_num(s.joules_per_pass and s.joules_per_pass / 1000, 1):>10}")
        return [*rows, "", self.line]


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def answer(found: list[Level]) -> Answer:
    """The knee: the most solved per hour among the levels up to the first whose quality broke."""
    measured = [level for level in found if level.measured]
    if not measured:
        return Answer(None, "no answer yet: no level has finished with judged attempts")
    if not any(level.standing.passes for level in measured):
        tried = sum(level.standing.attempts for level in measured)
        return Answer(None, f"no answer: no level solved a task (0 of {tried} attempts passed), so no level can be "
                            "told to solve more; sweep again with a model and tasks it solves some of")
    base, k = measured[0], repeat_k([level.standing for level in measured])
    held: dict[int, str] = {}
    for level in found:
        held[level.agents] = broke(base, level, k) if level is not base else ""
        if held[level.agents]:
            break
    fine = [level for level in found if level.agents in held and not held[level.agents]]
    choice = max(fine, key=lambda level: (level.solved_per_hour or 0.0, -level.agents))
    head = f"run {choice.agents} agent{'s' if choice.agents > 1 else ''}: {_num(choice.solved_per_hour, 1)} solved/h"
    later = [level for level in found if level.agents > choice.agents and level.agents in held]
    if not later:
        return Answer(choice.agents, f"{head}, the most tried, and quality held at every level: try more agents",
                      held=held)
    nxt = later[0]
    what = held[nxt.agents] or f"solved/h is no higher ({_num(nxt.solved_per_hour, 1)})"
    if not nxt.measured:
        return Answer(choice.agents, f"{head}; at {nxt.agents} {what}", held=held)
    moved = signals(choice, nxt)
    limit, words = moved[0]
    timeouts = next((text for name, text in moved if name == "timeouts"), "")
    because = f"{timeouts}: {words}" if timeouts and limit != "timeouts" else words
    return Answer(choice.agents, f"{head}; at {nxt.agents} {what} ({because})", limit,
                  [text for _, text in moved], held)
