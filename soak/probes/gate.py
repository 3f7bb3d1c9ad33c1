"""`soak gate`: numeric gates with explicit thresholds (prefill, long prompt, prefix cache twin and replay, sessions
until the cliff: soak.probes.sessions), and GATES, the one registry of them that the CLI, `soak gate`, doctor and a
sweep read.

Gates assume the server is otherwise idle: cache hit rates come from /metrics counter deltas around the probes.
Prompt sizes are the server's reported prompt_tokens, never estimates.
"""

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from soak.config import Gates, SoakConfig
from soak.errors import BadInput
from soak.files import write_atomic
from soak.llm.client import CallResult, ChatEndpoint
from soak.probes.probe import GateResult, Probe, ProbeFailed
from soak.probes.sessions import gate_sessions, level_table
from soak.record.layout import RunLayout
from soak.record.read import run_folders
from soak.record.transcript import load_transcript, read_transcript


def prefill_rate(result: CallResult) -> tuple[float, int]:
    row = result.rows[-1]
    seconds = row.ttft_s if row.ttft_s is not None else row.duration_s
    return (row.prompt_tokens or 0) / seconds, row.prompt_tokens or 0


async def gate_prefill(probe: Probe, tokens: int = 4000, prompts: int = 3, threshold: float = 900) -> GateResult:
    """Cold prefill throughput: prompt tokens / TTFT over unique prompts."""
    rates, sizes = [], []
    for _ in range(prompts):
        text = await probe.prompt_of(tokens, uuid.uuid4().hex)
        rate, size = prefill_rate(await probe.ask([{"role": "user", "content": text}]))
        rates.append(rate)
        sizes.append(size)
    rates.sort()
    return GateResult(
        name="prefill",
        measured=rates[len(rates) // 2],
        threshold=threshold,
        unit="tok/s",
        detail=f"median of {prompts} cold prompts of {min(sizes)}-{max(sizes)} tokens",
    )


async def gate_long_prompt(probe: Probe, tokens: int = 120_000, limit_seconds: float = 180) -> GateResult:
    """One very long prompt must produce its first token in time."""
    text = await probe.prompt_of(tokens, uuid.uuid4().hex)
    result = await probe.ask([{"role": "user", "content": text}])
    row = result.rows[-1]
    seconds = row.ttft_s if row.ttft_s is not None else row.duration_s
    return GateResult(
        name="long-prompt",
        measured=seconds,
        threshold=limit_seconds,
        unit="s",
        higher_is_better=False,
        detail=f"first token of a {row.prompt_tokens}-token prompt",
    )


def unmeasurable(name: str, threshold: float, why: str) -> GateResult:
    gate = GATES[name]
    return GateResult(name=name, measured=None, threshold=threshold, unit=gate.unit,
                      higher_is_better=gate.higher_is_better, detail=f"cannot be measured: {why}")


async def hit_rate_of(probe: Probe, turns: list[tuple[list[dict[str, Any]], bool]], name: str,
                     threshold: float) -> GateResult:
    """Send each prompt in order; the hit rate over the measured ones comes from the server's counter deltas."""
    if await probe.hit_counters() is None:
        return unmeasurable(name, threshold, f"no prefix-cache counters at {probe.metrics_url or '(no /metrics)'}")
    hits = queries = served = 0.0
    for messages, measured in turns:
        before = await probe.hit_counters() if measured else None
        result = await probe.ask(messages)
        if measured:
            after = await probe.hit_counters()
            if before is None or after is None:
                return unmeasurable(name, threshold, "the prefix-cache counters disappeared during the probe")
            hits, queries = hits + after[0] - before[0], queries + after[1] - before[1]
            served += result.rows[-1].prompt_tokens or 0
    repeats = sum(measured for _, measured in turns)
    if queries <= 0 and hits == 0 and served > 0:
        # vLLM with prefix caching off keeps its counters but never queries the cache: nothing was served from it.
        return GateResult(name=name, measured=0.0, threshold=threshold, unit="hit rate",
                          detail=f"the cache was never queried: 0 of {served:.0f} prompt tokens hit over {repeats} "
                                 "repeat(s) (is prefix caching on?)")
    if queries <= 0:
        return unmeasurable(name, threshold, "the prefix-cache query counter did not move")
    return GateResult(name=name, measured=hits / queries, threshold=threshold, unit="hit rate",
                      detail=f"{hits:.0f} of {queries:.0f} prompt tokens hit over {repeats} repeat(s)")


async def gate_prefix_twin(probe: Probe, tokens: int = 2000, threshold: float = 0.5) -> GateResult:
    """The same prompt twice: the second should be served from the prefix cache."""
    messages = [{"role": "user", "content": await probe.prompt_of(tokens, uuid.uuid4().hex)}]
    return await hit_rate_of(probe, [(messages, False), (messages, True)], "prefix-twin", threshold)


def replay_turns(transcript: Path) -> list[tuple[list[dict[str, Any]], bool]]:
    """A recorded session (JSONL of chat messages) -> the prompt of each assistant turn, each extending the last.

    Lines of soak's own transcripts carry a `thread` (orchestrator, coder-<n>, direct); each thread is replayed as
    its own conversation, its messages as the loop sent them (TranscriptLine.chat_message), and its first turn
    only warms the cache, so turns 2+ are measured.
    """
    threads: dict[str, list[dict[str, Any]]] = {}
    for line in load_transcript(transcript):
        threads.setdefault(line.thread, []).append(line.chat_message())
    turns = []
    for messages in threads.values():
        starts = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
        turns += [(messages[:i], n > 0) for n, i in enumerate(starts)]
    if not any(measured for _, measured in turns):
        raise BadInput(f"{transcript}: needs a thread with at least two assistant turns to replay")
    return turns


async def gate_prefix_replay(probe: Probe, transcript: Path, threshold: float = 0.5) -> GateResult:
    return await hit_rate_of(probe, replay_turns(transcript), "prefix-replay", threshold)


def latest_transcript(runs_root: Path) -> Path | None:
    """The newest recorded transcript with at least two assistant turns, for `gate all`."""
    found = [path for run in run_folders(runs_root) for path in RunLayout(run).transcripts()]
    for path in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)[:200]:
        assistant = (line for line in read_transcript(path) if line.role == "assistant")
        if next(assistant, None) and next(assistant, None):
            return path
    return None


