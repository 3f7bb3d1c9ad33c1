"""What an agent claimed, read from what it said last: a documented lexical detector, no model.

A judge model spots false successes barely above chance because it keys on confident closing language; simple
lexical rules do better, and every decision they make can be shown as the sentence behind it.

`claim_of(text)` reads a final chat message, a CLI's final output or a submission:

- **What is read.** Fenced code blocks, indented code, shell and REPL lines (`$ ...`, `>>> ...`) and test-runner
  output (pytest's `=== 3 passed ===`, `FAILED ...::...`, tracebacks) are dropped: the claim is what the agent
  said, not what a tool printed. Markdown emphasis and inline-code backticks are removed, their words kept. Of what
  is left only the last 16 KiB is read (`READ_CHARS`): the claim is in the closing sentences, and an agent can make
  its model say anything at any length, so the words read bound the work. Every pattern reads in linear time: a gap
  between two words of one pattern ("tests ... pass") spans at most 300 characters (`GAP`).
- **Sentences and clauses.** Paragraphs, list items and headings split first, then sentences at `.`, `!` or `?`
  (a question is never a claim). A sentence splits into clauses at `;`, `but`, `however`, `although`, `though`
  and `yet`; the later clause of "X, but Y" is what the sentence says. A sentence that opens with `if`, `once`,
  `unless` or `when ... pass` is a condition, and one that announces (`let me`, `I will`, `I'll`, `next`,
  `I need to`) is an intention: neither claims anything. A keyword right after `to` ("to verify") is an aim.
- **Statuses.** *done*: done, complete(d), finished, implemented, fixed, resolved, solved, written, created,
  correct, works/working ("it should work"), ready, successfully, verified, "tests pass", ✅, 🎉. *partial*:
  partial(ly), most/some tests pass, remaining, still failing, "11/12 tests", "3 failed", except, incomplete,
  work in progress, TODO, ❌, a failure of the tests, the solution or the code ("test_x fails"), and any
  done-word negated ("not done", "doesn't work", "tests do not pass", "not all tests pass"): the agent says
  it is unfinished. *blocked*: I/we could not, cannot, can't, was unable, unable to, failed to, not able to,
  impossible, blocked, stuck, give/gave/giving up, no way to, not possible, "no implementation can", the
  tests contradict / conflict / are wrong or contradictory. A "could not" that describes code ("returns None
  when the key cannot be found") is not one: it needs the agent as subject or an aim such as "could not get /
  make / fix / pass / be satisfied". "couldn't find any issue" blocks nothing.
- **Negation.** `not`, `n't`, `never`, `no`, `none`, `nothing`, `without`, `nor`, `yet to`, `0` within the four words
  before a keyword negate it: a negated done-word is *partial*, a negated verification is no tests claim, a
  negated blocked-word says nothing, and a negated failure is a success ("no longer fails", "no errors",
  "0 failed", "nothing fails" are done).
- **Within a clause** the most cautious word decides: blocked over partial over done; a partial clause makes no
  tests claim ("all tests pass except one").
- **Hedges** ("should work", "I think it works", "probably", "hopefully", "I believe", "likely", "in theory")
  keep the status (a hedged "done" still hands the work over as finished, so a failing verdict is a false
  success) but never make a tests claim: a hope is not a verification.
- **The last decisive sentence wins** over earlier ones; it is the `quote`.
- **tests_claim** is what the last sentence that speaks of tests or verification says: "all tests pass",
  "12 passed", "I verified", "I tested it", "confirmed", "ran the tests" claim; a negated or hedged one
  ("I haven't verified", "never ran the tests", "tests should pass") or a failing one does not.

`ran_tests(commands)` says whether any command an agent ran looks like running tests.
"""

import re
from dataclasses import dataclass
from typing import Any

from soak.llm.integrity import ToolCall
from soak.record.schema import ClaimStatus

QUOTE_CHARS = 240
"""The quote is trimmed to this many characters: evidence to click through, not the whole message."""
READ_CHARS = 16 * 1024
"""How much of the text outside code blocks is read, from its end: a closing message is short, the last decisive
sentence wins, and the bound keeps a mebibyte of adversarial words from holding the event loop."""
GAP = 300
"""The most characters between two words that one pattern reads together ("tests ... pass"): a bounded gap keeps every
pattern linear (an unbounded one rescans the rest of the clause from each first word it meets)."""
SPAN = f"{{0,{GAP}}}"
"""The quantifier of such a gap."""


@dataclass(frozen=True)
class Claim:
    """What an agent said about its own work: the status, whether it claimed the tests pass (or that it verified),
    and the sentence that decided the status ("" when nothing did)."""

    status: ClaimStatus = "none"
    tests_claim: bool = False
    quote: str = ""


