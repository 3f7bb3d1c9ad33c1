"""One task end to end: the orchestrator delegates, the coder writes the entry file, the tests judge it, the real
error feeds a revision; each budget ends the task with its own outcome instead of an exception.

`workdir/transcript.jsonl` holds every chat message of the task, one per line, with two extra keys: `thread`
("orchestrator", "coder-<n>" or "direct") and `round`; strip them before replaying a thread. Assistant messages are
kept as the model wrote them (raw tool-call arguments, plus `reasoning` when there was any); the copy sent back to
the server has unparseable arguments replaced by {}.
"""

import asyncio
import contextlib
import json
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from soak.agent.tools import CODER_TOOLS, ORCHESTRATOR_TOOLS, fenced_code, refusal, run_file_tool
from soak.config import Budgets
from soak.llm.client import CallContext, CallResult, ChatModel, Role
from soak.llm.integrity import ToolCall, judge_call, required_params
from soak.llm.reply import counted_tokens
from soak.record.schema import CallRow, Integrity, Outcome, TaskRow
from soak.sandbox.judge import Verdict, tail
from soak.sandbox.judge import judge as judge_solution
from soak.tasks.spec import TaskSpec

Mode = Literal["delegate", "direct"]
REPORT_CHARS = 2_000

ORCHESTRATOR_SYSTEM = (
    "You lead a coding task. You cannot write files yourself: call the `delegate` tool with complete instructions "
    "for the coder, who writes the files. When the coder reports the file is written, reply with one short plain "
    "message (no tool call) to end your turn."
)
CODER_SYSTEM = (
    "You write code into the task workspace with the `write_file` tool (always the whole file) and may read files "
    "with `read_file`. Paths are relative to the workspace. When the file is written, reply with one short plain "
    "sentence and no tool call."
)


Judge = Callable[..., Verdict]
"""`judge(task, source, *, keep_dir=..., stop=...) -> Verdict`, synchronous (run in a thread by `judged`); a set
`stop` (threading.Event) must end the test run at once and kill its processes."""


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