async def replay_if_given(probe: Probe, gates: Gates, transcript: Path | None) -> GateResult:
    """Not measured, rather than failed by a crash, when there is no transcript (`soak gate all` found none)."""
    if transcript is None:
        return unmeasurable("prefix-replay", gates.min_prefix_hit_rate, "no transcript (--transcript)")
    return await gate_prefix_replay(probe, transcript, gates.min_prefix_hit_rate)


@dataclass(frozen=True)
class Gate:
    """One gate: how it runs, which [gates] settings it reads, and whether it needs a recorded transcript."""

    run: Callable[[Probe, Gates, Path | None], Awaitable[GateResult]]
    threshold: str
    """The [gates] key of its threshold (`soak gate --threshold` sets it)."""
    unit: str
    higher_is_better: bool = True
    size: str | None = None
    """The [gates] key of its prompt size (`soak gate --tokens` sets it); None: the transcript sizes the prompts."""
    needs_transcript: bool = False
    """It replays a recorded transcript, so a sweep cannot probe it by itself before the first attempt."""


GATES: dict[str, Gate] = {
    "prefill": Gate(lambda probe, g, _: gate_prefill(probe, g.prefill_tokens, g.prefill_prompts,
                                                     g.prefill_min_tokens_per_second),
                    "prefill_min_tokens_per_second", "tok/s", size="prefill_tokens"),
    "long-prompt": Gate(lambda probe, g, _: gate_long_prompt(probe, g.long_prompt_tokens, g.long_prompt_max_seconds),
                        "long_prompt_max_seconds", "s", higher_is_better=False, size="long_prompt_tokens"),
    "prefix-twin": Gate(lambda probe, g, _: gate_prefix_twin(probe, g.twin_tokens, g.min_prefix_hit_rate),
                        "min_prefix_hit_rate", "hit rate", size="twin_tokens"),
    "prefix-replay": Gate(replay_if_given, "min_prefix_hit_rate", "hit rate", needs_transcript=True),
    "sessions": Gate(lambda probe, g, _: gate_sessions(probe, g), "min_warm_sessions", "sessions",
                     size="session_start_tokens"),
}
"""Every gate by name, in the order `soak gate all` runs them."""
SWEEP_GATES = tuple(name for name, gate in GATES.items() if not gate.needs_transcript)
"""The gates a sweep can probe by itself (prefix-replay needs a recorded transcript: use `soak gate`)."""


async def run_gates(probe: Probe, names: list[str], gates: Gates, transcript: Path | None) -> list[GateResult]:
    """Each gate in turn; one whose probe fails is a FAIL with the reason, and the others still run."""
    results = []
    for name in names:
        gate = GATES[name]
        try:
            result = await gate.run(probe, gates, transcript)
        except ProbeFailed as failure:
            result = unmeasurable(name, getattr(gates, gate.threshold), str(failure))
        if probe.unstreamed:
            result.detail += " (probed without streaming: the server's streams report no usage)"
        results.append(result)
    return results


