"""`transcript.jsonl`: every chat message of an attempt, one line each, as the loop said and heard it.

A line is the chat message itself (role, content, tool calls as the model wrote them, the tool call it answers,
reasoning) plus where it belongs (`thread`: "orchestrator", "coder-<n>" or "direct"; `round`; `call_index`, the call
in calls.csv) and, on an assistant line, the loop's verdict on each of its tool calls (`verdicts`, by call id;
transcripts written before verdicts were kept have none). `chat_message()` is the message as the server was sent it
(for `soak gate prefix-replay`); `answering_calls()` the one pairing of lines with their calls."""

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from soak.errors import BadInput
from soak.record.schema import CallRow, Integrity

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
    call_index: int | None = None
    """The call the line belongs to (calls.csv's call_index): on an assistant line the try that answered; on any other
    the call it was first sent in, the attempt's next one (an index no call has when none followed: never sent). None
    in transcripts written before schema version 6 and in external agents' own transcripts."""
    verdicts: dict[str, Integrity] | None = None
    """Assistant lines: the loop's verdict on each tool call, by call id, judged against the tools it offered."""

    @field_validator("content", "reasoning", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        """Structured content (a list of parts) is kept as its JSON text."""
        return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @classmethod
    def of(cls, message: dict[str, Any], thread: str, round_: int, verdicts: dict[str, Integrity] | None = None,
           call_index: int | None = None) -> "TranscriptLine":
        return cls.model_validate({**message, "thread": thread, "round": round_, "verdicts": verdicts or None,
                                   "call_index": call_index})

    @property
    def tool_names(self) -> str:
        """The names of the line's tool calls as calls.csv joins them."""
        names = []
        for call in self.tool_calls or []:
            function = call.get("function")
            names.append(str(function.get("name") or "") if isinstance(function, dict) else "")
        return ",".join(names)

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


def load_transcript(path: Path) -> list[TranscriptLine]:
    """Every line of a JSONL of chat messages (soak's transcript or any other), each one required: BadInput names what
    is wrong (`read_transcript` skips what it cannot read)."""
    try:
        texts = [text for text in path.read_text().splitlines() if text.strip()]
        return [TranscriptLine.model_validate(json.loads(text)) for text in texts]
    except (OSError, json.JSONDecodeError) as error:
        raise BadInput(f"{path}: not a JSONL transcript ({error})") from None
    except ValidationError:
        raise BadInput(f"{path}: every line must be a chat message with a role (system, user, assistant or tool)") \
            from None


def answering_calls(lines: Iterable[TranscriptLine], calls: Iterable[CallRow]) -> list[CallRow | None]:
    """The one pairing of lines with calls: for each line, the call whose answer it is (None for any but an answer, and
    for an answer no call is left for). A line that says its call_index has that call; one that does not (an older
    transcript, an external agent's own) has the first answered call after the last one paired whose tool names are
    its own, so a call the transcript does not hold (a failed try, an agent's call of its own) is passed over."""
    ordered = sorted(calls, key=lambda call: (call.call_index, call.started_at))
    by_index = {call.call_index: position for position, call in enumerate(ordered)}
    found: list[CallRow | None] = []
    start = 0
    for line in lines:
        position = None
        if line.role != "assistant":
            pass
        elif line.call_index is not None:
            position = by_index.get(line.call_index)
        else:
            names = line.tool_names
            position = next((at for at in range(start, len(ordered))
                             if ordered[at].status == "ok" and ordered[at].tool_names == names), None)
        found.append(None if position is None else ordered[position])
        start = start if position is None else position + 1
    return found
