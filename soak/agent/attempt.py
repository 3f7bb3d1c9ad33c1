"""One attempt core, whoever writes the entry file: soak's delegation loop and an external agent are two drivers of it.

The core owns what both share: the workspace and entry file; the ledger of calls and tokens that ends the attempt at
its call and token caps (the recording proxy charges the same ledger); the rounds (the driver writes -> missing-file
check -> judge -> revision or end); the wall budget with its test-time reserve; judging the file left behind when a
budget ends; the one place an ending becomes an outcome; and the one TaskRow builder (cancelled attempts too)."""

import asyncio
import contextlib
import hashlib
import json
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from soak.agent.claims import Claim
from soak.agent.commands import commands_in
from soak.agent.limits import AttemptLimits
from soak.config import Budgets
from soak.errors import is_disk_full
from soak.llm.integrity import ToolCall
from soak.llm.reply import counted_tokens
from soak.record.identity import AttemptId
from soak.record.layout import AttemptLayout
from soak.record.schema import MANGLED, MODEL_OUTCOMES, CallRow, ClaimSource, Outcome, RoundRow, TaskRow
from soak.sandbox.judge import ResourceLimits, TooLarge, Verdict, entry_source, tail, too_large
from soak.sandbox.touched import tests_touched
from soak.tasks.spec import TaskSpec

INFRA_STATUSES = frozenset({"connection", "http_5xx", "stalled", "truncated"})

Judge = Callable[..., Verdict]
"""`judge(task, source, *, keep_dir=..., stop=...) -> Verdict`, synchronous (run in a thread by `judged`); a set
`stop` (threading.Event) must end the test run at once and kill its processes."""


# --- endings ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ending:
    """How an attempt ended: its outcome, the error kind and the detail that become the row's error columns."""

    outcome: Outcome
    kind: str = ""
    detail: str = ""


class AttemptEnded(Exception):
    """Ends an attempt early from anywhere inside it; the core turns it into the attempt's Ending in one place."""

    outcome: Outcome = "harness_error"

    def __init__(self, detail: str, kind: str = "") -> None:
        super().__init__(detail)
        self.detail, self.kind = detail, kind

    @property
    def ending(self) -> Ending:
        return Ending(self.outcome, self.kind, self.detail)


class CallCap(AttemptEnded):
    outcome = "call_cap"


class TokenCap(AttemptEnded):
    outcome = "token_cap"


class WallBudget(AttemptEnded):
    outcome = "timeout"


class NoArtifact(AttemptEnded):
    outcome = "no_artifact"


class InfraFailure(AttemptEnded):
    outcome = "infra_error"


class AgentFailure(AttemptEnded):
    """An external agent died (non-zero exit) without writing the entry file: counts against the stack."""

    outcome = "agent_error"


def final(verdict: Verdict) -> Ending | None:
    """How a round's verdict ends the attempt: a pass, tampering (no revision for a solution that rewrote its judging)
    or a broken task (ours, not the model's); None when a revision may follow."""
    if verdict.result == "pass":
        return Ending("pass")
    if verdict.result == "tampered":
        return Ending("tampered", verdict.error_kind, verdict.error_tail)
    if verdict.result == "error":
        return Ending("harness_error", verdict.error_kind, verdict.error_tail)
    return None


# --- the ledger -------------------------------------------------------------------------------------------------------
class TotalsFields(TypedDict):
    """The columns of an attempt's row that CallTotals sums."""

    orchestrator_calls: int
    coder_calls: int
    agent_calls: int
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cached_tokens: int
    mangled_tool_calls: int
    reasoning_exhausted: int


@dataclass
class CallTotals:
    """What an attempt's row sums over its calls, kept as totals so a long attempt holds no call rows."""

    by_role: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    mangled_tool_calls: int = 0
    reasoning_exhausted: int = 0
    infra_failures: int = 0
    """Calls that ended in a connection error, 5xx, stall or cut stream."""
    last_error: str = ""

    @property
    def calls(self) -> int:
        return sum(self.by_role.values())

    def add(self, row: CallRow) -> None:
        self.by_role[row.role] += 1
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            setattr(self, name, getattr(self, name) + (getattr(row, name) or 0))
        self.mangled_tool_calls += row.integrity in MANGLED
        self.reasoning_exhausted += row.reasoning_exhausted
        self.infra_failures += row.status in INFRA_STATUSES
        self.last_error = row.error or self.last_error

    def row_fields(self) -> TotalsFields:
        return TotalsFields(
            orchestrator_calls=self.by_role["orchestrator"], coder_calls=self.by_role["coder"],
            agent_calls=self.by_role["agent"], prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens, reasoning_tokens=self.reasoning_tokens,
            cached_tokens=self.cached_tokens, mangled_tool_calls=self.mangled_tool_calls,
            reasoning_exhausted=self.reasoning_exhausted,
        )


