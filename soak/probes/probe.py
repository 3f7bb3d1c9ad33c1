"""The endpoint under test, as every gate probes it: prompts sized by the server's own token count, answers that
must succeed, and the server's prefix-cache counters."""

import random
from typing import Any

from soak.llm.client import CallResult, ChatEndpoint
from soak.record.schema import HIT_COUNTERS
from soak.record.sweeps import GateMeasure, GateRecord
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
