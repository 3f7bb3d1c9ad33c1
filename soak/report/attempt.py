"""One attempt as its record and work folder hold it (`work/<task>/<cycle>/`): the conversation as threads with each
tool call's verdict, each round's verdict (rounds.csv) beside its solution and test output, an external agent's own
files; cut to fit one page."""

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.llm.integrity import ToolCall, tool_calls_of
from soak.record.read import AttemptRecord
from soak.record.rounds import kept_solution
from soak.record.schema import CallRow, RoundRow
from soak.record.transcript import TranscriptLine

MESSAGE_CHARS = 20_000
"""Longest message body shown; the rest is in the raw file."""
TRANSCRIPT_CHARS = 1_500_000
"""Transcript text shown on one page (a page stays far below 5 MB even escaped); later messages are left out."""
FILE_CHARS = 200_000
"""Longest solution, test output, diff or agent file shown."""
AGENT_FILES = 8
FED_BACK = re.compile(r"^The tests failed \((\d+)/(\d+) passed")
NEAR_IDENTICAL = 0.95


def cut(text: str, limit: int = MESSAGE_CHARS) -> tuple[str, int]:
    """(text up to `limit` characters, characters left out)."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


@dataclass
class Round:
    """One round as the page shows it: its verdict (None when it was never judged: an agent's round that left no file)
    beside what its folder keeps."""

    number: int
    verdict: RoundRow | None = None
    solution_name: str = ""
    solution: str = ""
    solution_cut: int = 0
    output_name: str = ""
    """The test output's path in the attempt folder."""
    output: str = ""
    output_cut: int = 0
    diff: list[tuple[str, str]] = field(default_factory=list)
    """(css class, line) of the unified diff to the previous round's solution."""
    fed_back: str = ""
    """The message that started the next round: the exact error the model was shown."""
    agent_files: list[tuple[str, str, int]] = field(default_factory=list)
    """(name, text, characters left out) of an external agent's output and logs, its output first."""
    agent_said: bool = False
    """The agent's output is among them (the first)."""

    @property
    def counts(self) -> tuple[int, int] | None:
        """(tests passed, tests in all); None when never judged, or derived where pytest printed no summary."""
        verdict = self.verdict
        if verdict is None or (verdict.derived and not verdict.tests_total):
            return None
        return verdict.tests_passed, verdict.tests_total

    @property
    def failing(self) -> list[str]:
        return self.verdict.failing if self.verdict else []

    @property
    def passed(self) -> bool:
        return self.verdict is not None and self.verdict.passed


def read_text(path: Path, limit: int = FILE_CHARS) -> tuple[str, int]:
    try:
        with path.open("rb") as handle:
            data = handle.read(limit * 4 + 4)
        size = path.stat().st_size
    except OSError:
        return "", 0
    text = data.decode("utf-8", errors="replace")
    shown, left = cut(text, limit)
    return shown, left + max(size - len(data), 0)


def diff_lines(before: str, after: str) -> list[tuple[str, str]]:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), "previous round", "this round", lineterm="")
    out, chars = [], 0
    for line in lines:
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line.startswith(
            "@@") else "ctx"
        out.append((kind, line))
        chars += len(line)
        if chars > FILE_CHARS:
            out.append(("hunk", "… diff cut here (longer than the page allows)"))
            break
    return out


def read_rounds(attempt: AttemptRecord) -> list[Round]:
    """Each round in order, a folder's or a verdict's: its verdict, the judged solution, its test output (shown as it
    was printed, never read for figures) and the diff to the round before."""
    layout = attempt.layout
    verdicts = {verdict.round: verdict for verdict in attempt.rounds}
    rounds, previous = [], None
    for number in sorted(set(layout.rounds()) | set(verdicts)):
        output = layout.test_output(number)
        item = Round(number, verdicts.get(number), output_name=output.relative_to(layout.path).as_posix())
        chosen = kept_solution(layout.round(number))
        if chosen is not None:
            item.solution_name = chosen.name
            item.solution, item.solution_cut = read_text(chosen)
        item.output, item.output_cut = read_text(output)
        if chosen is not None and previous is not None and previous.solution_name:
            item.diff = diff_lines(previous.solution, item.solution)
        agent, said = layout.agent_files(number), layout.agent_output(number)
        if agent.is_dir():
            files = sorted((p for p in agent.rglob("*") if p.is_file()), key=lambda p: (p != said, p))
            item.agent_files = [(str(p.relative_to(agent)), *read_text(p)) for p in files[:AGENT_FILES]]
            item.agent_said = said in files
        rounds.append(item)
        previous = item
    return rounds