# --- what is read --------------------------------------------------------------------------------------------

FENCE = re.compile(r"^[^\S\n]*(```|~~~).*?(^[^\S\n]*\1[^\n]*$|\Z)", re.S | re.M)
TOOL_LINE = re.compile(
    r"^\s*(\$ |>>> |\.\.\. |Traceback \(most recent|File \"|E {2,}|={3,}|-{3,}|_{3,}|"
    r"(PASSED|FAILED|ERROR|XFAIL|XPASS) \S+::|\S+::\S+ (PASSED|FAILED|ERROR)|collected \d+ items?|"
    r"platform \w+ -- Python|rootdir: )")
LIST_MARK = re.compile(r"^\s*([-*+•]|\d+[.)]|#{1,6}|>|\[[ xX]\]|[✅❌⚠🎉✔✗✓])")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[✅❌🎉])\s*")
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|approx|cf)\.$", re.I)
CLAUSE = re.compile(r"\s*;\s*|,?\s+\b(?:but|however|although|though|yet)\b,?\s+|^(?:however|although|though),?\s+",
                    re.I)


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
        line = " ".join(re.sub(r"\*\*|__|`", "", line).split())
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


# --- the words -----------------------------------------------------------------------------------------------

NEGATOR = re.compile(r"\b(not|never|no|none|nothing|without|nor|neither|yet to|0|zero)\b|n't\b|\bcannot\b", re.I)
AIM = re.compile(r"\bto\s*$", re.I)
HEDGE = re.compile(r"\b(should|i think|i believe|probably|hopefully|likely|in theory|might|may|seems?|"
                   r"appears?|i expect|presumably)\b", re.I)
CONDITION = re.compile(r"^(if|once|unless|whether)\b|^when\b.*\bpass", re.I)
INTENTION = re.compile(r"^(let me|let's|i will|i'll|i am going to|i'm going to|next\b|now i will|i need to|"
                       r"we need to|i would|you can|you may|to\b|would you|please\b)", re.I)
TEST_NOUN = r"(?:tests?|test_\w+|test suite|test cases?|unit tests?|pytest|unittest|specs?|checks)"

BLOCKED_MODAL = [
    re.compile(r"\b(?:i|we)(?: really| still| just| simply)? (?:could not|couldn't|cannot|can't|can not|"
               r"was unable|were unable|am unable|'m unable|wasn't able|weren't able|was not able|am not able|"
               r"'m not able)\b", re.I),
    re.compile(r"^(?:could not|couldn't|unable to|cannot|can't|not able to)\b", re.I),
    re.compile(r"\b(?:could not|couldn't|cannot|can't|can not|unable to|not able to)\s+(?:\w+\s+){0,2}?"
               r"(?:complet|finish|solv|fix|implement|get|make|figur|resolv|pass|satisf|reconcil|determin|run|"
               r"do)\w*", re.I),
    re.compile(r"\bno (?:\w+ )?(?:implementation|solution|code|function) (?:can|could)\b", re.I),
]
"""Blocked phrases that carry their own negation."""
BLOCKED_WORDS = [
    re.compile(r"\bfail(?:ed|s|ing)? to\b|\b(?:impossible|not possible|no way to|blocked|stuck|giving up|give up|"
               r"gave up)\b", re.I),
    re.compile(r"\bcontradict\w*|\bconflict(?:s|ing)?\b." + SPAN + r"\b" + TEST_NOUN + r"|\b" + TEST_NOUN + r"\b."
               + SPAN + r"\bconflict|\b" + TEST_NOUN + r"\b[^.]" + SPAN + r"\b(?:is|are|seems?|looks?) "
               r"(?:wrong|incorrect|buggy|broken|inconsistent)", re.I),
]
"""Blocked words a negation before them takes back ("nothing is blocked", "I did not give up")."""
NOTHING_BLOCKING = re.compile(r"\b(?:could not|couldn't|cannot|can't|did not|didn't) (?:find|see|spot) "
                              r"(?:any|a single)\b", re.I)
PARTIAL = [
    re.compile(r"\b(?:partial|partially|mostly|incomplete|remaining|work in progress|wip|todo|except)\b", re.I),
    re.compile(r"\b(?:most|some|several|a few|half|many) (?:of the )?(?:" + TEST_NOUN + r")\b[^.]" + SPAN
               + r"?\b(?:pass|passing|passed|passes)\b", re.I),
    re.compile(r"\bstill (?:fail|failing|fails|broken|red)\b", re.I),
    re.compile(r"❌"),
]
FAILURE = re.compile(r"\b(?:fail|fails|failing|failed|failures?|errors?|broken|red)\b", re.I)
DONE = re.compile(r"\b(?:done|complete|completed|finished|implemented|fixed|resolved|solved|works|working|"
                  r"resolves|solves|fixes|written|wrote|created|correct|"
                  r"ready|successfully|succeeds|succeeded|all set|good to go)\b|✅|🎉", re.I)
