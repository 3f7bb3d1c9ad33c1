"""What an agent claimed, read from its closing message: a documented lexical detector, no model.

A judge model spots false successes barely above chance because it keys on confident closing language; simple
lexical rules do better, and every decision they make can be shown as the sentence behind it.

`claim_of(text)` reads a final chat message, a CLI's final output or a submission (where each comes from:
soak.agent.finish):

- **Completion fields.** A JSON object in a fenced block, or the whole message as one, is read for an agent's
  completion fields (`claim_from_fields`): `task_complete` (Terminus), `task_completed` (OpenHands' finish), a
  `status`, and the words of `result`, `final_thought`, `message` or `summary`. A field's status outranks the prose.
- **What is read.** Fenced code blocks, indented code, shell and REPL lines (`$ ...`, `>>> ...`) and test-runner
  output (pytest's `=== 3 passed ===`, `FAILED ...::...`, tracebacks) are dropped: the claim is what the agent
  said, not what a tool printed. Inline code and dotted names (`functools.partial`, `solution.py`) are read as a
  plain noun: a status word inside an identifier is not the agent's status. Markdown emphasis is removed. Of what
  is left only the last 16 KiB is read (`READ_CHARS`): the claim is in the closing sentences, and an agent can make
  its model say anything at any length, so the words read bound the work. Every pattern reads in linear time: a gap
  between two words of one pattern ("tests ... pass") spans at most 300 characters (`claim_words.GAP`).
- **Sentences and clauses.** Paragraphs, list items and headings split first, then sentences at `.`, `!` or `?`
  (a question is never a claim). A sentence splits into clauses at `;`, `but`, `however`, `although`, `though`
  and `yet`; the later clause of "X, but Y" is what the sentence says. A sentence that opens with `if`, `once`,
  `unless` or `when ... pass` is a condition, as is an offer on access ("once I have access to the files I can
  ..."), and one that announces (`let me`, `I will`, `I'll`, `next`, `I need to`) is an intention: neither claims
  anything. A keyword right after `to` ("to verify") is an aim.
- **Statuses.** *done*: done, complete(d), finished, implemented, fixed, resolved, solved, written, created,
  correct, works/working ("it should work"), ready, successfully, verified, applied / made the changes, addressed,
  confident in the solution, "tests pass", ✅, 🎉, and a report in the perfect tense ("the results have been
  saved", "I have parsed the file"; not "I have tried", "has been identified"). *partial*:
  partial(ly), most/some tests pass, remaining, still failing, "11/12 tests", "3 failed", except, incomplete,
  work in progress, TODO, ❌, a failure of the tests, the solution or the code ("test_x fails"), and any
  done-word negated ("not done", "doesn't work", "tests do not pass", "not all tests pass"): the agent says
  it is unfinished. *blocked*: I/we could not, cannot, can't, was unable, unable to, failed to, not able to,
  impossible, I am blocked / stuck, give/gave/giving up, no way to, not possible, "no implementation can", the
  tests contradict / conflict / are wrong or contradictory. A "could not" that describes code ("returns None
  when the key cannot be found") is not one: it needs the agent as subject or an aim such as "could not get /
  fix / pass / be satisfied". "couldn't find any issue" blocks nothing; nor does "blocked" naming a thing.
- **Negation.** `not`, `n't`, `never`, `no`, `none`, `nothing`, `without`, `nor`, `yet to`, `0` within the four words
  before a keyword negate it: a negated done-word is *partial*, a negated verification is no tests claim, a
  negated blocked-word says nothing, and a negated failure is a success ("no longer fails", "no errors",
  "0 failed", "nothing fails" are done).
- **Within a clause** the most cautious word decides: blocked over partial over done; a partial clause makes no
  tests claim ("all tests pass except one").
- **Hedges** ("should work", "I think it works", "probably", "hopefully", "I believe", "likely", "in theory")
  keep the status (a hedged "done" still hands the work over as finished, so a failing verdict is a false
  success) but never make a tests claim: a hope is not a verification.
- **The last decisive sentence wins** over earlier ones; it is the `quote`, and the words that decided it the
  `reason`. Except: an **explicit shortfall** anywhere ("short of", "falls short", "does not meet", "X vs Y
  required", "only some", "not all", "would require", "still missing") outranks a later done: the agent said
  the work falls short, and an upbeat closing line does not take that back.
- **tests_claim** is what the last sentence that speaks of tests or verification says: "all tests pass",
  "12 passed", "I verified", "I tested it", "confirmed", "ran the tests", "the output matches", a measured figure
  set beside its target ("an RMSE of 1.61, well below the 2.0 requirement") claim; a negated or hedged one
  ("I haven't verified", "never ran the tests", "tests should pass") or a failing one does not.

"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

from soak.agent.claim_words import (
    BLOCKED_MODAL,
    BLOCKED_WORDS,
    CONDITION,
    COUNT,
    DONE,
    FAILED_COUNT,
    FAILING_WORK,
    FAILURE,
    HEDGE,
    INTENTION,
    MEASURED,
    NOTHING_BLOCKING,
    PARTIAL,
    PRESENT_INABILITY,
    SHORTFALL,
    TEST_WORD,
    TESTS_PASS,
    TO_AFTER,
    VERIFIED,
    WORK,
    WORKING_ON,
    aimed,
    negated,
)
from soak.record.schema import ClaimStatus

QUOTE_CHARS = 240
"""The quote is trimmed to this many characters: evidence to click through, not the whole message."""
READ_CHARS = 16 * 1024
"""How much of the text outside code blocks is read, from its end: a closing message is short, the last decisive
sentence wins, and the bound keeps a mebibyte of adversarial words from holding the event loop."""


@dataclass(frozen=True)
class Claim:
    """What an agent said about its own work: the status, whether it claimed the tests pass (or that it verified),
    the sentence that decided the status ("" when nothing did) and why it was read so (the words that decided)."""

    status: ClaimStatus = "none"
    tests_claim: bool = False
    quote: str = ""
    reason: str = field(default="", compare=False)

    @property
    def decisive(self) -> bool:
        """It says something: a status or a tests claim."""
        return self.status != "none" or self.tests_claim


# --- what is read --------------------------------------------------------------------------------------------

FENCE = re.compile(r"^[^\S\n]*(```|~~~).*?(^[^\S\n]*\1[^\n]*$|\Z)", re.S | re.M)
TOOL_LINE = re.compile(
    r"^\s*(\$ |>>> |\.\.\. |Traceback \(most recent|File \"|E {2,}|={3,}|-{3,}|_{3,}|"
    r"(PASSED|FAILED|ERROR|XFAIL|XPASS) \S+::|\S+::\S+ (PASSED|FAILED|ERROR)|collected \d+ items?|"
    r"platform \w+ -- Python|rootdir: |Applied edit to |Tokens: [\d.]+k? sent|Cost: \$|\{.*\}\s*$)")
"""A line a tool printed (shell, REPL, pytest, an agent's own status lines such as aider's "Applied edit to", a JSON
object: its fields are read as such, claim_from_fields)."""
LIST_MARK = re.compile(r"^\s*([-*+•]|\d+[.)]|#{1,6}|>|\[[ xX]\]|[✅❌⚠🎉✔✗✓])")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[✅❌🎉])\s*")
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|approx|cf)\.$", re.I)
CLAUSE = re.compile(r"\s*;\s*|,?\s+\b(?:but|however|although|though|yet)\b,?\s+|^(?:however|although|though),?\s+",
                    re.I)


NOUNED = re.compile(r"`[^`\n]*`|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w{2,})+\b(?:\(\))?")
"""Inline code and dotted names: what they say is an identifier's, not the agent's."""


def as_noun(match: re.Match[str]) -> str:
    """An identifier as a plain noun; a test's name stays one ("`test_parse` passes")."""
    word = match.group(0).strip("`")
    return word if re.fullmatch(r"test_\w+|tests?", word) else "code"


