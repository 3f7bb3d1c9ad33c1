"""`soak gate`: numeric gates with explicit thresholds (prefill, long prompt, prefix cache twin and replay).

Gates assume the server is otherwise idle: cache hit rates come from /metrics counter deltas around the probes.
Prompt sizes are the server's reported prompt_tokens, never estimates.
"""

import asyncio
import json
import random
import uuid
from pathlib import Path
from typing import Any

from soak.config import Gates, SoakConfig
from soak.errors import BadInput
from soak.files import write_atomic
from soak.llm.client import CallResult, ChatEndpoint
from soak.record.schema import HIT_COUNTERS, GateMeasure, GateRecord
from soak.stack.telemetry import fetch_server_metrics

WORDS = [
    "river", "stone", "amber", "lantern", "copper", "meadow", "orbit", "willow", "signal", "harbor",
    "quartz", "ember", "falcon", "cedar", "prism", "velvet", "summit", "thistle", "canyon", "marble",
]


class ProbeFailed(Exception):
    """A probe call did not succeed; the gate fails with this reason rather than passing silently."""


class GateResult(GateMeasure):
    @property
    def passed(self) -> bool:
        if self.measured is None:
            return False
        return self.measured >= self.threshold if self.higher_is_better else self.measured <= self.threshold

    def record(self) -> GateRecord:
        """The result as a gates file and sweep.json keep it."""
        return GateRecord(**self.model_dump(), passed=self.passed)

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"{verdict}  {self.name:<14} {self.measured_text():<22} ({self.threshold_text()} {self.unit})  "
                f"{self.detail}")


def filler(words: int, seed: str) -> str:
    """Plain text of `words` words; a seed at the very start makes the prefix unique (nothing cached)."""
    rng = random.Random(seed)
    return f"[{seed}] " + " ".join(rng.choice(WORDS) for _ in range(words))


class Probe:
    """One endpoint under test plus its /metrics page (None when it has none)."""

    def __init__(self, chat: ChatEndpoint, metrics_url: str | None):
        self.chat, self.metrics_url = chat, metrics_url
        self.tokens_per_word: float | None = None
        self.unstreamed: ChatEndpoint | None = None
        """Non-streaming twin, used when the server reports usage only outside streams (llama-cpp-python)."""

    async def close(self) -> None:
        if self.unstreamed:
            await self.unstreamed.close()

    async def ask(self, messages: list[dict[str, Any]], max_tokens: int = 1) -> CallResult:
        result = await (self.unstreamed or self.chat).chat(messages, role="probe", max_tokens=max_tokens)
        if not result.ok:
            raise ProbeFailed(f"probe call failed ({result.status}: {result.error})")
        return result

    async def prompt_of(self, tokens: int, seed: str) -> str:
        """Text of about `tokens` tokens, sized with the server's own count of a calibration prompt."""
        if self.tokens_per_word is None:
            calibration = [{"role": "user", "content": filler(400, "calibrate-" + seed)}]
            reported = (await self.ask(calibration)).rows[-1].prompt_tokens
            if not reported and self.chat.endpoint.stream and not self.unstreamed:
                unstreamed = self.chat.endpoint.model_copy(update={"stream": False})
                self.unstreamed = ChatEndpoint(self.chat.name, unstreamed, self.chat.stale_seconds)
                reported = (await self.ask(calibration)).rows[-1].prompt_tokens
            if not reported:
                raise ProbeFailed("the server reports no usage: prompt sizes cannot be verified")
            self.tokens_per_word = reported / 400
        return filler(max(1, int(tokens / self.tokens_per_word)), seed)

    async def hit_counters(self) -> tuple[float, float] | None:
        """(hits, queries) of the prefix cache, or None when the server exposes no such counters."""
        if not self.metrics_url:
            return None
        series = await fetch_server_metrics(self.metrics_url) or {}
        for hits, queries in HIT_COUNTERS.values():
            if all((name, "") in series for name in (hits, *queries)):
                return series[(hits, "")], sum(series[(name, "")] for name in queries)
        return None


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


UNITS = {"prefill": ("tok/s", True), "long-prompt": ("s", False)}


def unmeasurable(name: str, threshold: float, why: str) -> GateResult:
    unit, higher = UNITS.get(name, ("hit rate", True))
    return GateResult(name=name, measured=None, threshold=threshold, unit=unit, higher_is_better=higher,
                      detail=f"cannot be measured: {why}")


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


