"""soak's own driver of the attempt core: the orchestrator delegates, the coder writes the entry file with its tools
(or a fenced block in a plain answer: a fallback write); the core judges it and feeds the real error back.

Every message goes to the attempt's transcript (soak.record.transcript) as it is said, with the index of its call:
assistant messages as the model wrote them (raw tool-call arguments, reasoning) with the loop's verdict on each tool
call; the copy sent back to the server has unparseable arguments replaced by {}.
"""

from typing import Any

from soak.agent.attempt import AttemptContext, AttemptCore, InfraFailure, Judge, Ledger, NoArtifact
from soak.agent.claims import Claim, claim_of, trimmed
from soak.agent.prompts import opening, revision
from soak.agent.tools import fenced_code, refusal, run_file_tool
from soak.config import Budgets
from soak.llm.client import CallContext, CallResult, ChatModel
from soak.llm.integrity import ToolCall, judge_call, required_params
from soak.llm.tools import CODER_TOOLS, FINISH_STATUSES, ORCHESTRATOR_TOOLS
from soak.record.schema import Integrity, Role, TaskRow
from soak.record.transcript import TranscriptLine, append_line
from soak.sandbox.judge import judge as judge_solution
from soak.tasks.spec import TaskSpec

REPORT_CHARS = 2_000

ORCHESTRATOR_SYSTEM = (
    "You lead a coding task. You cannot write files yourself: call the `delegate` tool with complete instructions "
    "for the coder, who writes the files. When the coder reports the file is written, call `finish` with your "
    "report to end your turn (or reply with one short plain message)."
)
CODER_SYSTEM = (
    "You write code into the task workspace with the `write_file` tool (always the whole file) and may read files "
    "with `read_file`. Paths are relative to the workspace. When the file is written, reply with one short plain "
    "sentence and no tool call."
)

FINISH_ERROR = f"error: finish takes status ({', '.join(FINISH_STATUSES)}), tests_claim (yes or no) and evidence"


def finish_claim(arguments: dict[str, Any]) -> Claim | None:
    """The orchestrator's report through `finish`, None when its status or tests claim is not one of the choices."""
    status, tests = (str(arguments.get(key, "")).strip().lower() for key in ("status", "tests_claim"))
    if status not in FINISH_STATUSES or tests not in ("yes", "no"):
        return None
    return Claim(status, tests == "yes", trimmed(str(arguments.get("evidence", ""))))  # type: ignore[arg-type]


async def run_task(task: TaskSpec, context: AttemptContext, *, orchestrator: ChatModel | None, coder: ChatModel,
                   budgets: Budgets, judge: Judge | None = None) -> TaskRow:
    """Run one task attempt and return its row; task-level problems become outcomes, cancellation propagates. With an
    `orchestrator` it delegates to the coder (mode delegate), without one the coder works alone (mode direct).
    `context.on_step(round, role)` is told as each call starts (a live view's current round and step)."""
    core = AttemptCore(task, budgets, context, judge=judge or judge_solution)
    return await core.run(Delegation(core, orchestrator, coder))


