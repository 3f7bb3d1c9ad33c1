"""One OpenAI-compatible chat call: streamed, timed from the stream, retried in one place, tool calls judged."""

import asyncio
import json
import os
import re
import time
import zlib
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
import openai
from asyncio_throttle.throttler import Throttler
from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, wait_exponential

from soak.config import Endpoint, SoakConfig
from soak.llm.integrity import ToolCall, valid_text
from soak.llm.reply import CallPlace, Reply, Sent, dict_or_fail
from soak.record.identity import AttemptId
from soak.record.schema import CallRow, CallStatus, Integrity, Role

RETRYABLE: frozenset[str] = frozenset({"stalled", "truncated", "connection", "http_5xx", "bad_response"})
CONTEXT_ERROR = re.compile(r"context.?(length|window|size)|max_model_len|too many tokens|prompt is too long", re.I)
SECRET_TEXT = re.compile(r"(Bearer\s+)\S+|sk-[A-Za-z0-9_\-]{8,}")
ERROR_CHARS = 400


@dataclass(frozen=True)
class CallContext:
    """Where a call belongs in the record and where its rows go; probes may leave the defaults."""

    run_id: str = ""
    attempt: AttemptId = AttemptId("", 0)
    call_index: int = 0
    """Index of the first try; each retry takes the next one."""
    on_row: Callable[[CallRow], None] | None = None
    """Given each try's row as the try ends (the attempt's ledger)."""

    def place(self, role: Role, retry: int) -> CallPlace:
        """Where try number `retry` of the call belongs."""
        return CallPlace(self.run_id, self.attempt, role, self.call_index + retry - 1, retry)


def call_seed(seed: int, context: CallContext) -> int:
    """The same call of the same attempt (its slot) gets the same seed in every run; other calls, cycles and repeats
    differ."""
    return (seed + zlib.crc32(f"{context.attempt.name}/{context.call_index}".encode())) % 2**31


class CallResult(BaseModel):
    """The outcome of one logical call (its tries are `rows`)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str = ""
    integrity: Integrity = "none"
    reasoning_exhausted: bool = False
    status: CallStatus = "ok"
    error: str = ""
    rows: list[CallRow] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def message(self, raw: bool = False) -> dict[str, Any]:
        """The assistant message to send back, where unparseable arguments become {} so chat templates can render
        them; `raw` keeps the arguments as the model wrote them (and its reasoning), for the transcript."""
        # Content stays a string beside tool calls: llama-cpp-python answers a null content with HTTP 500.
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments if raw or call.args() is not None else "{}",
                    },
                }
                for call in self.tool_calls
            ]
        if raw and self.reasoning:
            message["reasoning"] = self.reasoning
        return message


class ChatModel(Protocol):
    """The seam the delegation loop depends on."""

    name: str

    @property
    def model(self) -> str: ...

    @property
    def max_tokens(self) -> int: ...

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        role: Role = "coder",
        max_tokens: int | None = None,
        *,
        context: CallContext | None = None,
        owed_tool: str | None = None,
    ) -> CallResult: ...


@dataclass
class _Call:
    """What every try of one logical call shares."""

    sent: Sent
    role: Role
    context: CallContext


_SENDING: ContextVar[Reply | None] = ContextVar("soak_sending", default=None)


async def _mark_sent(request: httpx2.Request) -> None:
    """httpx2 request hook: runs in the calling task, right before the request is written."""
    got = _SENDING.get()
    if got is not None:
        got.sent()


def _throttler(calls_per_second: float) -> Throttler:
    if calls_per_second >= 1:
        return Throttler(rate_limit=round(calls_per_second), period=1.0)
    return Throttler(rate_limit=1, period=1.0 / calls_per_second)


def _last_result(state: RetryCallState) -> Any:
    """The last try's result once the tries run out: a call that kept failing returns its failure, never raises."""
    assert state.outcome is not None, "tenacity gives up only after a try"
    return state.outcome.result()


