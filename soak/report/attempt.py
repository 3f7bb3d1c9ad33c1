"""One attempt as its work folder holds it (`work/<task>/<cycle>/`): the transcript as threads with each tool call's
verdict, each round's solution and test output, an external agent's own files; cut to fit one page."""

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.llm.integrity import ToolCall
from soak.record.layout import AttemptLayout
from soak.record.transcript import TranscriptLine, read_transcript

MESSAGE_CHARS = 20_000
"""Longest message body shown; the rest is in the raw file."""
TRANSCRIPT_CHARS = 1_500_000
"""Transcript text shown on one page (a page stays far below 5 MB even escaped); later messages are left out."""
FILE_CHARS = 200_000
"""Longest solution, test output, diff or agent file shown."""
AGENT_FILES = 8
SUMMARY = re.compile(r"^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected)"
                     r"(?:, )?)+) in [\d.]+s", re.M)
FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)
FED_BACK = re.compile(r"^The tests failed \((\d+)/(\d+) passed")
NEAR_IDENTICAL = 0.95


def cut(text: str, limit: int = MESSAGE_CHARS) -> tuple[str, int]:
    """(text up to `limit` characters, characters left out)."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def test_counts(output: str) -> tuple[int, int] | None:
    """(passed, total) from pytest's last summary line; None when there is none (a crash, a timeout)."""
    found = SUMMARY.findall(output)
    if not found:
        return None
    counts = {word.rstrip("s"): int(n) for n, word in re.findall(r"(\d+) (\w+)", found[-1])}
    passed = counts.get("passed", 0)
    return passed, passed + counts.get("failed", 0) + counts.get("error", 0)


def failing_tests(output: str) -> list[str]:
    """Test ids from pytest's short summary (`FAILED a.py::T::test_x - ...`), in order, once each."""
    return list(dict.fromkeys(FAILED_LINE.findall(output)))


@dataclass
class Round:
    number: int
    solution_name: str = ""
    solution: str = ""
    solution_cut: int = 0
    output: str = ""
    output_cut: int = 0
    counts: tuple[int, int] | None = None
    failing: list[str] = field(default_factory=list)
    diff: list[tuple[str, str]] = field(default_factory=list)
    """(css class, line) of the unified diff to the previous round's solution."""
    fed_back: str = ""
    """The message that started the next round: the exact error the model was shown."""
    agent_files: list[tuple[str, str, int]] = field(default_factory=list)
    """(name, text, characters left out) of an external agent's output and logs."""

    @property
    def passed(self) -> bool:
        return self.counts is not None and self.counts[1] > 0 and self.counts[0] == self.counts[1]


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


def read_rounds(attempt: AttemptLayout, entry_hint: str = "") -> list[Round]:
    """Each judged round in order: the judged solution, its test output and parsed counts, the diff between them."""
    rounds, previous = [], None
    for number in attempt.rounds():
        folder = attempt.round(number)
        item = Round(number)
        sources = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".py")
        chosen = next((p for p in sources if p.name == entry_hint), sources[0] if sources else None)
        if chosen is not None:
            item.solution_name = chosen.name
            item.solution, item.solution_cut = read_text(chosen)
        item.output, item.output_cut = read_text(attempt.test_output(number))
        item.counts = test_counts(item.output)
        item.failing = failing_tests(item.output)
        if chosen is not None and previous is not None and previous.solution_name:
            item.diff = diff_lines(previous.solution, item.solution)
        agent = attempt.agent_files(number)
        if agent.is_dir():
            files = sorted((p for p in agent.rglob("*") if p.is_file()), key=lambda p: (p.name != "output.txt", p))
            item.agent_files = [(str(p.relative_to(agent)), *read_text(p)) for p in files[:AGENT_FILES]]
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
    call: dict[str, Any] | None = None
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


def verdict_of(call: ToolCall, line: TranscriptLine, row: dict[str, Any] | None) -> tuple[str, str]:
    """(verdict, refused path) of one tool call as the loop judged it: recorded in the transcript, else (older
    transcripts) its call's worst verdict from calls.csv, exact for the usual one tool call per answer."""
    verdict = str(line.verdict(call.id) or (row or {}).get("integrity") or "?")
    return verdict, str((call.args() or {}).get("path", "")) if verdict == "path_escape" else ""


def tool_calls_of(line: TranscriptLine) -> list[ToolCall]:
    """The line's tool calls as the model wrote them (a call without a function keeps an empty name)."""
    found = []
    for item in line.tool_calls or []:
        function = item.get("function") if isinstance(item.get("function"), dict) else {}
        found.append(ToolCall(id=str(item.get("id", "")), name=str(function.get("name") or ""),
                              arguments=text_of(function.get("arguments"))))
    return found


def text_of(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def read_conversation(path: Path, calls: list[dict[str, Any]], limit: int = TRANSCRIPT_CHARS) -> Transcript:
    """The transcript's messages (until `limit` characters are shown), each assistant message paired with its call
    (the i-th answered call of the attempt), each tool call with its verdict and its reply."""
    out = Transcript()
    answered = [c for c in calls if c.get("status") == "ok"]
    shown_chars, assistant = 0, 0
    pending: dict[str, Tool] = {}
    for line in read_transcript(path):
        out.total += 1
        thread, number, content = line.thread or "?", line.round, line.content or ""
        if thread not in out.threads:
            out.threads.append(thread)
        opens = line.role == "user" and number > 1 and thread in ("orchestrator", "direct")
        if opens and number not in out.fed_back and FED_BACK.match(content):
            out.fed_back[number] = content
        message = Message(out.total, thread, number, line.role, *cut(content))
        if line.role == "assistant":
            message.call = answered[assistant] if assistant < len(answered) else None
            assistant += 1
            message.reasoning, message.reasoning_cut = cut(line.reasoning or "")
            if message.reasoning:
                known = (message.call or {}).get("reasoning_tokens")
                message.reasoning_tokens = f"{int(known)}" if isinstance(known, int | float) and known == known \
                    else f"≈{len(message.reasoning.split())}"
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
