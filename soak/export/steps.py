"""An attempt's messages and calls.csv rows as ATIF steps, thread by thread (ATIF's one-LLM-call-per-step rule):
each message a step; each answer paired with the call that produced it (its tokens, timing and row: the record's one
pairing, soak.record.transcript.answering_calls); each tool result in the observation of the step that made the call;
and every call that produced no message of the transcript (a failed try before its retry, a call the attempt ended
in) a step of its own, so no call is lost."""

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from soak.export.atif import Metrics, Observation, ObservationResult, Step, ToolCall
from soak.export.conversation import Message
from soak.llm.integrity import tool_calls_of
from soak.record.identity import ATTEMPT_COLUMNS
from soak.record.schema import CallRow
from soak.record.transcript import TranscriptLine, answering_calls

ATTEMPT_FIELDS = {"schema_version", "run_id", *ATTEMPT_COLUMNS}
"""The call row's fields that name its attempt, the same for every step: the trajectory says them once."""
METRICS_EXTRA = ("reasoning_tokens", "first_byte_s", "ttft_s", "last_token_s", "duration_s", "decode_tps")
"""What a step's metrics hold beyond ATIF's own token counts: reasoning tokens and the call's timing."""


@dataclass
class Thread:
    """The steps of one conversation, and which step made each tool call."""

    steps: list[Step] = field(default_factory=list)
    callers: dict[str, Step] = field(default_factory=dict)

    def add(self, **fields: Any) -> Step:
        step = Step(step_id=len(self.steps) + 1, **fields)
        self.steps.append(step)
        for call in step.tool_calls or []:
            self.callers[call.tool_call_id] = step  # a reused id: its result follows the latest call
        return step

    def answer(self, call_id: str | None, result: ObservationResult) -> None:
        """A tool result joins the observation of the step that made the call; a result no step asked for is a
        system step of its own."""
        step = self.callers.get(call_id or "")
        if step is None:
            result.extra = {"soak": {"tool_call_id": call_id}}
            self.add(source="system", message="", observation=Observation(results=[result]))
            return
        result.source_call_id = call_id
        step.observation = step.observation or Observation(results=[])
        step.observation.results.append(result)


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def call_fields(call: CallRow) -> dict[str, Any]:
    """A call's part of its step: its start, model, tokens and timing."""
    more = {name: getattr(call, name) for name in METRICS_EXTRA if getattr(call, name) is not None}
    return {
        "timestamp": iso(call.started_at), "model_name": call.model, "llm_call_count": 1,
        "metrics": Metrics(prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                           cached_tokens=call.cached_tokens, extra=more or None),
    }


def soak_extra(round_: int, call: CallRow | None, **more: Any) -> dict[str, Any]:
    facts = {"round": round_, **more}
    if call is not None:
        facts["call"] = call.model_dump(mode="json", exclude=ATTEMPT_FIELDS, exclude_none=True)
    return {"soak": facts}


def tool_calls(line: TranscriptLine) -> list[ToolCall]:
    """The line's tool calls as ATIF wants them (arguments an object); the loop's verdict on each, where the
    transcript kept it, and arguments that are no JSON object as the model wrote them, under extra."""
    found = []
    for call in tool_calls_of(line):
        arguments = call.args()
        facts: dict[str, str] = {}
        if verdict := line.verdict(call.id):
            facts["integrity"] = verdict
        if arguments is None:
            facts["raw_arguments"] = call.arguments
        found.append(ToolCall(tool_call_id=call.id, function_name=call.name, arguments=arguments or {},
                              extra={"soak": facts} if facts else None))
    return found


def lone_call(thread: Thread, call: CallRow, round_: int) -> None:
    """A call with no message of the transcript: a failed try, or an answer the transcript does not hold."""
    note = "no answer: the call failed" if call.status != "ok" else "its answer is not in the transcript read"
    thread.add(source="agent", message="", **call_fields(call), extra=soak_extra(round_, call, note=note))


def walk(messages: list[Message], calls: Iterable[CallRow], default: str,
         thread_of: Callable[[str], str] | None = None) -> dict[str, Thread]:
    """The threads of an attempt (each line's own, or `thread_of` it), in the order they first speak; each answer with
    its call, the calls no message holds before it as steps of their own, and calls left at the end added to the
    thread that spoke last (else `default`)."""
    threads: dict[str, Thread] = {}
    queue = deque(sorted(calls, key=lambda call: (call.call_index, call.started_at)))
    said = iter(answering_calls([message.line for message in messages if not message.context], queue))
    answers = [None if message.context else next(said) for message in messages]
    name, round_ = default, 1
    for message, call in zip(messages, answers, strict=True):
        line = message.line
        name, round_ = thread_of(line.thread) if thread_of else line.thread, line.round
        thread = threads.setdefault(name, Thread())
        content = line.content or ""
        if line.role == "tool":
            thread.answer(line.tool_call_id, ObservationResult(content=line.content))
        elif line.role != "assistant":
            thread.add(source=line.role, message=content, extra=soak_extra(round_, None))
        elif message.context:
            thread.add(source="agent", message=content, is_copied_context=True, extra=soak_extra(round_, None))
        else:
            if any(waiting is call for waiting in queue):  # the calls before it produced no message
                while queue[0] is not call:
                    lone_call(thread, queue.popleft(), round_)
                queue.popleft()
            made = call_fields(call) if call else {"llm_call_count": 1}
            thread.add(source="agent", message=content, reasoning_content=line.reasoning or None,
                       tool_calls=tool_calls(line) or None, **made, extra=soak_extra(round_, call))
    for call in queue:
        lone_call(threads.setdefault(name, Thread()), call, round_)
    return threads