class ChatEndpoint:
    """One endpoint: its client, rate limit, concurrency bound and retry policy."""

    def __init__(
        self, name: str, endpoint: Endpoint, stale_seconds: float, *, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.stale_seconds = stale_seconds
        self._key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        http_client = http_client or openai.DefaultAsyncHttpxClient()
        self.client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=self._key or "EMPTY",
            max_retries=0,
            # The read timeout backs up the stale watchdog; a stream's bytes arrive far more often.
            timeout=httpx2.Timeout(stale_seconds, connect=endpoint.connect_timeout_seconds),
            http_client=http_client,
        )
        http_client.event_hooks["request"].append(_mark_sent)
        self._limit = asyncio.Semaphore(endpoint.max_concurrent_calls)
        self._throttle = _throttler(endpoint.calls_per_second)

    @property
    def model(self) -> str:
        return self.endpoint.model

    @property
    def max_tokens(self) -> int:
        return self.endpoint.max_tokens

    async def close(self) -> None:
        await self.client.close()

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        role: Role = "coder",
        max_tokens: int | None = None,
        *,
        context: CallContext | None = None,
        owed_tool: str | None = None,
    ) -> CallResult:
        """One logical call; retryable failures are retried with backoff, every try is a row.

        `owed_tool` is the tool the caller still needs from this turn; an endpoint with tool_choice "named" names it.
        """
        context = context or CallContext()
        max_tokens = max_tokens or self.endpoint.max_tokens
        request: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": self.endpoint.temperature,
        }
        if self.endpoint.seed is not None:
            request["seed"] = call_seed(self.endpoint.seed, context)
        if tools:
            request["tools"] = tools
            if self.endpoint.tool_choice == "named":
                if owed_tool:
                    request["tool_choice"] = {"type": "function", "function": {"name": owed_tool}}
            elif self.endpoint.tool_choice:
                request["tool_choice"] = self.endpoint.tool_choice
        if self.endpoint.extra_body:
            request["extra_body"] = self.endpoint.extra_body
        sent = Sent(self.name, self.endpoint.model, self.endpoint.stream, tools, max_tokens, request)
        call = _Call(sent, role, context)
        rows: list[CallRow] = []

        async def once() -> CallResult:
            async with self._limit:
                await self._throttle.acquire()  # type: ignore[no-untyped-call]
                result = await self._try(call, len(rows) + 1)
            rows.append(result.rows[0])
            return result

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.endpoint.retries + 1),
            wait=wait_exponential(multiplier=self.endpoint.retry_backoff_seconds, max=120),
            retry=retry_if_result(lambda result: result.status in RETRYABLE),
            retry_error_callback=_last_result,
        )
        result: CallResult = await retrying(once)
        return result.model_copy(update={"rows": rows})

    async def _try(self, call: _Call, retry: int) -> CallResult:
        got = Reply()
        sending = _SENDING.set(got)
        try:
            status, http_status, error = await self._send(call.sent.request, got)
        except asyncio.CancelledError:
            self._emit(call, got, retry, "cancelled", None, "cancelled")
            raise
        finally:
            _SENDING.reset(sending)
        return self._emit(call, got, retry, status, http_status, error)

    async def _send(self, request: dict[str, Any], got: Reply) -> tuple[CallStatus, int | None, str]:
        """Run the request into `got`; return (status, http status, error text)."""
        completions = self.client.chat.completions
        try:
            async with asyncio.timeout(self.stale_seconds) as watchdog:
                if not self.endpoint.stream:
                    raw = await completions.with_raw_response.create(**request)
                    got.completion(dict_or_fail(json.loads(await raw.http_response.aread())))
                    return "ok", 200, ""
                async with completions.with_streaming_response.create(
                    **request, stream=True, stream_options={"include_usage": True}
                ) as response:
                    await self._read_stream(response.http_response, got, watchdog)
        except TimeoutError:
            return "stalled", None, f"no byte for {self.stale_seconds:g} s"
        except openai.APITimeoutError as failure:
            if isinstance(failure.__cause__, httpx2.ConnectTimeout):
                return "connection", None, "connect timeout"
            return "stalled", None, f"read timeout after {self.stale_seconds:g} s"
        except openai.APIConnectionError as failure:
            return "connection", None, f"{failure.message} {failure.__cause__!r}"
        except openai.APIStatusError as failure:
            return _status_of(failure), failure.status_code, failure.message
        except httpx2.TimeoutException:
            return "stalled", None, f"read timeout after {self.stale_seconds:g} s"
        except httpx2.TransportError as failure:
            return "truncated", 200, f"stream cut: {failure!r}"
        except ValueError as failure:
            return "bad_response", 200, f"unreadable reply: {failure}"
        if got.finish is None:
            return "truncated", 200, "stream ended without finish_reason"
        return "ok", 200, ""

    async def _read_stream(self, response: httpx2.Response, got: Reply, watchdog: asyncio.Timeout) -> None:
        """Parse the SSE lines here: the SDK's per-chunk models cost ~30x the CPU and would skew the timings."""
        loop = asyncio.get_running_loop()
        # Re-arming the watchdog on every line costs more than parsing it; re-arm at most every 5 % of the window
        # and add that 5 % to it, so a stream is aborted after stale_seconds to 1.05 x stale_seconds of silence.
        slack = self.stale_seconds / 20
        rearm = 0.0
        async for line in response.aiter_lines():
            now = time.perf_counter()
            if (clock := loop.time()) >= rearm:
                watchdog.reschedule(clock + self.stale_seconds + slack)
                rearm = clock + slack
            got.received(now)
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            # Reading on past [DONE] to the end of the body keeps the connection reusable.
            if payload != "[DONE]":
                got.event(dict_or_fail(json.loads(payload)), now)

    def _emit(
        self, call: _Call, got: Reply, retry: int, status: CallStatus, http_status: int | None, error: str
    ) -> CallResult:
        """Turn one try into its row (handed to `on_row` at once) and its result."""
        context = call.context
        row = got.row(context.place(call.role, retry), call.sent, status, http_status, scrub(error, self._key))
        if context.on_row is not None:
            context.on_row(row)
        return CallResult(
            content="".join(got.content), reasoning="".join(got.reasoning), tool_calls=got.tool_calls(),
            finish_reason=row.finish_reason, integrity=row.integrity, reasoning_exhausted=row.reasoning_exhausted,
            status=status, error=row.error, rows=[row],
        )