class TaskEnded(Exception):
    """Ends the loop early; caught in one place and turned into the task's outcome."""

    outcome: Outcome = "harness_error"

    def __init__(self, detail: str, kind: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.kind = kind


class CallCap(TaskEnded):
    outcome = "call_cap"


class TokenCap(TaskEnded):
    outcome = "token_cap"


class NoArtifact(TaskEnded):
    outcome = "no_artifact"


class InfraFailure(TaskEnded):
    outcome = "infra_error"


def token_cap_detail(cap: int, estimated: int) -> str:
    detail = f"completion token budget of {cap} spent"
    if estimated:
        detail += f" ({estimated} of the tokens estimated from the text: the server reported no usage)"
    return detail


def opening(task: TaskSpec) -> str:
    """The task as the first message of an attempt: its prompt, stub, entry file and module."""
    stub = f"\n\nStarting point for {task.entry}:\n```python\n{task.stub}\n```" if task.stub else ""
    return (
        f"{task.prompt.strip()}{stub}\n\nTask id: {task.id}\n"
        f"Write the solution to `{task.entry}` in the workspace; the tests import it as module `{task.module}`."
    )


def final(verdict: Verdict) -> tuple[Outcome, str, str] | None:
    """How a round's verdict ends the attempt: a pass, tampering (no revision for a solution that rewrote its
    judging) or a broken task (ours, not the model's); None when a revision may follow."""
    if verdict.outcome == "pass":
        return "pass", "", ""
    if verdict.outcome == "tampered":
        return "tampered", verdict.error_kind, verdict.error_tail
    if verdict.outcome == "error":
        return "harness_error", verdict.error_kind, verdict.error_tail
    return None


def revision(verdict: Verdict, entry: str, ask: str = "") -> str:
    """The message that starts a revision round: the real error tail of the tests."""
    return (
        f"The tests failed ({verdict.tests_passed}/{verdict.tests_total} passed, {verdict.error_kind}):\n"
        f"{tail(verdict.error_tail)}\n\nThe tests are correct, fix the code in {entry}.{ask}"
    )


async def run_task(
    task: TaskSpec,
    *,
    orchestrator: ChatModel | None,
    coder: ChatModel,
    budgets: Budgets,
    mode: Mode,
    workdir: Path,
    run_id: str,
    cycle: int,
    on_call: Callable[[CallRow], None],
    route: str = "",
    judge: Judge | None = None,
    on_step: Callable[[int, str], None] | None = None,
) -> TaskRow:
    """Run one task attempt and return its row; task-level problems become outcomes, cancellation propagates.
    `on_step(round, role)` is told as each call starts, and `on_step(round, "tests")` as the tests start (a live
    view's current round and step)."""
    if judge is None:
        judge = judge_solution
    if mode == "delegate" and orchestrator is None:
        orchestrator = coder
    loop = _TaskLoop(task, orchestrator, coder, budgets, mode, Path(workdir), run_id, cycle, on_call, judge)
    loop.on_step = on_step or loop.on_step
    return await loop.run(route)


class _TaskLoop:
    """The state of one task attempt."""

    def __init__(
        self, task: TaskSpec, orchestrator: ChatModel | None, coder: ChatModel, budgets: Budgets, mode: Mode,
        workdir: Path, run_id: str, cycle: int, on_call: Callable[[CallRow], None], judge: Judge,
    ) -> None:
        self.task, self.orchestrator, self.coder, self.budgets, self.mode = task, orchestrator, coder, budgets, mode
        self.workdir, self.run_id, self.cycle, self.on_call, self.judge = workdir, run_id, cycle, on_call, judge
        self.workspace = workdir / "workspace"
        self.entry = self.workspace / task.entry
        self.seconds = task.budget_seconds or budgets.task_seconds
        self.max_calls = task.max_calls or budgets.max_calls
        self.rows: list[CallRow] = []
        self.calls = 0
        self.completion_tokens = 0
        """Counted against the token cap: the server's completion_tokens, else the estimate from the text."""
        self.estimated_tokens = 0
        """The part of `completion_tokens` that was estimated (calls without usage)."""
        self.delegations = 0
        self.fallback_writes = 0
        self.round = 0
        self.verdict: Verdict | None = None
        self.judged_source: str | None = None
        self.test_seconds = 0.0
        self.thread = ""
        self.on_step: Callable[[int, str], None] = lambda round_, role: None

    async def run(self, route: str) -> TaskRow:
        started_at, clock = time.time(), time.monotonic()
        self.workspace.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "transcript.jsonl").open("a") as self.transcript:
            ended = await self._guarded(self._rounds(), self.seconds - self._final_allowance())
            assert ended is not None
            outcome, kind, detail = ended
            if outcome not in ("pass", "fail", "harness_error") and self._unjudged():
                judged = await self._guarded(self._judge(), self.seconds - (time.monotonic() - clock))
                if judged is not None and judged[0] == "harness_error":
                    outcome, kind, detail = judged
        verdict = self.verdict
        failed = verdict is not None and verdict.outcome != "pass"
        if outcome == "fail" and verdict is not None:
            kind, detail = verdict.error_kind, verdict.error_tail
        elif outcome not in ("infra_error", "harness_error") and failed:
            kind, detail = kind or verdict.error_kind, f"{detail}\n{verdict.error_tail}".strip()
        ended_at, rows = time.time(), self.rows
        return TaskRow(
            run_id=self.run_id, cycle=self.cycle, task_id=self.task.id, suite=self.task.suite, route=route,
            started_at=started_at, ended_at=ended_at, duration_s=time.monotonic() - clock, outcome=outcome,
            rounds=self.round,
            orchestrator_calls=sum(row.role == "orchestrator" for row in rows),
            coder_calls=sum(row.role == "coder" for row in rows),
            delegations=self.delegations, fallback_writes=self.fallback_writes,
            prompt_tokens=sum(row.prompt_tokens or 0 for row in rows),
            completion_tokens=sum(row.completion_tokens or 0 for row in rows),
            reasoning_tokens=sum(row.reasoning_tokens or 0 for row in rows),
            cached_tokens=sum(row.cached_tokens or 0 for row in rows),
            tests_passed=verdict.tests_passed if verdict else 0, tests_total=verdict.tests_total if verdict else 0,
            test_seconds=self.test_seconds, error_kind=kind, error_tail=tail(detail),
            mangled_tool_calls=sum(row.integrity not in ("ok", "none") for row in rows),
            reasoning_exhausted=sum(row.reasoning_exhausted for row in rows),
            orchestrator_model=self.orchestrator.model if self.mode == "delegate" and self.orchestrator else "",
            coder_model=self.coder.model, suspicious=verdict.suspicious if verdict else "",
        )

    async def _guarded(self, work: Awaitable[Any], seconds: float) -> tuple[Outcome, str, str] | None:
        """Await `work` within `seconds`; every way it can end early becomes (outcome, error kind, detail) here only."""
        try:
            async with asyncio.timeout(max(seconds, 0)) as deadline:
                ended = await work
                return ended if isinstance(ended, tuple) else None
        except TaskEnded as end:
            return end.outcome, end.kind, end.detail
        except TimeoutError:
            if deadline.expired():
                return "timeout", "", f"wall budget of {self.seconds:g} s spent"
            return "harness_error", "TimeoutError", traceback.format_exc()
        except Exception as error:
            return "harness_error", type(error).__name__, traceback.format_exc()

    def _final_allowance(self) -> float:
        """Part of the wall budget kept for testing the last written solution once time runs out."""
        return min(self.budgets.final_test_seconds, self.seconds / 4)

    def _unjudged(self) -> bool:
        return self.entry.is_file() and self.entry.read_text(errors="replace") != self.judged_source

    # --- rounds --------------------------------------------------------------------------------

    async def _rounds(self) -> tuple[Outcome, str, str]:
        delegate = self.mode == "delegate"
        self.round, self.thread = 1, "orchestrator" if delegate else "direct"
        messages = [self._log({"role": "system", "content": ORCHESTRATOR_SYSTEM if delegate else CODER_SYSTEM})]
        self._say(messages, self._opening())
        for number in range(1, self.budgets.max_rounds + 1):
            self.round = number
            if number > 1:
                self.thread = "orchestrator" if delegate else "direct"
                self._say(messages, self._revision())
            if delegate:
                await self._orchestrate(messages)
            else:
                await self._code(messages)
            if not self.entry.is_file():
                raise NoArtifact(f"{self.task.entry} was not written in round {number}")
            if (ended := final(await self._judge())) is not None:
                return ended
        return "fail", "", ""

    def _opening(self) -> str:
        return opening(self.task)

    def _revision(self) -> str:
        assert self.verdict is not None
        ask = " Delegate the fix to the coder." if self.mode == "delegate" else ""
        return revision(self.verdict, self.task.entry, ask)

    async def _judge(self) -> Verdict:
        source = self.entry.read_text(errors="replace")
        keep = self.workdir / f"round-{max(self.round, 1)}"
        self.on_step(self.round, "tests")
        verdict = await judged(self.judge, self.task, source, keep)
        self.verdict, self.judged_source = verdict, source
        self.test_seconds += verdict.duration_s
        return verdict

    # --- conversations -------------------------------------------------------------------------

    async def _orchestrate(self, messages: list[dict[str, Any]]) -> None:
        """The orchestrator's turn: delegate until it answers without a tool call."""
        assert self.orchestrator is not None
        delegated = refused = False
        while True:
            self.thread = "orchestrator"
            owed = None if delegated or refused else "delegate"
            result, verdicts = await self._call(self.orchestrator, messages, ORCHESTRATOR_TOOLS, "orchestrator", owed)
            if not result.tool_calls:
                if not self.entry.is_file():
                    self._fallback(result.content)
                return
            for call, verdict in zip(result.tool_calls, verdicts, strict=True):
                if verdict == "ok":
                    self.delegations += 1
                    delegated = True
                    reply = await self._delegate(call.args()["instructions"])
                    self.thread = "orchestrator"
                else:
                    refused = True
                    reply = refusal(call, verdict, ORCHESTRATOR_TOOLS, self.task.entry)
                self._tool_reply(messages, call, reply)

    async def _delegate(self, instructions: str) -> str:
        self.thread = f"coder-{self.delegations}"
        messages = [self._log({"role": "system", "content": CODER_SYSTEM})]
        self._say(messages, f"{instructions}\n\n---\n\n{self._opening()}")
        return await self._code(messages)

    async def _code(self, messages: list[dict[str, Any]]) -> str:
        """A coder turn: tool calls until it answers without one (or runs out of turns); returns its report."""
        written: list[str] = []
        refused = False
        for _ in range(self.budgets.max_coder_turns):
            owed = None if self.task.entry in written or refused else "write_file"
            result, verdicts = await self._call(self.coder, messages, CODER_TOOLS, "coder", owed)
            if not result.tool_calls:
                if self.task.entry not in written and self._fallback(result.content):
                    written.append(self.task.entry)
                return self._report(written, result.content)
            for call, verdict in zip(result.tool_calls, verdicts, strict=True):
                if verdict == "ok":
                    reply, path = run_file_tool(call, self.workspace)
                    written += [path] if path else []
                else:
                    refused = True
                    reply = refusal(call, verdict, CODER_TOOLS, self.task.entry)
                self._tool_reply(messages, call, reply)
        return self._report(written, f"(stopped after {self.budgets.max_coder_turns} turns without a final answer)")

    def _report(self, written: list[str], said: str) -> str:
        files = ", ".join(dict.fromkeys(written)) or "none"
        return f"Files written: {files}.\nThe coder said: {said.strip()[:REPORT_CHARS] or '(nothing)'}"

    def _fallback(self, text: str) -> bool:
        """A fenced code block in a plain answer becomes the entry file (weak models and plain templates)."""
        code = fenced_code(text)
        if code is None:
            return False
        self.entry.write_text(code)
        self.fallback_writes += 1
        return True

    # --- calls and transcript ------------------------------------------------------------------

    async def _call(
        self, model: ChatModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]], role: Role,
        owed_tool: str | None,
    ) -> tuple[CallResult, list[Integrity]]:
        """One call; its answer joins the conversation and the transcript, which keeps each tool call's verdict
        against `tools` (`verdicts`, by call id) for the report."""
        if self.calls >= self.max_calls:
            raise CallCap(f"call cap of {self.max_calls} calls reached")
        self.calls += 1
        self.on_step(self.round, role)
        left = self.budgets.max_completion_tokens - self.completion_tokens
        context = CallContext(run_id=self.run_id, task_id=self.task.id, cycle=self.cycle, call_index=len(self.rows))
        result = await model.chat(
            messages, tools, role, max_tokens=min(model.max_tokens, left), context=context, on_row=self._record,
            owed_tool=owed_tool,
        )
        if not result.ok:
            raise InfraFailure(f"{role} call failed after {len(result.rows)} attempt(s): {result.error}", result.status)
        messages.append(result.message())
        required = required_params(tools)
        verdicts = [judge_call(call, required) for call in result.tool_calls]
        said = result.message(raw=True)
        self._log({**said, "verdicts": {call.id: v for call, v in zip(result.tool_calls, verdicts, strict=True)}}
                  if verdicts else said)
        if self.completion_tokens >= self.budgets.max_completion_tokens:
            raise TokenCap(token_cap_detail(self.budgets.max_completion_tokens, self.estimated_tokens))
        return result, verdicts

    def _record(self, row: CallRow) -> None:
        self.rows.append(row)
        used, estimated = counted_tokens(row)
        self.completion_tokens += used
        self.estimated_tokens += estimated
        self.on_call(row)

    def _say(self, messages: list[dict[str, Any]], text: str) -> None:
        messages.append(self._log({"role": "user", "content": text}))

    def _tool_reply(self, messages: list[dict[str, Any]], call: ToolCall, text: str) -> None:
        messages.append(self._log({"role": "tool", "tool_call_id": call.id, "content": text}))

    def _log(self, message: dict[str, Any]) -> dict[str, Any]:
        """Append the message to the transcript at once (a crash loses nothing said before it)."""
        line = {**message, "thread": self.thread, "round": self.round}
        self.transcript.write(json.dumps(line) + "\n")
        self.transcript.flush()
        return message