@dataclass
class Tool:
    """One tool call: its name and arguments as the model wrote them, the harness's verdict and the reply."""

    id: str
    name: str
    arguments: str
    verdict: str
    fields: dict[str, Any] | None
    refused_path: str = ""
    reply: str = ""
    reply_cut: int = 0


@dataclass
class Message:
    index: int
    thread: str
    round: int
    role: str
    content: str
    content_cut: int = 0
    reasoning: str = ""
    reasoning_cut: int = 0
    reasoning_tokens: str = ""
    tools: list[Tool] = field(default_factory=list)
    call: CallRow | None = None
    """The calls.csv row of the call that produced this assistant message."""


@dataclass
class Transcript:
    messages: list[Message] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    total: int = 0
    truncated: bool = False
    writes: list[str] = field(default_factory=list)
    """Contents of the accepted write_file calls, in order (near-identical writes mean a coder going round)."""
    fed_back: dict[int, str] = field(default_factory=dict)
    """Round -> the user message that opened it after a failed round (the error the model was shown)."""


def verdict_of(call: ToolCall, line: TranscriptLine, row: CallRow | None) -> tuple[str, str]:
    """(verdict, refused path) of one tool call as the loop judged it: recorded in the transcript, else (older
    transcripts) its call's worst verdict from calls.csv, exact for the usual one tool call per answer."""
    verdict = str(line.verdict(call.id) or (row.integrity if row else "") or "?")
    return verdict, str((call.args() or {}).get("path", "")) if verdict == "path_escape" else ""


def read_conversation(conversation: list[tuple[TranscriptLine, CallRow | None]],
                      limit: int = TRANSCRIPT_CHARS) -> Transcript:
    """The conversation's messages (until `limit` characters are shown), each answer with its call, each tool call
    with its verdict and its reply."""
    out = Transcript()
    shown_chars = 0
    pending: dict[str, Tool] = {}
    for line, answered in conversation:
        out.total += 1
        thread, number, content = line.thread or "?", line.round, line.content or ""
        if thread not in out.threads:
            out.threads.append(thread)
        opens = line.role == "user" and number > 1 and thread in ("orchestrator", "direct")
        if opens and number not in out.fed_back and FED_BACK.match(content):
            out.fed_back[number] = content
        message = Message(out.total, thread, number, line.role, *cut(content))
        if line.role == "assistant":
            message.call = answered
            message.reasoning, message.reasoning_cut = cut(line.reasoning or "")
            if message.reasoning:
                known = answered.reasoning_tokens if answered else None
                message.reasoning_tokens = f"{known}" if known is not None else f"≈{len(message.reasoning.split())}"
            for call in tool_calls_of(line):
                verdict, refused = verdict_of(call, line, message.call)
                fields = call.args()
                tool = Tool(call.id, call.name, call.arguments, verdict, fields, refused)
                if verdict == "ok" and call.name == "write_file" and fields:
                    out.writes.append(str(fields.get("content", "")))
                message.tools.append(tool)
                pending[call.id] = tool
        elif line.role == "tool" and str(line.tool_call_id) in pending:
            tool = pending.pop(str(line.tool_call_id))
            tool.reply, tool.reply_cut = cut(content)
        size = len(message.content) + len(message.reasoning) + sum(len(t.arguments) for t in message.tools)
        if shown_chars + size > limit:
            out.truncated = True
            continue
        shown_chars += size
        out.messages.append(message)
    return out


def similar_runs(writes: list[str]) -> int:
    """Longest run of consecutive accepted writes each near-identical to the one before (1 for a single write)."""
    best = run = 1 if writes else 0
    for before, after in zip(writes, writes[1:], strict=False):
        # By lines, not characters: as telling for code, and fast enough for every write of a night.
        same = before == after or difflib.SequenceMatcher(
            None, before.splitlines()[:2000], after.splitlines()[:2000], autojunk=False).ratio() >= NEAR_IDENTICAL
        run = run + 1 if same else 1
        best = max(best, run)
    return best
