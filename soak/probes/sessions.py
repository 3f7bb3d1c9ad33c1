"""The sessions gate: how many concurrent, growing agent sessions a server keeps warm (sessions until the cliff).

N sessions share a system prompt; each has its own first message and grows every turn by the model's answer and a
tool result, as an agent's history does. A round of turns goes round-robin in a fixed order, spaced by the think
time: the access pattern that a capacity-bound prefix cache evicts first. Per turn the server's own counts say what
was cached; the turn's cross-turn hits are the cached tokens beyond the shared prompt, so reuse of the shared prompt
cannot hide a session that re-prefilled its own history. The ramp doubles N until a level is no longer warm.
"""

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from soak.config import Gates
from soak.probes.probe import GateResult, Probe, ProbeFailed
from soak.record.summary import REPREFILL_HIT
from soak.record.sweeps import SessionLevel, SessionTurn

KNEE = 0.9
"""The knee: the first level whose cross-turn hit rate falls below this share of one session's, or whose TTFT p95
more than doubles one session's."""


@dataclass
class Session:
    index: int
    messages: list[dict[str, Any]]
    previous_prompt: int = 0
    turns: list[SessionTurn] = field(default_factory=list)


@dataclass
class Level:
    """One level in progress: its sessions, the gate's sizes and the seed its prompts grow from, and (without
    per-request counts) the hits its rounds' counters showed."""

    sessions: list[Session]
    shared_tokens: int
    by_usage: bool
    gates: Gates
    seed: str
    round_hits: float = 0.0
    round_history: float = 0.0


async def take_turn(probe: Probe, level: Level, session: Session, number: int, delay: float) -> None:
    await asyncio.sleep(delay)
    result = await probe.ask(session.messages, max_tokens=level.gates.session_answer_tokens)
    row = result.rows[-1]
    if not row.prompt_tokens:
        raise ProbeFailed("the server reported no prompt tokens: the sessions cannot be measured")
    history = session.previous_prompt - level.shared_tokens if number > 1 else 0
    cached = row.cached_tokens if level.by_usage else None
    cross = None if cached is None else min(max(history, 0), max(0, cached - level.shared_tokens))
    session.turns.append(SessionTurn(
        session=session.index, turn=number, prompt_tokens=row.prompt_tokens, cached_tokens=cached,
        history_tokens=max(history, 0), cross_turn_hits=cross,
        ttft_s=row.ttft_s if row.ttft_s is not None else row.duration_s))
    session.previous_prompt = row.prompt_tokens
    tool_result = await probe.prompt_of(level.gates.session_turn_tokens, f"{level.seed}-s{session.index}-t{number}")
    session.messages += [{"role": "assistant", "content": result.content},
                         {"role": "user", "content": f"Tool result:\n{tool_result}"}]


async def run_round(probe: Probe, level: Level, number: int) -> None:
    """Every session takes its turn `number`, session i after i × think / N; without per-request counts the
    round's /metrics deltas stand in for its turns' hits."""
    before = None if level.by_usage else await probe.hit_counters()
    spacing = level.gates.session_think_seconds / len(level.sessions)
    await asyncio.gather(*(take_turn(probe, level, s, number, s.index * spacing) for s in level.sessions))
    if before is not None and number > 1:
        after = await probe.hit_counters()
        if after is None:
            raise ProbeFailed("the prefix-cache counters disappeared during the probe")
        history = sum(s.turns[-1].history_tokens for s in level.sessions)
        shared = level.shared_tokens * len(level.sessions)
        level.round_hits += min(history, max(0.0, after[0] - before[0] - shared))
        level.round_history += history


async def start_level(probe: Probe, count: int, gates: Gates, seed: str) -> Level:
    """The shared system prompt is asked once alone: the server counts its tokens, and it is warm for all."""
    system = {"role": "system", "content": await probe.prompt_of(gates.session_system_tokens, seed)}
    alone = (await probe.ask([system])).rows[-1]
    if not alone.prompt_tokens:
        raise ProbeFailed("the server reported no prompt tokens: the sessions cannot be measured")
    by_usage = alone.cached_tokens is not None
    if not by_usage and await probe.hit_counters() is None:
        raise ProbeFailed("the server reports cached tokens neither per request nor in /metrics counters")
    sessions = []
    for index in range(count):
        # The session's own seed opens its first message: beyond the system prompt nothing is shared.
        task = await probe.prompt_of(gates.session_start_tokens, f"{seed}-s{index}")
        sessions.append(Session(index, [system, {"role": "user", "content": task}]))
    return Level(sessions, alone.prompt_tokens, by_usage, gates, seed)