async def gate_role(config: SoakConfig, role: str, names: list[str], gates: Gates, transcript: Path | None = None,
                    metrics_url: str | None = None) -> list[GateResult]:
    """Run the gates against the endpoint a role uses (its /metrics found from the stack unless given).

    The sessions gate measures the server's queue, not the client's: the endpoint's max_concurrent_calls is raised
    to the ramp's largest count for it."""
    from soak.stack.servers import metrics_url_for

    endpoint = config.endpoint_for(role)
    if "sessions" in names:
        in_flight = max(endpoint.max_concurrent_calls, gates.sessions_ramp[-1])
        endpoint = endpoint.model_copy(update={"max_concurrent_calls": in_flight})
    chat = ChatEndpoint(getattr(config.roles, role), endpoint, config.budgets.stale_seconds)
    probe = Probe(chat, metrics_url or metrics_url_for(config.stack, endpoint.base_url))
    try:
        return await run_gates(probe, names, gates, transcript)
    finally:
        await probe.close()
        await chat.close()


def with_session_shape(gates: Gates, name: str, ramp: str | None, turns: int | None) -> Gates:
    """`--ramp` and `--turns` set the sessions gate's ramp and session length."""
    if ramp is None and turns is None:
        return gates
    if name not in ("sessions", "all"):
        raise BadInput("--ramp and --turns shape the sessions gate: name it (soak gate sessions)")
    shape: dict[str, Any] = {} if turns is None else {"session_turns": turns}
    if ramp is not None:
        try:
            shape["sessions_ramp"] = [int(part) for part in ramp.split(",")]
        except ValueError:
            raise BadInput(f"--ramp takes session counts joined by commas, e.g. 1,2,4,8 (got {ramp!r})") from None
    try:
        return Gates.model_validate(gates.model_dump() | shape)
    except ValidationError as error:
        raise BadInput(f"--ramp/--turns: {error.errors()[0]['msg']}") from None


def with_overrides(gates: Gates, name: str, tokens: int | None, threshold: float | None) -> Gates:
    """`--tokens` and `--threshold` set the named gate's own [gates] keys."""
    if name not in GATES:
        if tokens is not None or threshold is not None:
            raise BadInput("--tokens and --threshold set one gate's prompt size and threshold: name the gate")
        return gates
    gate = GATES[name]
    overrides: dict[str, float] = {}
    if tokens is not None:
        if gate.size is None:
            raise BadInput(f"{name} replays the transcript's own prompts: drop --tokens")
        overrides[gate.size] = tokens
    if threshold is not None:
        overrides[gate.threshold] = threshold
    return gates.model_copy(update=overrides)


class GateOptions(BaseModel):
    """`soak gate` flags; None means "not given" (soak.toml's [gates] or the gate's default decides)."""

    name: str
    """A gate of GATES, or `all`."""
    config_path: Path | None = None
    role: str = "coder"
    base_url: str | None = None
    model: str | None = None
    metrics_url: str | None = None
    tokens: int | None = None
    threshold: float | None = None
    transcript: Path | None = None
    output: Path | None = None
    ramp: str | None = None
    turns: int | None = None


def run_gate_command(options: GateOptions) -> bool:
    """Resolve the endpoint and thresholds, run the gate (`all`: every one), print and optionally save; True when
    all pass."""
    from soak.config import load_config, with_cli_endpoint
    from soak.paths import data_dir

    name, role, output, transcript = options.name, options.role, options.output, options.transcript
    config = with_cli_endpoint(load_config(options.config_path), options.base_url, options.model)
    endpoint = config.endpoint_for(role)
    gates = with_overrides(with_session_shape(config.gates, name, options.ramp, options.turns), name, options.tokens,
                           options.threshold)
    names = list(GATES) if name == "all" else [name]
    if name == "all" and transcript is None:
        transcript = latest_transcript(data_dir())
    results = asyncio.run(gate_role(config, role, names, gates, transcript, options.metrics_url))
    for result in results:
        print(result.line())
        if result.levels:
            print("\n".join(level_table(result.levels)))
    if output:
        payload = [r.record().model_dump() for r in results]
        write_atomic(output, json.dumps({"endpoint": endpoint.base_url, "model": endpoint.model, "gates": payload},
                                        indent=2))
    return all(r.passed for r in results)
