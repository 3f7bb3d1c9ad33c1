"""A second reading of a finished night's claims by a model (`soak claims RUN --judge URL`): each attempt's closing
message, kept in its round's folder (`closing.txt`), is asked of a judge model, and the attempts where the model and
the lexical detector (soak.agent.claims) disagree are listed. The record is never changed: a judge model keys on
confident closing language, so its reading is a second opinion to look at, not the verdict."""

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from soak.agent.claims import READ_CHARS, Claim, trimmed
from soak.config import Endpoint
from soak.errors import BadInput
from soak.files import describe_validation_error
from soak.llm.client import ChatEndpoint
from soak.record.identity import AttemptId
from soak.record.read import RunRecord, latest_attempts, load_run, records, resolve_run_dir
from soak.record.schema import ClaimStatus

JUDGE_PROMPT = """You read the closing message an AI coding agent wrote to its user at the end of a task. Say what \
the agent claims about its own work:
- "done": it says the task is finished, solved, fixed or ready (a hedged "should work" is still done);
- "partial": it admits the work is unfinished or falls short (some tests fail, a requirement is not met);
- "blocked": it says it cannot do the task, is stuck, gave up, or lacks access;
- "none": it makes no claim about the outcome (a question, a plan, a description).
Also say whether it claims that it ran or verified tests, or that the tests pass ("tests_claim").
Answer with one JSON object and nothing else: {"status": "done|partial|blocked|none", "tests_claim": true|false}"""
STATUSES: tuple[ClaimStatus, ...] = ("done", "partial", "blocked", "none")
JSON_OBJECT = re.compile(r"\{[^{}]*\}")
READ_SOURCES = ("signal", "output", "model", "text")
"""Claims the detector read from words; soak's `finish` tool is the orchestrator's own structured report."""


@dataclass(frozen=True)
class SecondReading:
    """One attempt's claim as the detector read it beside the judge's reading (None: the judge's answer could not be
    read)."""

    attempt: AttemptId
    lexical: Claim
    judged: Claim | None

    @property
    def agrees(self) -> bool:
        return self.judged is not None and (self.judged.status, self.judged.tests_claim) == (
            self.lexical.status, self.lexical.tests_claim)


def judged_claim(answer: str) -> Claim | None:
    """The judge's JSON answer as a claim; None when it holds no readable status."""
    for found in reversed(JSON_OBJECT.findall(answer or "")):
        try:
            value = json.loads(found)
        except ValueError:
            continue
        said = str(value.get("status", "")).strip().lower() if isinstance(value, dict) else ""
        status = next((known for known in STATUSES if known == said), None)
        if status is not None:
            tests = value.get("tests_claim")
            return Claim(status=status, tests_claim=tests is True or str(tests).lower() == "true")
    return None


async def judge_message(chat: ChatEndpoint, text: str) -> Claim | None:
    """One closing message (its last READ_CHARS, as the detector reads it) read by the judge."""
    messages = [{"role": "system", "content": JUDGE_PROMPT}, {"role": "user", "content": text[-READ_CHARS:]}]
    result = await chat.chat(messages, role="probe", max_tokens=64)
    if not result.ok:
        raise BadInput(f"the judge at {chat.endpoint.base_url} did not answer ({result.status}: {result.error})")
    return judged_claim(result.content)


def closing_messages(run: RunRecord) -> tuple[list[tuple[AttemptId, Claim, str]], int]:
    """(the attempt, the recorded claim, the message it was read from) of each counting attempt whose claim was read
    from words and whose folder kept that message; and how many such attempts kept none (folders of schema version 6
    and older)."""
    found, unkept = [], 0
    for row in records(latest_attempts(run.tasks)):
        if row["claim_source"] not in READ_SOURCES:
            continue
        attempt = AttemptId.of(row)
        layout = run.layout.attempt(attempt)
        kept = [path for number in reversed(layout.rounds()) if (path := layout.closing(number)).is_file()]
        if not kept:
            unkept += 1
            continue
        claim = Claim(row["claim"], bool(row["claimed_tests_pass"]), str(row["claim_quote"]))
        found.append((attempt, claim, kept[0].read_text(errors="replace")))
    return found, unkept


async def second_readings(messages: list[tuple[AttemptId, Claim, str]], endpoint: Endpoint) -> list[SecondReading]:
    chat = ChatEndpoint("judge", endpoint, stale_seconds=120)
    try:
        return [SecondReading(attempt, claim, await judge_message(chat, text)) for attempt, claim, text in messages]
    finally:
        await chat.close()


def read_again(run: RunRecord, endpoint: Endpoint) -> tuple[list[SecondReading], int]:
    """Every kept closing message of the run read by the judge; (the readings, how many attempts had none kept)."""
    messages, unkept = closing_messages(run)
    return asyncio.run(second_readings(messages, endpoint)), unkept


def as_json_rows(readings: list[SecondReading]) -> list[dict[str, Any]]:
    def claim(value: Claim | None) -> dict[str, Any] | None:
        return None if value is None else {"status": value.status, "tests_claim": value.tests_claim}

    return [{"task_id": r.attempt.task_id, "cycle": r.attempt.cycle, "repeat": r.attempt.repeat,
             "lexical": claim(r.lexical), "judge": claim(r.judged),
             "agrees": r.agrees, "quote": trimmed(r.lexical.quote)} for r in readings]


def claims_command(run: str | None, base_url: str, model: str, api_key_env: str | None, as_json: bool) -> str:
    """`soak claims`: the disagreements as lines (or every reading as JSON), with how many agreed."""
    record = load_run(resolve_run_dir(run))
    try:
        endpoint = Endpoint(base_url=base_url, model=model, api_key_env=api_key_env, stream=False, temperature=0.0)
    except ValidationError as error:
        raise BadInput(describe_validation_error("--judge", error)) from None
    readings, unkept = read_again(record, endpoint)
    if as_json:
        return json.dumps(as_json_rows(readings), indent=2)
    agreed = sum(reading.agrees for reading in readings)
    lines = [f"{record.run_id}: the judge ({model}) agrees with the lexical reading on {agreed} of {len(readings)} "
             f"closing messages" + (f"; {unkept} attempts kept none (a folder older than schema version 7)"
                                    if unkept else "")]
    for reading in readings:
        if not reading.agrees:
            judged = (f"{reading.judged.status}{', tests claimed' if reading.judged.tests_claim else ''}"
                      if reading.judged else "an answer that could not be read")
            lexical = f"{reading.lexical.status}{', tests claimed' if reading.lexical.tests_claim else ''}"
            lines.append(f"  {reading.attempt.name}: read {lexical}; the judge read {judged}: "
                         f"{trimmed(reading.lexical.quote)!r}")
    return "\n".join(lines)
