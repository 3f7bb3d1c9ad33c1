"""An external agent's report on its work, read where the agent made it, in this order of authority:

1. **its own finish signal** (`signal`): mini-swe-agent's submission (its trajectory's `exit_status` is `Submitted`;
   the words are its last message's), Hermes' final response (`hermes -z` prints nothing else, and its usage file
   says whether the run completed), or a final JSON result a CLI prints last (Claude Code's `result`, a Terminus-style
   `task_complete`, an OpenHands-style `task_completed`);
2. **its final output to its user** (`output`): the last paragraph it printed, code and tool output left out;
3. **its model's last words** through the proxy (`model`).

A source that says nothing (no status, no tests claim) hands over to the next. When the report came from the agent
and its model said something else, both are kept: the agent relayed something its model did not say.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.agent.claims import NOUNED, Claim, claim_from_fields, claim_of, readable_lines
from soak.record.schema import ClaimSource

SIGNAL_BYTES = 8 << 20
"""The largest agent file read for a finish signal: a trajectory of a long attempt, never an unbounded read."""
SUBMITTED = Claim(status="done", quote="(submitted its work)",
                  reason="mini-swe-agent submitted its work (exit_status Submitted)")


@dataclass(frozen=True)
class Closing:
    """The attempt's claim and where it was read; `model`, the model's own last words when the claim came from the
    agent and the model said something else (None otherwise)."""

    claim: Claim
    source: ClaimSource
    text: str
    """The message the claim was read from."""
    model: Claim | None = None


def json_file(path: Path) -> Any:
    """A kept JSON file of the agent's, None when it is missing, too large or not JSON (the agent wrote it)."""
    try:
        if path.stat().st_size > SIGNAL_BYTES:
            return None
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


Signal = tuple[str, Claim]
"""A finish signal: the message it carries and what it claims."""


def mini_submission(kept: Path) -> Signal | None:
    """mini-swe-agent's submission: its closing message read, or a plain "done" when that message says nothing
    (submitting is the claim); None when it did not submit."""
    trajectory = json_file(kept / "trajectory.json")
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("info"), dict):
        return None
    if trajectory["info"].get("exit_status") != "Submitted":
        return None
    messages = trajectory.get("messages")
    said = [text_of(m.get("content")) for m in (messages if isinstance(messages, list) else [])
            if isinstance(m, dict) and m.get("role") == "assistant"]
    last = next((text for text in reversed(said) if text.strip()), "")
    claim = claim_of(last)
    return last, claim if claim.decisive else SUBMITTED


def hermes_response(kept: Path, output: str) -> Signal | None:
    """Hermes' final response (`hermes -z` prints only that), when its usage file says the run completed."""
    usage = json_file(kept / "usage.json")
    if not isinstance(usage, dict) or usage.get("completed") is not True:
        return None
    return output, claim_of(output)


JSON_LINE = re.compile(r"^\s*\{.*\}\s*$")
WORDS = re.compile(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}")
"""Two words in a row: something said, not a name."""


def json_result(output: str) -> Signal | None:
    """A final JSON object the agent printed as its last line, read for completion fields (claims.claim_from_fields)."""
    lines = [line for line in output.rstrip().splitlines()[-1:] if JSON_LINE.match(line)]
    if not lines:
        return None
    try:
        value = json.loads(lines[0])
    except (ValueError, RecursionError):
        return None
    claim = claim_from_fields(value) if isinstance(value, dict) else None
    return (lines[0], claim) if claim is not None else None


SIGNALS = {"mini-swe-agent": lambda kept, output: mini_submission(kept),
           "hermes": hermes_response}
"""The built-in agents' finish signals; any other agent's is a final JSON result, if it prints one."""


def last_paragraph(output: str) -> str:
    """The last paragraph of what the agent printed that has words in it: code blocks, tool output and a paragraph
    of names alone (the file an edit went to) left out."""
    paragraphs: list[list[str]] = [[]]
    for line in readable_lines(output):
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    found = [text for lines in paragraphs if lines and WORDS.search(NOUNED.sub(" ", text := "\n".join(lines)))]
    return found[-1] if found else ""


def closing(agent: str, kept: Path, output: str, last_words: str) -> Closing:
    """The agent's report on its work (see the module docstring); `kept`, the round's copy of its files."""
    signal = SIGNALS.get(agent, lambda kept, output: json_result(output))(kept, output)
    model, paragraph = claim_of(last_words), last_paragraph(output)
    printed = claim_of(paragraph)
    source: ClaimSource = "model"
    text, claim = last_words, model
    if signal is not None and signal[1].decisive:
        source, (text, claim) = "signal", signal
    elif printed.decisive:
        source, text, claim = "output", paragraph, printed
    differs = source != "model" and model.decisive and (model.status, model.tests_claim) != (claim.status,
                                                                                          claim.tests_claim)
    return Closing(claim, source, text, model if differs else None)