def chat_endpoints(config: SoakConfig, roles: tuple[str, ...] = ("orchestrator", "coder")) -> dict[str, ChatEndpoint]:
    """Role -> endpoint; roles naming the same endpoint share one client, rate limit and semaphore."""
    shared: dict[str, ChatEndpoint] = {}
    chosen = {}
    for role in roles:
        endpoint = config.endpoint_for(role)
        name = getattr(config.roles, role)
        if name not in shared:
            shared[name] = ChatEndpoint(name, endpoint, config.budgets.stale_seconds)
        chosen[role] = shared[name]
    return chosen


def scrub(text: str, key: str | None) -> str:
    """Error text fit for a CSV: no key, no bearer token, bounded length, valid Unicode."""
    text = valid_text(text)
    if key:
        text = text.replace(key, "***")
    return SECRET_TEXT.sub(lambda m: (m.group(1) or "sk-") + "***", text)[:ERROR_CHARS]


def _status_of(failure: openai.APIStatusError) -> CallStatus:
    return status_of_http(failure.status_code, f"{failure.message} {failure.body}")


def status_of_http(code: int, text: str) -> CallStatus:
    """The call status of an HTTP error reply (`text`: its message and body)."""
    if code >= 500:
        return "http_5xx"
    if code in (401, 403):
        return "auth"
    if code == 404:
        return "not_found"
    if code in (400, 413) and CONTEXT_ERROR.search(text):
        return "context_window"
    return "bad_request"