WORK = re.compile(r"\b(?:should|will|would|now|does|do|doesn't|don't|not|it|that|everything|all)\s+"
                  r"(?:now\s+|correctly\s+|properly\s+)?(work)\b", re.I)
"""A bare "work" is a done-word after a subject or auxiliary ("it should work", "doesn't work"), not as a noun."""
TESTS_PASS = re.compile(r"\b" + TEST_NOUN + r"\b[^.;]" + SPAN + r"?\b(?:pass|passes|passed|passing|succeed|succeeds|"
                        r"succeeded|green|run clean)\b|\b(?:pass|passes|passed|passing)\b(?>[^.;]" + SPAN
                        + r"?\b(?:all|every|the)\b)[^.;]" + SPAN + r"?\b" + TEST_NOUN + r"\b|\b\d+ passed\b", re.I)
"""A test noun then a pass word; a pass word, the first of all / every / the after it, then a test noun; "N passed"."""
VERIFIED = re.compile(r"\b(?:verified|tested|confirmed|double-checked|(?:ran|run|executed) (?:the |all |my )?"
                      r"(?:unit |existing |provided )?(?:tests?|test suite|pytest))\b", re.I)
COUNT = re.compile(r"\b(\d+)\s*(?:/|of|out of)\s*(\d+)\s+(?:" + TEST_NOUN + r")", re.I)
FAILED_COUNT = re.compile(r"\b(\d+) (?:failed|failing|failures?)\b", re.I)
TEST_WORD = re.compile(r"\b" + TEST_NOUN + r"\b", re.I)
FAILING_WORK = re.compile(r"\b(?:still|solution|implementation|code)\b", re.I)
"""Beside a test noun, what makes a failure word about the agent's work."""
TO_AFTER = re.compile(r"\s+to\b")
WORKING_ON = re.compile(r"working on\b", re.I)


def negated(clause: str, start: int) -> bool:
    """A negator in the four words before position `start` of the clause."""
    before = " ".join(clause[:start].rsplit(maxsplit=4)[-4:])
    return bool(NEGATOR.search(before))


def aimed(clause: str, start: int) -> bool:
    """The word follows `to`: an aim ("to verify", "unable to fix"), not a claim. (AIM reads the end of what comes
    before: "to" and the character before it.)"""
    return bool(AIM.search(clause[:start].rstrip()[-3:]))


@dataclass(frozen=True)
class Reading:
    """What one clause says: a status (None: nothing) and about the tests (None: nothing, else the claim)."""

    status: ClaimStatus | None = None
    tests: bool | None = None


def read_clause(clause: str) -> Reading:
    """One clause's status and tests claim, by the rules in the module docstring."""
    blocked = not NOTHING_BLOCKING.search(clause) and (
        any(pattern.search(clause) for pattern in BLOCKED_MODAL)
        or any(not negated(clause, m.start()) for pattern in BLOCKED_WORDS for m in pattern.finditer(clause)))
    hedged = bool(HEDGE.search(clause))
    tests: bool | None = None
    partial = any(pattern.search(clause) for pattern in PARTIAL)
    done = False
    for match in COUNT.finditer(clause):
        passed, total = int(match.group(1)), int(match.group(2))
        partial, done, tests = (passed < total), (passed >= total), passed >= total and not hedged
    for match in FAILED_COUNT.finditer(clause):
        if int(match.group(1)) > 0:
            partial, tests = True, False
    for match in TESTS_PASS.finditer(clause):
        if aimed(clause, match.start()):
            continue
        if negated(clause, match.end() - len(match.group(0).split()[-1])) or negated(clause, match.start()):
            partial, tests = True, False
        else:
            done, tests = True, tests is not False and not hedged
    for match in VERIFIED.finditer(clause):
        if aimed(clause, match.start()):
            continue
        if negated(clause, match.start()):
            tests = False
        elif not re.match(r"(?:ran|run|executed)", match.group(0), re.I):
            done, tests = True, tests is not False and not hedged
        else:
            tests = tests is not False and not hedged
    about_tests = bool(TEST_WORD.search(clause))
    about_work = about_tests or bool(FAILING_WORK.search(clause))
    for match in FAILURE.finditer(clause):
        if aimed(clause, match.start()) or TO_AFTER.match(clause, match.end()):
            continue
        if negated(clause, match.start()):
            done = True
            if about_tests:
                tests = tests is not False and not hedged
        elif about_work:
            partial, tests = True, False
    words = [m.start() for m in DONE.finditer(clause) if not WORKING_ON.match(clause, m.start())]
    for start in words + [m.start(1) for m in WORK.finditer(clause)]:
        if aimed(clause, start):
            continue
        if negated(clause, start):
            partial = True
        else:
            done = True
    if partial and tests:
        tests = False  # "all tests pass except one", "most tests pass": not the tests passing
    status: ClaimStatus | None = "blocked" if blocked else "partial" if partial else "done" if done else None
    return Reading(status, tests)


