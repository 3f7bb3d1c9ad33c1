"""`transcript.jsonl`: every chat message of an attempt, one line each, as the loop said and heard it.

A line is the chat message itself (role, content, tool calls as the model wrote them, the tool call it answers,
reasoning) plus where it belongs (`thread`: "orchestrator", "coder-<n>" or "direct"; `round`) and, on an assistant
line, the loop's verdict on each of its tool calls (`verdicts`, by call id; transcripts written before verdicts were
kept have none). `chat_message()` is the message as the server was sent it (for `soak gate prefix-replay`)."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from soak.record.schema import Integrity

CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
"""What a server is sent back of a message: reasoning is kept for the reader, never sent again."""


class TranscriptLine(BaseModel):
    """One message of an attempt's conversation and where it belongs."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    """OpenAI-shaped (`id`, `type`, `function.name`, `function.arguments`), arguments as the model wrote them."""
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    thread: str = ""
    round: int = 0
    verdicts: dict[str, Integrity] | None = None
    """Assistant lines: the loop's verdict on each tool call, by call id, judged against the tools it offered."""

    @field_validator("content", "reasoning", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        """Structured content (a list of parts) is kept as its JSON text."""
        return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @classmethod
    def of(cls, message: dict[str, Any], thread: str, round_: int,
           verdicts: dict[str, Integrity] | None = None) -> "TranscriptLine":
        return cls.model_validate({**message, "thread": thread, "round": round_, "verdicts": verdicts or None})

    def chat_message(self) -> dict[str, Any]:
        """The message as the loop sent it back: chat keys only, tool-call arguments that are no JSON object
        replaced by {} (chat templates cannot render them)."""
        message = self.model_dump(include=set(CHAT_KEYS), exclude_none=True)
        for call in message.get("tool_calls") or []:
            function = call.get("function")
            if isinstance(function, dict) and not _is_object(function.get("arguments")):
                function["arguments"] = "{}"
        return message

    def verdict(self, call_id: str) -> Integrity | None:
        """The loop's verdict on one of this line's tool calls; None when the transcript kept none."""
        return (self.verdicts or {}).get(call_id)


def _is_object(arguments: Any) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except (TypeError, ValueError):
        return False


def append_line(handle: TextIO, line: TranscriptLine) -> None:
    """One line, flushed at once: a crash loses nothing said before it."""
    handle.write(line.model_dump_json(exclude_none=True) + "\n")
    handle.flush()


def read_transcript(path: Path) -> Iterator[TranscriptLine]:
    """The lines of a transcript in order; a torn or foreign line (a crash mid-write) is skipped."""
    try:
        handle = path.open(errors="replace")
    except OSError:
        return
    with handle:
        for text in handle:
            try:
                yield TranscriptLine.model_validate_json(text)
            except ValidationError:
                continue