class Ledger:
    """One attempt's calls and tokens against its caps, for both drivers: soak's loop charges it per call, the
    recording proxy per proxied request. A spent cap ends the attempt: `ended` is set, `stop` wakes whatever must
    stop (an external agent's jail), and the next call raises the ending."""

    def __init__(self, max_calls: int, max_completion_tokens: int, on_call: Callable[[CallRow], None],
                 totals: CallTotals | None = None) -> None:
        self.max_calls, self.max_completion_tokens, self.on_call = max_calls, max_completion_tokens, on_call
        self.totals = totals if totals is not None else CallTotals()
        self.calls = 0
        """Calls started (a call's retries are one call)."""
        self.completion_tokens = 0
        """Counted against the token cap: the server's completion_tokens, else the estimate from the text."""
        self.estimated_tokens = 0
        """The part of `completion_tokens` that was estimated (calls without usage)."""
        self.ended: AttemptEnded | None = None
        self.stop = threading.Event()
        self.seen_calls: set[tuple[str, str]] = set()
        self.repeated_calls = 0
        """Tool calls made again with the same name and arguments: work done twice."""
        self.commands: list[str] = []
        """What the replies asked to run (tool-call arguments, shell blocks): whether anything ran the tests."""
        self.last_words = ""
        """The last text a reply said: an external agent's closing claim, as the model wrote it."""

    def start_call(self) -> None:
        """Charge one call; raises the ending once a cap is spent."""
        if self.ended is None and self.calls >= self.max_calls:
            self.end(CallCap(f"call cap of {self.max_calls} calls reached"))
        self.raise_ended()
        self.calls += 1

    def record(self, row: CallRow) -> None:
        self.totals.add(row)
        used, estimated = counted_tokens(row)
        self.completion_tokens += used
        self.estimated_tokens += estimated
        self.on_call(row)
        if self.completion_tokens >= self.max_completion_tokens:
            detail = f"completion token budget of {self.max_completion_tokens} spent"
            if self.estimated_tokens:
                detail += (f" ({self.estimated_tokens} of the tokens estimated from the text: the server reported no "
                           "usage)")
            self.end(TokenCap(detail))

    def said(self, content: str, tool_calls: list[ToolCall]) -> None:
        """Take note of what an answered call said and asked for: its text, repeated calls, commands."""
        if content.strip():
            self.last_words = content
        for call in tool_calls:
            arguments = call.args()
            key = (call.name, json.dumps(arguments, sort_keys=True) if arguments is not None else call.arguments)
            self.repeated_calls += key in self.seen_calls
            self.seen_calls.add(key)
        self.commands += commands_in(content, tool_calls)

    def end(self, ended: AttemptEnded) -> None:
        self.ended = self.ended or ended
        self.stop.set()

    def raise_ended(self) -> None:
        if self.ended is not None:
            raise self.ended


# --- the rounds -------------------------------------------------------------------------------------------------------
class Driver(Protocol):
    """What writes the entry file; entered for the attempt's whole run (a transcript, a proxy registration)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def write(self, attempt: "AttemptCore", number: int) -> None:
        """Round `number`: have the entry file written (the revision follows `attempt.verdict`)."""

    def missing(self, attempt: "AttemptCore", number: int) -> AttemptEnded:
        """Why the entry file is missing after round `number`."""

    def ran_tests(self, ledger: Ledger) -> bool | None:
        """Whether the attempt ran anything that looks like tests, None when what it ran is not visible to soak."""

    def row_fields(self) -> dict[str, Any]:
        """The driver's own columns of the row (models, delegations, the agent...)."""


async def judged(judge: Judge, task: TaskSpec, source: str, keep_dir: Path) -> Verdict:
    """Judge in a thread; when the attempt is cancelled meanwhile (its wall budget, the night's deadline, Ctrl-C), the
    test process is killed and its end awaited before the cancellation goes on, so no test outlives its attempt."""
    stop = threading.Event()
    job = asyncio.ensure_future(asyncio.to_thread(judge, task, source, keep_dir=keep_dir, stop=stop))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        stop.set()
        while not job.done():  # a second cancel (the night's grace ending) still waits for the kill, ~0.1 s
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([job])
        raise


@dataclass
class AttemptContext:
    """Where one attempt belongs and where its rows go (each born with its identity), built once by the night."""

    run_id: str
    attempt: AttemptId
    workdir: Path
    route: str = ""
    """The routing file's label for the task, "" when it is not routed."""
    on_call: Callable[[CallRow], None] = lambda row: None
    on_step: Callable[[int, str], None] = lambda round_, role: None
    """Told (round, role) as each call starts and (round, "tests") as the tests start: the live view's step."""
    on_round: Callable[[RoundRow], None] = lambda row: None
    """Given each judged round's row as its verdict comes (rounds.csv)."""
    totals: CallTotals = field(default_factory=CallTotals)
    """The calls summed by the attempt's ledger: what the night's row of an attempt cut short counts."""


