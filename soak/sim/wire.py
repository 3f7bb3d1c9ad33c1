"""The wire side of `soak sim`: one planned reply sent as vLLM-style SSE chunks or one JSON body, timed and faulted."""

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from soak.sim.metrics import RequestLog, RequestRecord
from soak.sim.reply import SimReply
from soak.sim.scenario import Fault, FaultKind

SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
JSON_HEADERS = [(b"content-type", b"application/json")]
FLUSH_EVENTS = 256

Event = tuple[str, int, int, str | None]
"""An SSE event: its text, tokens in it, reasoning tokens in it, finish reason it carries."""


class Abort(Exception):
    """Raised once the response has started: uvicorn then closes the connection mid-response."""


@dataclass
class Exchange:
    """One chat request in flight: what was asked, the planned reply, and how it goes out."""

    n: int
    received: float
    """Unix time of arrival."""
    start: float
    """Monotonic time of arrival."""
    body: dict[str, Any]
    reply: SimReply
    faults: list[Fault]
    """Faults fired for this request; the wire applies stall, drop, truncate and no_usage."""
    prompt_tokens: int
    cached_tokens: int
    ttft: float
    rate: float
    """Decode tokens per second; 0 sends everything at once."""
    rng: random.Random
    engine: str = "vllm"
    prompt_tokens_details: bool = True
    model: str = "soak-sim"
    id: str = ""
    begin: float = 0.0
    """Monotonic time decoding could start (arrival, or later when it had to wait for a slot)."""
    prefill: float = 0.0
    """The part of `ttft` spent on prompt tokens not served from the prefix cache."""

    def stretch(self, factor: float) -> None:
        """Slow this request down by `factor` (a busier batch): TTFT times it, decode rate over it."""
        self.ttft *= factor
        self.rate /= factor