CHAT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def replayable(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded message as a server takes it: only chat keys, tool-call arguments that parse."""
    clean = {key: message[key] for key in CHAT_KEYS if key in message}
    for call in clean.get("tool_calls") or []:
        function = call.get("function", {})
        try:
            json.loads(function.get("arguments") or "")
        except ValueError:
            function["arguments"] = "{}"
    return clean


def replay_turns(transcript: Path) -> list[tuple[list[dict[str, Any]], bool]]:
    """A recorded session (JSONL of chat messages) -> the prompt of each assistant turn, each extending the last.

    Lines of soak's own transcripts carry a `thread` (orchestrator, coder-<n>, direct); each thread is replayed as
    its own conversation and its first turn only warms the cache, so turns 2+ are measured.
    """
    try:
        lines = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as error:
        raise BadInput(f"{transcript}: not a JSONL transcript ({error})") from None
    if not all(isinstance(m, dict) and "role" in m for m in lines):
        raise BadInput(f"{transcript}: every line must be a chat message with a role")
    threads: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        threads.setdefault(str(line.get("thread", "")), []).append(replayable(line))
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
    candidates = sorted(runs_root.glob("*/work/*/*/transcript.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in candidates[:200]:
        if sum('"role": "assistant"' in line or '"role":"assistant"' in line for line in path.open()) >= 2:
            return path
    return None


async def run_gate(probe: Probe, name: str, gates: Gates, transcript: Path | None) -> GateResult:
    if name == "prefill":
        threshold = gates.prefill_min_tokens_per_second
        return await gate_prefill(probe, gates.prefill_tokens, gates.prefill_prompts, threshold)
    if name == "long-prompt":
        return await gate_long_prompt(probe, gates.long_prompt_tokens, gates.long_prompt_max_seconds)
    if name == "prefix-twin":
        return await gate_prefix_twin(probe, gates.twin_tokens, gates.min_prefix_hit_rate)
    if transcript is None:
        return unmeasurable("prefix-replay", gates.min_prefix_hit_rate, "no transcript (--transcript)")
    return await gate_prefix_replay(probe, transcript, gates.min_prefix_hit_rate)


THRESHOLDS = {"prefill": "prefill_min_tokens_per_second", "long-prompt": "long_prompt_max_seconds",
              "prefix-twin": "min_prefix_hit_rate", "prefix-replay": "min_prefix_hit_rate"}


async def run_gates(probe: Probe, names: list[str], gates: Gates, transcript: Path | None) -> list[GateResult]:
    """Each gate in turn; one whose probe fails is a FAIL with the reason, and the others still run."""
    results = []
    for name in names:
        try:
            result = await run_gate(probe, name, gates, transcript)
        except ProbeFailed as failure:
            result = unmeasurable(name, getattr(gates, THRESHOLDS[name]), str(failure))
        if probe.unstreamed:
            result.detail += " (probed without streaming: the server's streams report no usage)"
        results.append(result)
    return results


async def gate_role(config: SoakConfig, role: str, names: list[str], gates: Gates, transcript: Path | None = None,
                    metrics_url: str | None = None) -> list[GateResult]:
    """Run the gates against the endpoint a role uses (its /metrics found from the stack unless given)."""
    from soak.stack.servers import metrics_url_for

    endpoint = config.endpoint_for(role)
    chat = ChatEndpoint(getattr(config.roles, role), endpoint, config.budgets.stale_seconds)
    probe = Probe(chat, metrics_url or metrics_url_for(config.stack, endpoint.base_url))
    try:
        return await run_gates(probe, names, gates, transcript)
    finally:
        await probe.close()
        await chat.close()


def run_gate_command(
    name: str, config_path: Path | None, role: str, base_url: str | None, model: str | None,
    metrics_url: str | None, tokens: int | None, threshold: float | None, transcript: Path | None,
    output: Path | None,
) -> bool:
    """Resolve the endpoint and thresholds, run the gate(s), print and optionally save; True when all pass."""
    from soak.config import load_config, with_cli_endpoint
    from soak.paths import data_dir

    config = with_cli_endpoint(load_config(config_path), base_url, model)
    endpoint = config.endpoint_for(role)
    gates = config.gates
    overrides: dict[str, Any] = {}
    if tokens is not None:
        key = {"prefill": "prefill_tokens", "long-prompt": "long_prompt_tokens", "prefix-twin": "twin_tokens"}
        overrides[key.get(name, "twin_tokens")] = tokens
    if threshold is not None:
        overrides[THRESHOLDS.get(name, "min_prefix_hit_rate")] = threshold
    gates = gates.model_copy(update=overrides)
    names = list(THRESHOLDS) if name == "all" else [name]
    if "prefix-replay" in names and transcript is None and name == "all":
        transcript = latest_transcript(data_dir())
    results = asyncio.run(gate_role(config, role, names, gates, transcript, metrics_url))
    for result in results:
        print(result.line())
    if output:
        payload = [r.record().model_dump() for r in results]
        write_atomic(output, json.dumps({"endpoint": endpoint.base_url, "model": endpoint.model, "gates": payload},
                                        indent=2))
    return all(r.passed for r in results)