def readable_lines(text: str) -> list[str]:
    """The last READ_CHARS of the text's lines without code blocks, indented code and tool output; blank lines kept as
    breaks; typographic apostrophes made plain ("couldn’t")."""
    text = FENCE.sub("\n", text.replace("\r\n", "\n").replace("\u2019", "'"))[-READ_CHARS:]
    lines = []
    for line in text.split("\n"):
        indented = line.startswith(("    ", "\t")) and not LIST_MARK.match(line)
        lines.append("" if indented or TOOL_LINE.match(line) else line)
    return lines


def sentences(text: str) -> list[str]:
    """Sentences in order, each with its runs of whitespace made one space: paragraphs and list items first, then `.`,
    `!`, `?` (an abbreviation does not end one)."""
    blocks: list[str] = []
    current: list[str] = []
    for line in readable_lines(text):
        line = " ".join(NOUNED.sub(as_noun, line).replace("**", "").replace("__", "").split())
        starts_item = bool(LIST_MARK.match(line))
        if not line or starts_item or (current and re.search(r"[.!?:]$", current[-1])):
            if current:
                blocks.append(" ".join(current))
            current = []
        if line:
            current.append(LIST_MARK.sub(lambda m: m.group(0) if m.group(0).strip() in "✅❌🎉" else "", line, 1)
                           .strip())
    if current:
        blocks.append(" ".join(current))
    found: list[str] = []
    for block in blocks:
        pending: list[str] = []
        for piece in SENTENCE_END.split(block):
            pending += [piece.strip()] if piece.strip() else []
            if pending and not ABBREVIATIONS.search(pending[-1][-8:]):  # "approx." and the character before it
                found.append(" ".join(pending))
                pending = []
        if pending:
            found.append(" ".join(pending))
    return [sentence for sentence in found if sentence]