class ClientWatch:
    """Notices the client hanging up while the reply is being timed (ASGI `http.disconnect`)."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.task = asyncio.ensure_future(receive())

    def gone(self) -> bool:
        task = self.task
        if not task.done():
            return False
        if task.cancelled() or task.exception() is not None or task.result().get("type") == "http.disconnect":
            return True
        self.task = asyncio.ensure_future(self.receive())
        return False

    async def pause(self, seconds: float) -> bool:
        """Wait; True if the client went away meanwhile."""
        deadline = time.monotonic() + seconds
        while not self.gone():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.wait([self.task], timeout=left)
        return True

    def close(self) -> None:
        self.task.cancel()


def pieces(tokens: list[str], size: int) -> list[list[str]]:
    return [tokens[i : i + size] for i in range(0, len(tokens), size)]


class ChatResponse:
    """ASGI response for one exchange; records what actually went out when it ends, however it ends."""

    def __init__(
        self,
        ex: Exchange,
        recorder: RequestLog,
        crashed: Callable[[], bool],
        slot: contextlib.AbstractAsyncContextManager[None],
        tokens_per_chunk: int,
    ) -> None:
        self.ex, self.recorder, self.crashed, self.slot, self.per_chunk = ex, recorder, crashed, slot, tokens_per_chunk
        self.applied: list[str] = list(ex.reply.faults)
        self.sent_tokens = self.sent_reasoning = 0
        self.finish: str | None = None
        self.first_byte: float | None = None
        self.last_byte: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.fault = {f.kind: f for f in reversed(ex.faults)}
        self.recorded = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = ClientWatch(receive)
        try:
            async with self.slot:
                self.ex.begin = max(self.ex.start, time.monotonic())
                if self.ex.body.get("stream"):
                    await self.stream(send, watch)
                else:
                    await self.whole(send, watch)
        finally:
            watch.close()
            self.record()

    def use(self, kind: FaultKind) -> Fault | None:
        fault = self.fault.get(kind)
        if fault:
            self.applied.append(kind)
        return fault

    async def push(self, send: Send, events: list[Event], more: bool) -> None:
        """Send events; the last push records the request first, so the client never outruns the ground truth."""
        if self.crashed():
            raise Abort("the simulated process crashed")
        self.last_byte = time.time()
        self.first_byte = self.first_byte or self.last_byte
        for _, tokens, reasoning, finish in events:
            if tokens:
                self.last_token = time.monotonic()
                self.first_token = self.first_token or self.last_token
            self.sent_tokens += tokens
            self.sent_reasoning += reasoning
            self.finish = finish or self.finish
        if not more:
            self.record()
        await send({"type": "http.response.body", "body": "".join(e[0] for e in events).encode(), "more_body": more})

    async def stream(self, send: Send, watch: ClientWatch) -> None:
        ex = self.ex
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        events = self.events()
        token_events = sum(1 for e in events if e[1])
        stall, cut = self.use("stall"), self.use("drop") or self.use("truncate")
        include_usage = (ex.body.get("stream_options") or {}).get("include_usage")
        if include_usage and self.use("no_usage"):
            events = [e for e in events if '"choices":[]' not in e[0]]
        middle = ex.rng.randint(max(1, token_events // 3), max(1, 2 * token_events // 3))
        stall_at = (0 if stall.where == "first_byte" else middle) if stall else len(events)
        cut_at = middle if cut else len(events)
        first_at = ex.begin + ex.ttft
        produced, interval = 0, 1 / ex.rate if ex.rate else 0.0
        buffer: list[Event] = []
        for index, event in enumerate(events[:cut_at]):
            if index == stall_at and stall:
                if buffer:
                    await self.push(send, buffer, True)
                    buffer = []
                # The stall is silence on the wire, and the rest of the schedule slides by as much.
                before = time.monotonic()
                if await watch.pause(stall.seconds):
                    return
                first_at += time.monotonic() - before
            produced += event[1]
            wait = first_at + max(produced - 1, 0) * interval - time.monotonic()
            if wait > 0.001 or len(buffer) >= FLUSH_EVENTS:
                if buffer:
                    await self.push(send, buffer, True)
                    buffer = []
                if await watch.pause(wait):
                    return
            buffer.append(event)
        if cut and cut.kind == "drop":
            await self.push(send, buffer, True)
            raise Abort("drop fault")
        await self.push(send, buffer, False)

    def events(self) -> list[Event]:
        """SSE events as vLLM streams them: role, reasoning, content, tool call (id and name once, then arguments),
        finish, optional usage chunk, [DONE]. Each carries (text, tokens, reasoning tokens, finish reason)."""
        ex, reply, dumps = self.ex, self.ex.reply, json.dumps
        head = (
            f'data: {{"id":"{ex.id}","object":"chat.completion.chunk","created":{int(ex.received)},'
            f'"model":{dumps(ex.model)},"choices":[{{"index":0,"delta":'
        )
        tail = ',"logprobs":null,"finish_reason":null}]}\n\n'
        key = "reasoning" if ex.engine == "vllm" else "reasoning_content"
        events: list[Event] = [(head + '{"role":"assistant","content":""}' + tail, 0, 0, None)]
        for part in pieces(reply.reasoning, self.per_chunk):
            events.append((f'{head}{{"{key}":{dumps("".join(part))}}}{tail}', len(part), len(part), None))
        for part in pieces(reply.content, self.per_chunk):
            events.append((f'{head}{{"content":{dumps("".join(part))}}}{tail}', len(part), 0, None))
        if reply.tool:
            call = {"index": 0, "id": reply.tool.id, "type": "function",
                    "function": {"name": reply.tool.name, "arguments": ""}}
            events.append((head + dumps({"tool_calls": [call]}) + tail, reply.tool_name_tokens, 0, None))
            for part in pieces(reply.arguments, self.per_chunk):
                delta = f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{dumps("".join(part))}}}}}]}}'
                events.append((head + delta + tail, len(part), 0, None))
        finish = f',"logprobs":null,"finish_reason":"{reply.finish}","stop_reason":null}}]}}\n\n'
        events.append((head + "{}" + finish, 0, 0, reply.finish))
        if (ex.body.get("stream_options") or {}).get("include_usage") and ex.engine != "llama-cpp-python":
            chunk = {"id": ex.id, "object": "chat.completion.chunk", "created": int(ex.received), "model": ex.model,
                     "choices": [], "usage": self.usage()} | self.timings()
            events.append((f"data: {dumps(chunk, separators=(',', ':'))}\n\n", 0, 0, None))
        events.append(("data: [DONE]\n\n", 0, 0, None))
        return events

    async def whole(self, send: Send, watch: ClientWatch) -> None:
        ex, reply = self.ex, self.ex.reply
        stall, drop = self.use("stall"), self.use("drop")
        decode = (reply.completion_tokens - 1) / ex.rate if ex.rate and reply.completion_tokens else 0
        wait = ex.begin + ex.ttft + decode + (stall.seconds if stall else 0) - time.monotonic()
        if await watch.pause(wait):
            return
        body = json.dumps(self.message()).encode()
        if self.crashed():
            raise Abort("the simulated process crashed")
        headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
        self.first_byte = self.last_byte = time.time()
        self.last_token = time.monotonic()
        self.first_token = self.last_token - decode
        self.sent_tokens, self.sent_reasoning = reply.completion_tokens, len(reply.reasoning)
        if not drop:
            self.finish = reply.finish
            self.record()
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if drop:
            await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
            raise Abort("drop fault")
        await send({"type": "http.response.body", "body": body})

    def message(self) -> dict[str, Any]:
        ex, reply = self.ex, self.ex.reply
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.content) or None}
        reasoning = "".join(reply.reasoning) or None
        if ex.engine == "vllm":
            message["reasoning"] = reasoning
        elif reasoning:
            message["reasoning_content"] = reasoning
        message["tool_calls"] = []
        if reply.tool:
            function = {"name": reply.tool.name, "arguments": "".join(reply.arguments)}
            message["tool_calls"] = [{"id": reply.tool.id, "type": "function", "function": function}]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish, "stop_reason": None}
        return {"id": ex.id, "object": "chat.completion", "created": int(ex.received), "model": ex.model,
                "choices": [choice], "usage": self.usage()} | self.timings()

    def usage(self) -> dict[str, Any]:
        ex, reply = self.ex, self.ex.reply
        completion = reply.completion_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": ex.prompt_tokens,
            "total_tokens": ex.prompt_tokens + completion,
            "completion_tokens": completion,
        }
        if ex.engine == "llama-cpp-python":  # no details at all
            return usage
        return usage | {
            "prompt_tokens_details": {"cached_tokens": ex.cached_tokens} if ex.prompt_tokens_details else None,
            "completion_tokens_details": {"reasoning_tokens": len(reply.reasoning)},
        }

    def timings(self) -> dict[str, Any]:
        """llama.cpp's `timings` object (planned times), next to usage."""
        ex = self.ex
        if ex.engine != "llama-server":
            return {}
        predicted = ex.reply.completion_tokens
        timings = {
            "cache_n": ex.cached_tokens,
            "prompt_n": ex.prompt_tokens - ex.cached_tokens,
            "prompt_ms": ex.ttft * 1000,
            "predicted_n": predicted,
            "predicted_ms": predicted / ex.rate * 1000 if ex.rate else 0.0,
        }
        return {"timings": timings}

    def record(self) -> None:
        if self.recorded:
            return
        self.recorded = True
        ex, reply = self.ex, self.ex.reply
        record = RequestRecord(
            n=ex.n, role=reply.role, kind=reply.kind, task_id=reply.task_id, correct=reply.correct, cheat=reply.cheat,
            claim=reply.claim, tests_claim=reply.tests_claim,
            stream=bool(ex.body.get("stream")), finish_reason=self.finish, faults=self.applied,
            prompt_tokens=ex.prompt_tokens, cached_tokens=ex.cached_tokens, completion_tokens=self.sent_tokens,
            reasoning_tokens=self.sent_reasoning, received=ex.received, first_byte=self.first_byte,
            last_byte=self.last_byte,
        )
        ttft = self.first_token - ex.start if self.first_token is not None else None
        decode = self.last_token - self.first_token if self.first_token and self.last_token else 0.0
        self.recorder.finish(record, ttft, decode, ex.rng)
