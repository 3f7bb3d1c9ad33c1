"""The mangled tool calls of an attempt as its transcript keeps them, for the report's examples."""

import json

from soak.llm.integrity import ABSORBED_ARGS, ToolCall
from soak.record.layout import AttemptLayout
from soak.record.schema import MANGLED
from soak.record.transcript import TranscriptLine, read_transcript
from soak.report.attempt import tool_calls_of

EXCERPT_CHARS = 1200


def looks_mangled(call: ToolCall) -> bool:
    """The check left for a transcript without verdicts whose call row is gone: a name that swallowed its arguments,
    or arguments that are no JSON object (whatever tools were offered)."""
    return not call.name or bool(ABSORBED_ARGS.search(call.name)) or call.args() is None


def is_mangled(call: ToolCall, line: TranscriptLine, integrity: str | None) -> bool:
    """By the loop's recorded verdict; an older transcript (no verdicts) by its call's worst verdict in calls.csv,
    else by looks_mangled."""
    verdict = line.verdict(call.id) if line.verdicts is not None else integrity
    return verdict in MANGLED if verdict is not None else looks_mangled(call)


def mangled_tool_calls(attempt: AttemptLayout, integrity: list[str]) -> list[str]:
    """Excerpts of the mangled tool calls in the attempt's transcript, in order, each as the model wrote it.

    `integrity`: the verdicts of the attempt's answered calls in order (calls.csv), the i-th for the i-th
    assistant message, the fallback of a transcript written before verdicts were kept."""
    found: list[str] = []
    answers = iter(integrity)
    for line in read_transcript(attempt.transcript):
        if line.role != "assistant":
            continue
        verdict = next(answers, None)
        for call in tool_calls_of(line):
            if is_mangled(call, line, verdict):
                function = {"name": call.name, "arguments": call.arguments}
                found.append(json.dumps(function, ensure_ascii=False)[:EXCERPT_CHARS])
    return found