def summarize(level: Level, gates: Gates) -> SessionLevel:
    turns = [t for s in level.sessions for t in s.turns]
    later = [t for t in turns if t.turn > 1]
    ttfts = [t.ttft_s for t in later]
    p50, p95 = (float(np.percentile(ttfts, q)) for q in (50, 95))
    shared: float | None
    full_price: int | None
    if level.by_usage:
        history = sum(t.history_tokens for t in later)
        rate = sum(t.cross_turn_hits or 0 for t in later) / history if history else None
        per_session = [sum(t.cross_turn_hits or 0 for t in s.turns) / sum(t.history_tokens for t in s.turns)
                       for s in level.sessions if any(t.history_tokens for t in s.turns)]
        coldest = min(per_session, default=None)
        shared = sum(min(t.cached_tokens or 0, level.shared_tokens) for t in turns) / (
            level.shared_tokens * len(turns))
        # The night's rule for a re-prefilled turn, applied to the session's own history (which the probe knows).
        full_price = sum(1 for t in later if t.history_tokens and (t.cross_turn_hits or 0) < REPREFILL_HIT *
                         t.history_tokens)
    else:
        rate = level.round_hits / level.round_history if level.round_history else None
        coldest = shared = full_price = None
    judged = coldest if coldest is not None else rate
    warm = judged is not None and judged >= gates.min_cross_turn_hit_rate and p95 <= gates.session_max_ttft_p95_seconds
    return SessionLevel(
        sessions=len(level.sessions), cross_turn_hit_rate=rate, coldest_session=coldest, shared_hit_rate=shared,
        full_price_turns=full_price, ttft_p50_s=p50, ttft_p95_s=p95, largest_prompt=max(t.prompt_tokens for t in turns),
        warm=warm, source="usage" if level.by_usage else "metrics", turns=turns)


async def probe_level(probe: Probe, count: int, gates: Gates) -> SessionLevel:
    seed = uuid.uuid4().hex
    level = await start_level(probe, count, gates, seed)
    for number in range(1, gates.session_turns + 1):
        await run_round(probe, level, number)
    return summarize(level, gates)


def knee_of(levels: list[SessionLevel]) -> int | None:
    first = levels[0]
    one = first.cross_turn_hit_rate or 0
    for level in levels[1:]:
        colder = one > 0 and (level.cross_turn_hit_rate or 0) < KNEE * one
        if colder or level.ttft_p95_s > 2 * first.ttft_p95_s:
            return level.sessions
    return None


def sessions_until_the_cliff(levels: list[SessionLevel]) -> int:
    """The largest N whose level and every level before it stayed warm (0: not even one session)."""
    warm = 0
    for level in levels:
        if not level.warm:
            break
        warm = level.sessions
    return warm


def verdict(levels: list[SessionLevel], failure: str) -> str:
    warm = sessions_until_the_cliff(levels)
    knee = knee_of(levels)
    knee_text = f"; knee at {knee}" if knee else ""
    if failure:
        return f"warm up to {warm} session(s); {failure}{knee_text}"
    cold = next((level for level in levels if not level.warm), None)
    if cold is None:
        return (f"warm at every level tried (up to {levels[-1].sessions}){knee_text}: "
                "extend sessions_ramp to find the cliff")
    rate = "unknown" if cold.cross_turn_hit_rate is None else f"{cold.cross_turn_hit_rate:.0%}"
    paid = "" if cold.full_price_turns is None else f", {cold.full_price_turns} turn(s) re-prefilled their history"
    return (f"warm up to {warm} session(s); falls off at {cold.sessions}: cross-turn hit {rate}{paid}, "
            f"TTFT p95 {cold.ttft_p95_s:.2f} s{knee_text}")


async def gate_sessions(probe: Probe, gates: Gates) -> GateResult:
    """The ramp until the first level that is not warm; a call failing at a later level is that level's cliff."""
    levels: list[SessionLevel] = []
    failure = ""
    for count in gates.sessions_ramp:
        try:
            level = await probe_level(probe, count, gates)
        except ProbeFailed as error:
            if not levels:
                raise
            failure = f"at {count} sessions {error}"
            break
        levels.append(level)
        if not level.warm:
            break
    return GateResult(name="sessions", measured=sessions_until_the_cliff(levels), threshold=gates.min_warm_sessions,
                      unit="sessions", detail=verdict(levels, failure), levels=levels)


def level_table(levels: list[SessionLevel]) -> list[str]:
    """Per level: the later turns' cross-turn hit rate, the coldest session, re-prefilled turns and TTFT."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    lines = [f"  {'sessions':>8}  {'cross-turn hit':>14}  {'coldest':>7}  {'shared':>6}  {'full price':>10}  "
             f"{'TTFT p50':>8}  {'TTFT p95':>8}  {'prompt':>7}  warm"]
    for level in levels:
        paid = "-" if level.full_price_turns is None else str(level.full_price_turns)
        lines.append(f"  {level.sessions:>8}  {pct(level.cross_turn_hit_rate):>14}  {pct(level.coldest_session):>7}  "
                     f"{pct(level.shared_hit_rate):>6}  {paid:>10}  {level.ttft_p50_s:>7.2f}s  "
                     f"{level.ttft_p95_s:>7.2f}s  {level.largest_prompt:>7}  {'yes' if level.warm else 'NO'}")
    return lines