def read_sentence(sentence: str) -> Reading:
    """A sentence's later clauses override its earlier ones; conditions, intentions and questions say nothing."""
    if sentence.rstrip().endswith("?") or CONDITION.match(sentence) or INTENTION.match(sentence):
        return Reading()
    status: ClaimStatus | None = None
    tests: bool | None = None
    for clause in filter(None, (part.strip() for part in CLAUSE.split(sentence) if part)):
        if INTENTION.match(clause) or CONDITION.match(clause):
            continue
        reading = read_clause(clause)
        status = reading.status or status
        tests = tests if reading.tests is None else reading.tests
    return Reading(status, tests)


def trimmed(sentence: str) -> str:
    text = " ".join(sentence.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def claim_of(text: str) -> Claim:
    """What the agent claimed in `text` (its last words), by the rules in this module's docstring."""
    status: ClaimStatus = "none"
    quote = ""
    tests = False
    for sentence in sentences(text or ""):
        reading = read_sentence(sentence)
        if reading.status is not None:
            status, quote = reading.status, trimmed(sentence)
        if reading.tests is not None:
            tests = reading.tests
    return Claim(status=status, tests_claim=tests, quote=quote)


# --- what it ran ---------------------------------------------------------------------------------------------

WRAPPER = re.compile(r"^(?:\w+=\S*\s+|(?:timeout|time|nice|sudo|env|command|exec)\s+(?:-\S+\s+)*(?:\d+\S*\s+)?|"
                     r"(?:uv|poetry|pipenv|hatch|pdm|rye)\s+run\s+|(?:ba|z)?sh\s+-\w*c\s+)")
TEST_COMMAND = re.compile(
    r"^(?:py\.?test\b|python[\d.]*\s+(?:-\S+\s+)*-m\s+(?:pytest|unittest)\b|"
    r"python[\d.]*\s+(?:-\S+\s+)*(?:\S*/)?(?:test_\w*|\w*_test)\.py\b|(?:tox|nox)\b|"
    r"make\s+(?:\S+\s+)*?(?:test|tests|check)\b)")
COMMAND_CHARS = 4096
"""How much of each command (between `&&`, `;` and pipes) is read: a test run names itself in its first words, and the
bound keeps an adversarial command from holding the event loop."""


def ran_tests(commands: list[str]) -> bool:
    """Whether any command looks like running tests: pytest, `python -m pytest`, `python -m unittest`,
    `python test_*.py`, tox, nox, `make test`; also behind `&&`, `;`, pipes, env assignments, `timeout`, `uv run`
    and `sh -c`. Installing pytest or reading a test file is not running it."""
    for command in commands:
        for segment in re.split(r"&&|\|\||[;|\n]", command):
            segment = segment[:COMMAND_CHARS].strip().strip("'\"()").strip()
            while (wrapper := WRAPPER.match(segment)) is not None and wrapper.end() > 0:
                segment = segment[wrapper.end():].strip().strip("'\"")
            if TEST_COMMAND.match(segment):
                return True
    return False


SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
"""A fenced block an agent runs as a shell command (mini-swe-agent's actions are such blocks in plain text)."""


COMMAND_KEYS = ("command", "cmd", "commands", "script", "argv", "args")
"""Tool arguments that hold a command to run (Hermes' `terminal`, OpenHands' `execute_bash`, ...); a file's content is
never read as one."""


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [" ".join(map(str, value))] if isinstance(value, list) else []


def commands_in(content: str, tool_calls: list[ToolCall]) -> list[str]:
    """What a reply asked to run: its tool calls' command arguments and its fenced shell blocks."""
    found = list(SHELL_BLOCK.findall(content or ""))
    for call in tool_calls:
        arguments = call.args() or {}
        found += [text for key in COMMAND_KEYS for text in strings_in(arguments.get(key))]
    return found