@dataclass(frozen=True)
class Reading:
    """What one clause or sentence says: a status (None: nothing), about the tests (None: nothing, else the claim),
    the words that decided the status, and whether they hold against a later done (a shortfall, an inability)."""

    status: ClaimStatus | None = None
    tests: bool | None = None
    words: str = ""
    holds: bool = False


def read_clause(clause: str) -> Reading:
    """One clause's status and tests claim, by the rules in the module docstring."""
    found: dict[ClaimStatus, str] = {}

    def saw(status: ClaimStatus, match: re.Match[str]) -> None:
        found.setdefault(status, match.group(0))

    if not NOTHING_BLOCKING.search(clause):
        for match in (m for pattern in BLOCKED_MODAL if (m := pattern.search(clause))):
            saw("blocked", match)
        for match in (m for pattern in BLOCKED_WORDS for m in pattern.finditer(clause)):
            if not negated(clause, match.start()):
                saw("blocked", match)
    hedged = bool(HEDGE.search(clause))
    tests: bool | None = None
    for match in (m for pattern in PARTIAL if (m := pattern.search(clause))):
        saw("partial", match)
    shortfall = SHORTFALL.search(clause)
    if shortfall:
        saw("partial", shortfall)
    for match in COUNT.finditer(clause):
        passed, total = int(match.group(1)), int(match.group(2))
        saw("partial" if passed < total else "done", match)
        tests = passed >= total and not hedged
    for match in FAILED_COUNT.finditer(clause):
        if int(match.group(1)) > 0:
            saw("partial", match)
            tests = False
    for match in TESTS_PASS.finditer(clause):
        if aimed(clause, match.start()):
            continue
        if negated(clause, match.end() - len(match.group(0).split()[-1])) or negated(clause, match.start()):
            saw("partial", match)
            tests = False
        else:
            saw("done", match)
            tests = tests is not False and not hedged
    for match in VERIFIED.finditer(clause):
        if aimed(clause, match.start()):
            continue
        if negated(clause, match.start()):
            tests = False
        elif not re.match(r"(?:ran|run|executed)", match.group(0), re.I):
            saw("done", match)
            tests = tests is not False and not hedged
        else:
            tests = tests is not False and not hedged
    if MEASURED.search(clause):
        tests = tests is not False and not hedged
    about_tests = bool(TEST_WORD.search(clause))
    about_work = about_tests or bool(FAILING_WORK.search(clause))
    for match in FAILURE.finditer(clause):
        if aimed(clause, match.start()) or TO_AFTER.match(clause, match.end()):
            continue
        if negated(clause, match.start()):
            saw("done", match)
            if about_tests:
                tests = tests is not False and not hedged
        elif about_work:
            saw("partial", match)
            tests = False
    done_words = [m for m in DONE.finditer(clause) if not WORKING_ON.match(clause, m.start())]
    for match in done_words + [m for m in WORK.finditer(clause)]:
        start = match.start(match.lastgroup or 0)  # a done-word's `word` group is where negation is read
        if aimed(clause, start):
            continue
        saw("partial" if negated(clause, start) else "done", match)
    status = next((s for s in ("blocked", "partial", "done") if s in found), None)
    if status == "partial" and tests:
        tests = False  # "all tests pass except one", "most tests pass": not the tests passing
    decisive = found.get(status, "") if status else ""
    inability = PRESENT_INABILITY.search(clause) if status == "blocked" else None
    holds = (status == "partial" and shortfall is not None and decisive == shortfall.group(0)) or inability is not None
    return Reading(status, tests, decisive, holds=holds)


