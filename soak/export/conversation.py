"""What was said in an attempt, as transcript lines in order: soak's own transcript, or, for an external agent, the
agent's own transcript of each round (Hermes' session, mini-swe-agent's trajectory, aider's LLM log). The recording
proxy keeps an agent's calls but not its messages, so these files are where its conversation is."""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from soak.record.layout import AttemptLayout
from soak.record.transcript import TranscriptLine, read_transcript

M = TypeVar("M", bound=BaseModel)
AIDER_LOG_BYTES = 16 << 20
"""How much of aider's LLM log the export reads: the agent writes it, so its size is the agent's to choose (up to its
disk cap), and the log repeats the whole conversation with every request."""


@dataclass(frozen=True)
class Message:
    line: TranscriptLine
    context: bool = False
    """Written into the prompt by the agent itself, never said by the model (aider's worked examples)."""


@dataclass
class AgentRound:
    """One run of an external agent: what its own transcript holds of it."""

    number: int
    messages: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    """The tool schemas the agent declared, where its transcript keeps them (Hermes)."""
    source: str = ""
    """The file read, relative to the attempt folder; empty when the agent left none soak reads."""
    cut_at: int | None = None
    """How many bytes of `source` were read, where it was longer than the export reads."""

    @property
    def read_from(self) -> str:
        """`source` as the export names it, with where it was cut."""
        return f"{self.source} (its first {self.cut_at} bytes)" if self.cut_at else self.source


def soak_messages(attempt: AttemptLayout) -> list[Message]:
    return [Message(line) for line in read_transcript(attempt.transcript)]


class HermesSession(BaseModel):
    """`~/.hermes/sessions/session_*.json`, as far as the export reads it."""

    model_config = ConfigDict(extra="ignore")

    system_prompt: str = ""
    tools: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] = []


class MiniTrajectory(BaseModel):
    """mini-swe-agent's `--output` trajectory: its chat messages, then one of role `exit` (not a message)."""

    model_config = ConfigDict(extra="ignore")

    messages: list[dict[str, Any]] = []


def chat_lines(messages: list[dict[str, Any]], thread: str, number: int) -> list[Message]:
    """OpenAI-shaped chat messages as lines; anything else in the list (mini-swe-agent's `exit`) is left out."""
    found = []
    for message in messages:
        try:
            found.append(Message(TranscriptLine.of(message, thread, number)))
        except ValidationError:
            continue
    return found


AIDER_HEADER = re.compile(r"^(TO LLM|LLM RESPONSE) \S+$")
AIDER_LINE = re.compile(r"^(SYSTEM|USER|ASSISTANT)(?: (.*))?$")
"""A line of a message: aider writes an empty one as the role and a space, which an editor may strip."""
AIDER_SEPARATOR = "-------"


@dataclass
class AiderExchange:
    """One request of aider's and the reply to it; a message is [role, its lines]."""

    request: list[list[Any]] = field(default_factory=list)
    reply: list[str] | None = None


def aider_exchanges(text: str) -> list[AiderExchange]:
    """aider's `--llm-history-file`: a header line per request and per reply, `-------` before each message of a
    request, and every line of a message prefixed with its role, so no line of a message can pass for structure."""
    exchanges: list[AiderExchange] = []
    for raw in text.splitlines():
        if header := AIDER_HEADER.match(raw):
            if header[1] == "TO LLM":
                exchanges.append(AiderExchange())
            elif exchanges:
                exchanges[-1].reply = []
            continue
        line = AIDER_LINE.match(raw)
        if not exchanges:
            continue
        exchange = exchanges[-1]
        if exchange.reply is not None:
            exchange.reply += [line[2] or ""] if line else []
        elif raw == AIDER_SEPARATOR:
            exchange.request.append(["", []])
        elif line and exchange.request:
            message = exchange.request[-1]
            message[0] = message[0] or line[1].lower()
            message[1].append(line[2] or "")
    return exchanges


def aider_lines(text: str, thread: str, number: int) -> list[Message]:
    """Every reply, and what each request added after the last reply in it: for the first request, its system
    prompt, aider's worked examples (copied context) and the task."""
    found = []
    for index, exchange in enumerate(aider_exchanges(text)):
        replies = [i for i, (role, _) in enumerate(exchange.request) if role == "assistant"]
        last_reply = replies[-1] if replies else -1
        for position, (role, lines) in enumerate(exchange.request):
            if index and position <= last_reply:
                continue
            line = TranscriptLine.of({"role": role, "content": "\n".join(lines)}, thread, number)
            found.append(Message(line, context=role != "system" and position <= last_reply))
        if exchange.reply is not None:
            reply = {"role": "assistant", "content": "\n".join(exchange.reply)}
            found.append(Message(TranscriptLine.of(reply, thread, number)))
    return found


def agent_round(attempt: AttemptLayout, number: int, thread: str) -> AgentRound:
    """Round `number` of an external agent, from whichever transcript of a known agent its folder holds."""
    folder = attempt.agent_files(number)
    found = AgentRound(number)
    sessions = sorted(folder.glob(".hermes/sessions/session_*.json"))
    for path in sessions:
        session = read_model(path, HermesSession)
        if session.system_prompt:
            found.messages.append(Message(TranscriptLine(role="system", content=session.system_prompt,
                                                         thread=thread, round=number)))
        found.messages += chat_lines(session.messages, thread, number)
        found.tools = found.tools or session.tools
    if sessions:
        found.source = relative(sessions[0], attempt.path)
    elif (path := folder / "trajectory.json").is_file():
        found.messages = chat_lines(read_model(path, MiniTrajectory).messages, thread, number)
        found.source = relative(path, attempt.path)
    elif (path := folder / "llm.log").is_file():
        with path.open("rb") as log:
            head = log.read(AIDER_LOG_BYTES + 1)
        found.messages = aider_lines(head[:AIDER_LOG_BYTES].decode(errors="replace"), thread, number)
        found.source = relative(path, attempt.path)
        found.cut_at = AIDER_LOG_BYTES if len(head) > AIDER_LOG_BYTES else None
    return found


def read_model(path: Path, model: type[M]) -> M:
    """An agent's JSON file as `model`; one it left unreadable (killed mid-write) or of another shape reads empty."""
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return model()


def relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()