class Delegation:
    """The conversations of one attempt: the orchestrator's across rounds (or the coder's alone in mode direct) and
    one coder conversation per delegation."""

    def __init__(self, core: AttemptCore, orchestrator: ChatModel | None, coder: ChatModel) -> None:
        self.core, self.orchestrator, self.coder = core, orchestrator, coder
        self.task, self.budgets = core.task, core.budgets
        self.delegate = orchestrator is not None
        self.messages: list[dict[str, Any]] = []
        self.delegations = 0
        self.fallback_writes = 0
        self.thread = ""

    async def __aenter__(self) -> "Delegation":
        self.transcript = self.core.layout.transcript.open("a")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.transcript.close()

    def row_fields(self) -> dict[str, Any]:
        return {
            "delegations": self.delegations, "fallback_writes": self.fallback_writes, "coder_model": self.coder.model,
            "orchestrator_model": self.orchestrator.model if self.orchestrator else "",
        }

    def missing(self, core: AttemptCore, number: int) -> NoArtifact:
        return NoArtifact(f"{self.task.entry} was not written in round {number}")

    def ran_tests(self, ledger: Ledger) -> bool:
        """Never: soak's tools write and read files, nothing runs; a claim of passing tests is never checked."""
        return False

    async def write(self, core: AttemptCore, number: int) -> None:
        self.thread = "orchestrator" if self.delegate else "direct"
        if number == 1:
            self.messages = [self._log({"role": "system", "content": ORCHESTRATOR_SYSTEM if self.delegate
                                        else CODER_SYSTEM})]
            self._say(self.messages, opening(self.task))
        else:
            assert core.verdict is not None
            ask = " Delegate the fix to the coder." if self.delegate else ""
            self._say(self.messages, revision(core.verdict, self.task.entry, ask))
        if self.delegate:
            await self._orchestrate(self.messages)
        else:
            await self._code(self.messages)

    # --- conversations -------------------------------------------------------------------------

    async def _orchestrate(self, messages: list[dict[str, Any]]) -> None:
        """The orchestrator's turn: delegate until it reports through `finish` or answers without a tool call."""
        assert self.orchestrator is not None
        delegated = refused = finished = False
        while not finished:
            self.thread = "orchestrator"
            owed = None if delegated or refused else "delegate"
            result, verdicts = await self._call(self.orchestrator, messages, ORCHESTRATOR_TOOLS, "orchestrator", owed)
            if not result.tool_calls:
                self.core.claimed(claim_of(result.content), "model", result.content)
                if not self.core.entry.is_file():
                    self._fallback(result.content)
                return
            for call, verdict in zip(result.tool_calls, verdicts, strict=True):
                arguments = call.args() or {}
                if verdict == "ok" and call.name == "finish":
                    claim = finish_claim(arguments)
                    if claim is not None:
                        finished = True
                        self.core.claimed(claim, "tool")
                    reply = "Report recorded." if claim else FINISH_ERROR
                elif verdict == "ok" and call.name == "delegate":
                    self.delegations += 1
                    delegated = True
                    reply = await self._delegate(arguments["instructions"])
                    self.thread = "orchestrator"
                else:
                    refused = True
                    reply = refusal(call, verdict, ORCHESTRATOR_TOOLS, self.task.entry)
                self._tool_reply(messages, call, reply)

    async def _delegate(self, instructions: str) -> str:
        self.thread = f"coder-{self.delegations}"
        messages = [self._log({"role": "system", "content": CODER_SYSTEM})]
        self._say(messages, f"{instructions}\n\n---\n\n{opening(self.task)}")
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
                self._closing(result.content)
                return self._report(written, result.content)
            for call, verdict in zip(result.tool_calls, verdicts, strict=True):
                if verdict == "ok":
                    reply, path = run_file_tool(call, self.core.workspace)
                    written += [path] if path else []
                else:
                    refused = True
                    reply = refusal(call, verdict, CODER_TOOLS, self.task.entry)
                self._tool_reply(messages, call, reply)
        return self._report(written, f"(stopped after {self.budgets.max_coder_turns} turns without a final answer)")

    def _closing(self, text: str) -> None:
        """The coder's last words: the attempt's claim in mode direct, what the orchestrator may relay otherwise."""
        claim = claim_of(text)
        if self.delegate:
            self.core.coder_claim = claim
        else:
            self.core.claimed(claim, "model", text)

    def _report(self, written: list[str], said: str) -> str:
        files = ", ".join(dict.fromkeys(written)) or "none"
        return f"Files written: {files}.\nThe coder said: {said.strip()[:REPORT_CHARS] or '(nothing)'}"

    def _fallback(self, text: str) -> bool:
        """A fenced code block in a plain answer becomes the entry file (weak models and plain templates)."""
        code = fenced_code(text)
        if code is None:
            return False
        self.core.entry.write_text(code)
        self.fallback_writes += 1
        return True

    # --- calls and transcript ------------------------------------------------------------------

    async def _call(
        self, model: ChatModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]], role: Role,
        owed_tool: str | None,
    ) -> tuple[CallResult, list[Integrity]]:
        """One call; its answer joins the conversation and the transcript, which keeps each tool call's verdict
        against `tools` for the report."""
        ledger = self.core.ledger
        ledger.start_call()
        attempt = self.core.context
        attempt.on_step(self.core.round, role)
        left = self.budgets.max_completion_tokens - ledger.completion_tokens
        context = CallContext(attempt.run_id, attempt.attempt, ledger.totals.calls, ledger.record)
        result = await model.chat(
            messages, tools, role, max_tokens=min(model.max_tokens, left), context=context, owed_tool=owed_tool,
        )
        if not result.ok:
            raise InfraFailure(f"{role} call failed after {len(result.rows)} attempt(s): {result.error}", result.status)
        messages.append(result.message())
        ledger.said(result.content, result.tool_calls)
        required = required_params(tools)
        verdicts = [judge_call(call, required) for call in result.tool_calls]
        self._log(result.message(raw=True), dict(zip((call.id for call in result.tool_calls), verdicts, strict=True)),
                  result.rows[-1].call_index)
        ledger.raise_ended()
        return result, verdicts

    def _say(self, messages: list[dict[str, Any]], text: str) -> None:
        messages.append(self._log({"role": "user", "content": text}))

    def _tool_reply(self, messages: list[dict[str, Any]], call: ToolCall, text: str) -> None:
        messages.append(self._log({"role": "tool", "tool_call_id": call.id, "content": text}))

    def _log(self, message: dict[str, Any], verdicts: dict[str, Integrity] | None = None,
             call_index: int | None = None) -> dict[str, Any]:
        """Said now: an answer carries its call's index, any other line the next call's (the calls recorded so far)."""
        index = self.core.ledger.totals.calls if call_index is None else call_index
        append_line(self.transcript, TranscriptLine.of(message, self.thread, self.core.round, verdicts, index))
        return message
