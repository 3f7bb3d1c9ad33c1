"""The mangled tool calls of an attempt as its transcript keeps them, for the report's examples."""

import json

from soak.llm.integrity import ABSORBED_ARGS, ToolCall, tool_calls_of
from soak.record.schema import MANGLED, CallRow
from soak.record.transcript import TranscriptLine

EXCERPT_CHARS = 1200


def looks_mangled(call: ToolCall) -> bool:
    """What a transcript without verdicts still shows whatever tools were offered: a name that swallowed its
    arguments, or arguments that are no JSON object."""
    return not call.name or bool(ABSORBED_ARGS.search(call.name)) or call.args() is None


def is_mangled(call: ToolCall, line: TranscriptLine, integrity: str | None) -> bool:
    """By the loop's recorded verdict; in an older transcript (no verdicts), when its call's worst verdict in
    calls.csv is mangled or the call looks mangled (which a call judged ok never does)."""
    if line.verdicts is not None:
        return line.verdict(call.id) in MANGLED
    return integrity in MANGLED or looks_mangled(call)


def mangled_tool_calls(conversation: list[tuple[TranscriptLine, CallRow | None]]) -> list[str]:
    """Excerpts of the mangled tool calls of an attempt's conversation (AttemptRecord.conversation), in order, each as
    the model wrote it; an answer's call (its integrity) is the fallback of a transcript that kept no verdicts."""
    found: list[str] = []
    for line, answered in conversation:
        if line.role != "assistant":
            continue
        for call in tool_calls_of(line):
            if is_mangled(call, line, answered.integrity if answered else None):
                function = {"name": call.name, "arguments": call.arguments}
                found.append(json.dumps(function, ensure_ascii=False)[:EXCERPT_CHARS])
    return found