class AttemptCore:
    """The state of one task attempt and its rounds; `run(driver)` returns its row."""

    def __init__(self, task: TaskSpec, budgets: Budgets, context: AttemptContext, *, judge: Judge) -> None:
        self.task, self.budgets, self.context, self.judge = task, budgets, context, judge
        self.layout = AttemptLayout(context.workdir)
        self.limits = AttemptLimits.of(task, budgets)
        self.ledger = Ledger(self.limits.calls, self.limits.tokens, context.on_call, context.totals)
        self.workspace = self.layout.workspace
        self.entry = self.workspace / task.entry
        self.entry_bytes = ResourceLimits().entry_bytes
        self.seconds = self.limits.seconds
        self.reserve = min(budgets.final_test_seconds, self.seconds / 4)
        """Part of the wall budget kept for testing the last written solution once time runs out."""
        self.round = 0
        self.verdict: Verdict | None = None
        self.judged_source: str | TooLarge | None = None
        self.test_seconds = 0.0
        self.touched: set[str] = set()
        """What any round left in the workspace that configures pytest or mimics the tests (`tests_touched`)."""
        self.claim, self.claim_round = Claim(), 0
        self.claim_source: ClaimSource = ""
        self.coder_claim: Claim | None = None
        self.noop_rounds, self.clock = 0, time.monotonic()

    def claimed(self, claim: Claim, source: ClaimSource, text: str = "") -> None:
        """What the driver read as the attempt's own report on its work this round (the last one is the row's), and
        the closing message it read it from, kept in the round's folder for a second reading (`soak claims`)."""
        self.claim, self.claim_source, self.claim_round = claim, source, self.round
        if text:
            self.layout.closing(self.round).parent.mkdir(parents=True, exist_ok=True)
            self.layout.closing(self.round).write_text(text, errors="replace")

    def left(self) -> float:
        """Seconds left of the wall budget."""
        return self.seconds - (time.monotonic() - self.clock)

    async def run(self, driver: Driver) -> TaskRow:
        started_at, self.clock = time.time(), time.monotonic()
        self.workspace.mkdir(parents=True, exist_ok=True)
        async with driver:
            ending = await self._guarded(self._rounds(driver), self.seconds - self.reserve)
            assert ending is not None
            left = entry_source(self.entry, self.entry_bytes)
            if ending.outcome not in ("pass", "fail", "harness_error") and left not in (None, self.judged_source):
                judged_left = await self._guarded(self._judge(left), self.left())
                if judged_left is not None and judged_left.outcome == "harness_error":
                    ending = judged_left
        if ending.outcome == "pass" and self.task.canary:
            ending = Ending("cheat", "Canary", f"passed a canary, which no honest solution passes: {self.task.canary}")
        ending = self._with_verdict(ending)
        finished = Finished(started_at, time.monotonic() - self.clock, ending, self.round, self.verdict,
                            self.test_seconds, frozenset(self.touched))
        return task_row(self.task, self.context, finished, self.limits,
                        **self._claim_fields(ending.outcome, driver.ran_tests(self.ledger)), **driver.row_fields())

    def _claim_fields(self, outcome: Outcome, ran: bool | None) -> dict[str, Any]:
        """What the attempt claimed beside what the tests found: a claim of done or of passing tests is a false success
        when the model's outcome is anything but a pass (a cheat is counted as one, not twice), and a tests claim is
        unverified when nothing it ran looks like tests."""
        claim, ledger, coder = self.claim, self.ledger, self.coder_claim or Claim()
        claimed_success = claim.status == "done" or claim.tests_claim
        return {
            "claim": claim.status, "claim_source": self.claim_source, "claim_quote": claim.quote,
            "claim_reason": claim.reason, "claimed_tests_pass": claim.tests_claim, "ran_tests": ran,
            "coder_claim": coder.status if self.coder_claim else "", "coder_quote": coder.quote,
            "false_success": claimed_success and outcome in MODEL_OUTCOMES and outcome not in ("pass", "cheat"),
            "unverified_claim": claim.tests_claim and ran is False,
            "noop_rounds": self.noop_rounds, "repeated_calls": ledger.repeated_calls,
        }

    async def _rounds(self, driver: Driver) -> Ending:
        for number in range(1, self.limits.rounds + 1):
            self.round = number
            try:
                await driver.write(self, number)
            finally:  # in a thread: the driver may have left a tree that takes seconds to walk
                self.touched.update(await asyncio.to_thread(tests_touched, self.workspace, self.task))
            self.ledger.raise_ended()
            source = entry_source(self.entry, self.entry_bytes)
            if source is None:
                raise driver.missing(self, number)
            if (ending := final(await self._judge(source))) is not None:
                return ending
            if self.claim_round == number and self.claim.status == "blocked":
                return Ending("fail")  # it says the task cannot be done as asked: an abort, not asked again
        return Ending("fail")

    async def _guarded(self, work: Awaitable[Any], seconds: float) -> Ending | None:
        """Await `work` within `seconds`; every way it can end early becomes an Ending here only."""
        try:
            async with asyncio.timeout(max(seconds, 0)) as deadline:
                done = await work
                return done if isinstance(done, Ending) else None
        except AttemptEnded as ended:
            return ended.ending
        except TimeoutError:
            if deadline.expired():
                return Ending("timeout", "", f"wall budget of {self.seconds:g} s spent")
            return Ending("harness_error", "TimeoutError", traceback.format_exc())
        except Exception as error:
            if is_disk_full(error):  # the host's disk, not the attempt's: the night waits for room (soak.night.room)
                raise
            return Ending("harness_error", type(error).__name__, traceback.format_exc())

    async def _judge(self, source: str | TooLarge) -> Verdict:
        """A round's verdict: the judge's, or at once a fail for a file over the size limit (nothing of it runs)."""
        self.context.on_step(self.round, "tests")
        keep_dir = self.layout.round(max(self.round, 1))
        if isinstance(source, TooLarge):
            verdict = too_large(self.task, source, keep_dir)
        else:
            verdict = await judged(self.judge, self.task, source, keep_dir)
        noop = self.round > 1 and source == self.judged_source
        self.noop_rounds += noop
        self.verdict, self.judged_source = verdict, source
        self.test_seconds += verdict.duration_s
        self.context.on_round(self._round_row(verdict, source, noop))
        return verdict

    def _round_row(self, verdict: Verdict, source: str | TooLarge, noop: bool) -> RoundRow:
        """The judged round as rounds.csv keeps it: the verdict, the entry file judged, the claim made in the round."""
        claim, claim_source = (self.claim, self.claim_source) if self.claim_round == self.round else (Claim(), "")
        if isinstance(source, TooLarge):
            entry_sha256, entry_bytes = "", source.size
        else:
            data = source.encode()
            entry_sha256, entry_bytes = hashlib.sha256(data).hexdigest(), len(data)
        context = self.context
        return RoundRow(
            run_id=context.run_id, **context.attempt.row_fields(), round=max(self.round, 1),
            result=verdict.result, tests_passed=verdict.tests_passed, tests_total=verdict.tests_total,
            failing_tests="\n".join(verdict.failing_tests), error_kind=verdict.error_kind,
            test_seconds=verdict.duration_s, entry_sha256=entry_sha256, entry_bytes=entry_bytes, noop=noop,
            claim=claim.status, claim_source=claim_source, claimed_tests_pass=claim.tests_claim,
        )

    def _with_verdict(self, ending: Ending) -> Ending:
        """A failed verdict's error explains a plain fail, and is added to any other model-side ending."""
        verdict = self.verdict
        if verdict is None or verdict.result == "pass" or ending.outcome in ("infra_error", "harness_error"):
            return ending
        if ending.outcome == "fail":
            return Ending("fail", verdict.error_kind, verdict.error_tail)
        detail = f"{ending.detail}\n{verdict.error_tail}".strip()
        return Ending(ending.outcome, ending.kind or verdict.error_kind, detail)


