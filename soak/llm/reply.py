"""One try's reply, assembled from SSE events or a whole completion, with the stream's own timestamps."""

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from soak.llm.integrity import ToolCall, judge_tool_calls, valid_text
from soak.record.identity import AttemptId
from soak.record.schema import CallRow, CallStatus, Role

TOOL_TEXT = re.compile(r"<tool_call>|<function=")
CHARS_PER_TOKEN = 4
"""The estimate of completion tokens from text when a server reports no usage, so the token cap still holds."""


def estimated_tokens(*texts: str) -> int:
    """About four characters a token, rounded up: the one estimate of tokens from text (soak's calls, the proxy's,
    the scripted model's)."""
    return math.ceil(sum(len(text) for text in texts) / CHARS_PER_TOKEN)


def counted_tokens(row: CallRow) -> tuple[int, int]:
    """(completion tokens a token cap counts for this call, how many of them are estimated): the server's count,
    or without one the estimate from the reply's text, so a server without usage does not make calls free."""
    if row.completion_tokens is not None:
        return row.completion_tokens, 0
    estimated = row.estimated_completion_tokens or 0
    return estimated, estimated


def reasoning_exhausted(
    finish_reason: str, content: str, reasoning: str, has_tool_calls: bool, completion_tokens: int | None,
    max_tokens: int | None,
) -> bool:
    """Thinking used the whole budget and left no answer (serving-metrics.md section 5.2)."""
    if has_tool_calls:
        return False
    text = content.strip()
    open_think = "<think>" in text and "</think>" not in text
    if finish_reason == "length" and ((not text and reasoning.strip()) or open_think):
        return True
    return not text and completion_tokens is not None and max_tokens is not None and completion_tokens >= max_tokens


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sampling(request: dict[str, Any]) -> dict[str, Any]:
    """The temperature, top_p and seed a request was sent with (its own fields, or the openai SDK's `extra_body`), for
    its calls.csv row; None for one it left to the server or sent as something other than a number."""
    body = {**_dict(request.get("extra_body")), **request}

    def real(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    seed = body.get("seed")
    return {"temperature": real(body.get("temperature")), "top_p": real(body.get("top_p")),
            "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None}


def dict_or_fail(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    """A string of the reply, valid Unicode; anything else is no text. Every string taken from a reply passes here."""
    return valid_text(value) if isinstance(value, str) else ""


MAX_TOKENS_PER_CHUNK = 16
"""A stream whose tokens came in fewer chunks than tokens / this (a tool call whose name swallowed its arguments
and arrived whole, a server or proxy that buffers) gives no decode rate from the client's clock: the time between
its few chunks is not decoding. Streams send 1 token a chunk (vLLM, llama.cpp), up to k+1 with speculative
decoding."""


class UsageNumbers(TypedDict):
    """A reply's token counts as the server reported them, None where it did not."""

    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None


@dataclass(frozen=True)
class CallPlace:
    """Where one try's row belongs: its run, its attempt, who made the call and where the try stands among the
    attempt's calls."""

    run_id: str
    attempt: AttemptId
    role: Role
    call_index: int
    """Position of the try within its attempt, counting retries."""
    retry: int = 1


@dataclass(frozen=True)
class Sent:
    """What one try asked of which endpoint: its row's request columns, and the tools its tool calls are judged
    against."""

    endpoint: str
    model: str
    stream: bool
    tools: list[dict[str, Any]] | None
    max_tokens: int | None
    request: dict[str, Any] = field(default_factory=dict)
    """The request as sent, for its sampling settings."""


class Reply:
    """Accumulates one try's reply from SSE events or a whole completion (plain JSON), with timestamps."""

    def __init__(self) -> None:
        self.started_at = time.time()
        self.start = time.perf_counter()
        self.first_byte: float | None = None
        self.last_byte: float | None = None
        self.max_gap = 0.0
        """Longest silence between two pieces of a stream so far."""
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.token_chunks = 0
        """Stream chunks that carried generated text or tool-call parts."""
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.slots: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.server_tps: float | None = None

    def sent(self) -> None:
        """The request goes out now: the clock starts here, so client-side queueing is not counted as TTFT."""
        self.started_at, self.start = time.time(), time.perf_counter()

    def received(self, now: float) -> None:
        """A piece of a stream arrived at `now`: its first byte, or the end of a silence since the last piece."""
        if self.last_byte is None:
            self.first_byte = now
        else:
            self.max_gap = max(self.max_gap, now - self.last_byte)
        self.last_byte = now

    def event(self, data: dict[str, Any], now: float) -> None:
        """One chunk of a stream, taken at `now` (when its line arrived)."""
        if "error" in data:
            error = data["error"]
            raise ValueError(f"error event in stream: {_dict(error).get('message') or error}")
        if data.get("usage"):
            self.usage = _dict(data["usage"])
        choices = data.get("choices")
        if not choices:
            return
        choice = _dict(choices[0])
        delta = _dict(choice.get("delta"))
        token = False
        if text := _text(delta.get("content")):
            self.content.append(text)
            token = True
        if text := _text(delta.get("reasoning") or delta.get("reasoning_content")):
            self.reasoning.append(text)
            token = True
        for call in delta.get("tool_calls") or ():
            token = True
            call, function = _dict(call), _dict(_dict(call).get("function"))
            index = call.get("index")
            if not isinstance(index, int):  # Some servers omit it: a name opens a call, a bare fragment continues one.
                index = len(self.slots) if function.get("name") else max(len(self.slots) - 1, 0)
            slot = self.slots.setdefault(index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = _text(call.get("id")) or slot["id"]
            slot["name"] = slot["name"] or _text(function.get("name"))
            slot["arguments"] += _text(function.get("arguments"))
        if token:
            if self.first_token is None:
                self.first_token = now
            self.last_token = now
            self.token_chunks += 1
        if choice.get("finish_reason"):
            self.finish = str(choice["finish_reason"])

    def completion(self, data: dict[str, Any]) -> None:
        """A whole (non-streamed) reply."""
        self.first_byte = time.perf_counter()
        self.usage = _dict(data.get("usage")) or None
        timings = _dict(data.get("timings"))
        if isinstance(timings.get("predicted_per_second"), int | float):
            self.server_tps = float(timings["predicted_per_second"])
        choices = data.get("choices")
        if not choices:
            raise ValueError("reply without choices")
        choice = _dict(choices[0])
        message = _dict(choice.get("message"))
        self.finish = _text(choice.get("finish_reason")) or None
        self.content.append(_text(message.get("content")))
        self.reasoning.append(_text(message.get("reasoning") or message.get("reasoning_content")))
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = _dict(_dict(call).get("function"))
            self.slots[index] = {
                "id": _text(_dict(call).get("id")),
                "name": _text(function.get("name")),
                "arguments": _text(function.get("arguments")),
            }

    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], arguments=slot["arguments"])
            for index, slot in sorted(self.slots.items())
        ]

    def usage_numbers(self) -> UsageNumbers:
        usage = self.usage or {}

        def number(value: Any) -> int | None:
            return value if isinstance(value, int) else None

        return UsageNumbers(
            prompt_tokens=number(usage.get("prompt_tokens")),
            completion_tokens=number(usage.get("completion_tokens")),
            reasoning_tokens=number(_dict(usage.get("completion_tokens_details")).get("reasoning_tokens")),
            cached_tokens=number(_dict(usage.get("prompt_tokens_details")).get("cached_tokens")),
        )

    def row(self, place: CallPlace, sent: Sent, status: CallStatus, http_status: int | None, error: str) -> CallRow:
        """This try's calls.csv row, timed from the stream's own timestamps, its tool calls judged against the tools
        sent, its sampling settings read off the request: the one place a call becomes a row, for soak's own calls
        and the proxy's alike."""
        end, stream, max_tokens = time.perf_counter(), sent.stream, sent.max_tokens
        content, reasoning, calls = "".join(self.content), "".join(self.reasoning), self.tool_calls()
        finish = self.finish or ""
        usage = self.usage_numbers()
        estimated = None
        if usage["completion_tokens"] is None and (status == "ok" or content or reasoning or calls):
            estimated = estimated_tokens(content, reasoning, *(call.arguments for call in calls))
        integrity = judge_tool_calls(calls, sent.tools, finish) if status == "ok" else "none"
        exhausted = status == "ok" and reasoning_exhausted(
            finish, content, reasoning, bool(calls), usage["completion_tokens"], max_tokens
        )
        if status == "ok" and finish == "stop" and not calls and TOOL_TEXT.search(content):
            error = "tool call left as text in content"

        def since(moment: float | None) -> float | None:
            return None if moment is None else moment - self.start

        max_gap = None
        if stream and self.last_byte is not None:
            # A stream cut for silence was silent from its last piece to the cut.
            max_gap = max(self.max_gap, end - self.last_byte) if status == "stalled" else self.max_gap

        decode_tps = self.server_tps
        tokens, first, last = usage["completion_tokens"], self.first_token, self.last_token
        if (tokens and self.token_chunks >= max(3, tokens / MAX_TOKENS_PER_CHUNK)
                and first is not None and last is not None and last > first):
            decode_tps = (tokens - 1) / (last - first)
        return CallRow(
            run_id=place.run_id, **place.attempt.row_fields(), call_index=place.call_index, retry=place.retry,
            role=place.role, endpoint=sent.endpoint, model=sent.model, stream=stream, started_at=self.started_at,
            first_byte_s=since(self.first_byte), ttft_s=since(self.first_token), last_token_s=since(self.last_token),
            max_gap_s=max_gap, duration_s=end - self.start, decode_tps=decode_tps, max_tokens=max_tokens,
            finish_reason=finish,
            tool_calls=len(calls), tool_names=",".join(tool.name for tool in calls), integrity=integrity,
            reasoning_exhausted=exhausted, status=status, http_status=http_status, error=error,
            estimated_completion_tokens=estimated, **usage, **sampling(sent.request),
        )
