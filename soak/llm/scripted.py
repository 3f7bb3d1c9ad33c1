"""A scripted `ChatModel`: canned replies, served in order, so the delegation loop runs for real without a server.

It stands in for the model only (as mini-swe-agent's DeterministicModel does): each reply is fed as one streamed
chunk plus a usage chunk into the client's own `Reply`, which makes the `CallRow` (integrity, reasoning verdict,
tokens) and the text the loop gets exactly as for a real call; the row goes to the context's `on_row` the same way. It
has no transport, so no retries: a reply with a failed status is one failed try.
"""

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from soak.llm.client import CallContext, CallResult
from soak.llm.reply import Reply, Sent, estimated_tokens
from soak.record.schema import CallRow, CallStatus, Role


def tokens_in(text: str) -> int:
    """The script's token count when a reply names none: the same estimate soak uses without usage."""
    return estimated_tokens(text)


@dataclass
class Say:
    """One canned reply. `calls` are (tool name, arguments: a dict, or a string kept as written, e.g. broken JSON)."""

    content: str = ""
    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    reasoning: str = ""
    finish_reason: str = ""
    """Default: "tool_calls" with calls, else "stop"; a reply longer than max_tokens ends in "length"."""
    completion_tokens: int | None = None
    """Default: counted from the text; capped at the call's max_tokens, as a server stops there."""
    prompt_tokens: int | None = None
    """Default: counted from the messages sent."""
    status: CallStatus = "ok"
    error: str = ""
    hang: bool = False
    """Never answer: the call waits until cancelled (and records a cancelled row, like the real client)."""


@dataclass
class Asked:
    """What one call asked the model, for tests to check the loop's side."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    role: Role
    max_tokens: int
    owed_tool: str | None


class ScriptExhausted(AssertionError):
    """The loop made more calls than the script has replies."""


class ScriptedModel:
    """A `ChatModel` that answers with `replies` in order; `asked` keeps every request, `hanging` is set once a
    `Say(hang=True)` reply is waiting. `usage=False` plays a server that reports no usage (llama-cpp-python's
    streams): the replies carry no usage chunk."""

    def __init__(self, replies: Iterable[Say], *, name: str = "scripted", model: str = "scripted",
                 max_tokens: int = 1024, usage: bool = True, temperature: float = 0.2) -> None:
        self.name, self._model, self._max_tokens, self.usage = name, model, max_tokens, usage
        self.temperature = temperature
        """Recorded as sent, as an endpoint's (whose default it is)."""
        self.replies = list(replies)
        self.asked: list[Asked] = []
        self.hanging = asyncio.Event()

    @property
    def model(self) -> str:
        return self._model

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

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
        context = context or CallContext()
        max_tokens = max_tokens or self._max_tokens
        if len(self.asked) >= len(self.replies):
            raise ScriptExhausted(f"call {len(self.asked) + 1} but the script has {len(self.replies)} replies")
        say = self.replies[len(self.asked)]
        self.asked.append(Asked(json.loads(json.dumps(messages)), tools, role, max_tokens, owed_tool))
        got = Reply()

        def emit(status: CallStatus, error: str) -> CallRow:
            sent = Sent(self.name, self._model, True, tools, max_tokens, {"temperature": self.temperature})
            row = got.row(context.place(role, 1), sent, status, 200 if status == "ok" else None, error)
            if context.on_row is not None:
                context.on_row(row)
            return row

        if say.hang:
            self.hanging.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                emit("cancelled", "cancelled")
                raise
        if say.status != "ok":
            failed = emit(say.status, say.error)
            return CallResult(status=say.status, error=failed.error, rows=[failed])
        calls: list[dict[str, Any]] = [{"index": i, "id": f"call_{len(self.asked)}_{i}", "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for i, (name, args) in enumerate(say.calls)]
        text = say.content + say.reasoning + "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
        completion = say.completion_tokens if say.completion_tokens is not None else max(tokens_in(text), 1)
        finish = say.finish_reason or ("tool_calls" if calls else "stop")
        if completion > max_tokens:
            completion, finish = max_tokens, "length"
        prompt = say.prompt_tokens
        if prompt is None:
            prompt = tokens_in("".join(str(m.get("content") or "") for m in messages))
        # The reply as one streamed chunk plus (unless usage=False) the usage chunk, read by the client's own Reply.
        now = time.perf_counter()
        got.received(now)
        delta = {"role": "assistant", "content": say.content, "reasoning_content": say.reasoning, "tool_calls": calls}
        got.event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}, now)
        if self.usage:
            got.event({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                "total_tokens": prompt + completion}}, now)
        row = emit("ok", say.error)
        return CallResult(content="".join(got.content), reasoning="".join(got.reasoning), tool_calls=got.tool_calls(),
                          finish_reason=row.finish_reason, integrity=row.integrity,
                          reasoning_exhausted=row.reasoning_exhausted, error=row.error, rows=[row])