def read_sentence(sentence: str) -> Reading:
    """A sentence's later clauses override its earlier ones; conditions, intentions and questions say nothing. A
    shortfall or an inability in any clause holds."""
    if sentence.rstrip().endswith("?") or CONDITION.search(sentence) or INTENTION.match(sentence):
        return Reading()
    reading = Reading()
    holding: Reading | None = None
    for clause in filter(None, (part.strip() for part in CLAUSE.split(sentence) if part)):
        if INTENTION.match(clause) or CONDITION.match(clause):
            continue
        said = read_clause(clause)
        holding = said if said.holds else holding
        reading = Reading(said.status or reading.status, reading.tests if said.tests is None else said.tests,
                          said.words if said.status else reading.words)
    if holding is not None and reading.status == "done":
        return holding
    return Reading(reading.status, reading.tests, reading.words, holds=holding is not None)


def trimmed(sentence: str) -> str:
    text = " ".join(sentence.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def claim_of(text: str, *, fields: bool = True) -> Claim:
    """What the agent claimed in `text` (its closing message), by the rules in this module's docstring; `fields`:
    whether JSON completion fields are read (not in the words of one: a field's words are read once)."""
    reported = [claim for value in json_objects(text or "") if (claim := claim_from_fields(value))] if fields else []
    status: ClaimStatus = "none"
    quote = reason = ""
    tests = False
    holding: tuple[Reading, str] | None = None
    for sentence in sentences(text or ""):
        reading = read_sentence(sentence)
        if reading.status is not None:
            status, quote, reason = reading.status, trimmed(sentence), reading.words
        if reading.holds:
            holding = (reading, trimmed(sentence))
        if reading.tests is not None:
            tests = reading.tests
    if status == "done" and holding is not None:
        held, quote = holding
        status, tests, reason = held.status or "partial", False, f"{held.words!r} outranks the later {reason!r}"
    elif reason:
        reason = repr(reason)
    if reported and reported[-1].status != "none":
        report = reported[-1]
        return Claim(report.status, report.tests_claim or (tests and report.status == "done"), report.quote or quote,
                     report.reason)
    return Claim(status=status, tests_claim=tests, quote=quote, reason=reason)


# --- completion fields ---------------------------------------------------------------------------------------

JSON_FENCE = re.compile(r"^[^\S\n]*```[^\S\n]*(?:json)?[^\S\n]*\n(\s*\{.*?\})\s*^[^\S\n]*```", re.S | re.M | re.I)
FIELD_STATUS: dict[str, ClaimStatus] = {
    **dict.fromkeys(("done", "success", "succeeded", "complete", "completed", "finished", "solved", "resolved",
                     "true"), "done"),
    **dict.fromkeys(("partial", "incomplete", "in_progress", "failed", "failure", "false"), "partial"),
    **dict.fromkeys(("blocked", "impossible", "aborted", "gave_up", "cannot"), "blocked"),
}
"""A completion field's value as a status: OpenHands' `task_completed` says "true", "false" or "partial"."""
WORD_FIELDS = ("final_thought", "result", "message", "summary", "analysis")


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects an agent reported in: fenced JSON blocks, or the whole message as one (at most READ_CHARS
    each)."""
    stripped = text.strip()
    bodies = [stripped] if stripped.startswith("{") and stripped.endswith("}") else JSON_FENCE.findall(text)
    found = []
    for body in bodies:
        if len(body) <= READ_CHARS:
            try:
                value = json.loads(body)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def claim_from_fields(value: dict[str, Any]) -> Claim | None:
    """An agent's completion fields as a claim: `task_complete: true` (Terminus), `task_completed` (OpenHands), a
    `status`, read with the words of its message fields; None when it has none of them. `task_complete: false` is
    an agent going on, not a claim; an error result (`is_error`) claims nothing."""
    words = next((v for key in WORD_FIELDS if isinstance(v := value.get(key), str) and v.strip()), "")
    said = claim_of(words, fields=False) if words else Claim()
    field = next((key for key in ("task_complete", "task_completed", "status") if key in value), None)
    if value.get("is_error") is True:
        return None
    if field is None or (field == "task_complete" and value[field] in (False, "false")):
        return said if said.decisive else None
    status = FIELD_STATUS.get(str(value[field]).strip().lower())
    if status is None:
        return said
    shown = f"{field}: {json.dumps(value[field])}"
    return Claim(status, said.tests_claim and status == "done", said.quote or shown, shown)