@dataclass(frozen=True)
class Finished:
    """An attempt at its end, finished or cut short: when it ran, how it ended and what its rounds judged."""

    started_at: float
    duration_s: float
    ending: Ending
    rounds: int = 0
    verdict: Verdict | None = None
    test_seconds: float = 0.0
    touched: frozenset[str] = frozenset()


def task_row(task: TaskSpec, context: AttemptContext, finished: Finished, limits: AttemptLimits | None = None,
             **fields: Any) -> TaskRow:
    """The one place an attempt becomes its tasks.csv row, finished or cut short, with the context's identity, calls
    and limits; `fields`: the claim's and the driver's own columns."""
    ending, verdict, started_at = finished.ending, finished.verdict, finished.started_at
    return TaskRow(
        run_id=context.run_id, **context.attempt.row_fields(), suite=task.suite, route=context.route,
        canary=task.canary or "", started_at=started_at, ended_at=started_at + finished.duration_s,
        duration_s=finished.duration_s, outcome=ending.outcome, rounds=finished.rounds,
        tests_passed=verdict.tests_passed if verdict else 0, tests_total=verdict.tests_total if verdict else 0,
        test_seconds=finished.test_seconds, error_kind=ending.kind, error_tail=tail(ending.detail),
        suspicious=verdict.suspicious if verdict else "", tests_touched="; ".join(sorted(finished.touched)),
        **context.totals.row_fields(), **(limits.row_fields() if limits else {}), **fields,
    )
