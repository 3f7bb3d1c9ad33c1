"""Tool-call integrity: the verdict on each tool call a model makes, judged against the tools offered."""

import json
import re
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel

from soak.record.schema import MANGLED, Integrity
from soak.record.transcript import TranscriptLine

PATH_TOOLS = frozenset({"write_file", "read_file"})
ABSORBED_ARGS = re.compile(r"[\s()<>=\"'{}\[\],:;]")
"""Characters a clean function name never has; seeing one means the name swallowed its arguments."""
SURROGATE = re.compile("[\ud800-\udfff]")
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def valid_text(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD. JSON may escape one ("\\ud800") and a model may write one; no file,
    CSV or JSON writer takes it, so text from the wire is made valid once, before anything of soak's reads it."""
    return SURROGATE.sub("\ufffd", text)


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """Raw JSON text as the server sent it."""

    def args(self) -> dict[str, Any] | None:
        """The arguments as an object, None when they are not a JSON object (nested past the parser's depth
        included). Strings that an escape made lone surrogates hold U+FFFD instead, as the reply's text does."""
        try:
            value = json.loads(self.arguments)
            if SURROGATE_ESCAPE.search(self.arguments):
                value = json.loads(valid_text(json.dumps(value, ensure_ascii=False)))
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None


def tool_calls_of(line: TranscriptLine) -> list[ToolCall]:
    """A transcript line's tool calls as the model wrote them (a call without a function keeps an empty name)."""
    found = []
    for item in line.tool_calls or []:
        function = item.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments")
        found.append(ToolCall(id=str(item.get("id", "")), name=str(function.get("name") or ""),
                              arguments=arguments if isinstance(arguments, str) else
                              "" if arguments is None else json.dumps(arguments, ensure_ascii=False)))
    return found


def path_escapes(path: str) -> bool:
    """True for absolute paths, home paths and `..` that climbs out of the workspace."""
    path = path.replace("\\", "/")
    if path.startswith(("/", "~")) or re.match(r"^[A-Za-z]:/", path):
        return True
    depth = 0
    for part in PurePosixPath(path).parts:
        depth += -1 if part == ".." else part != "."
        if depth < 0:
            return True
    return False


def required_params(tools: list[dict[str, Any]] | None) -> dict[str, list[str]]:
    """Offered tool name -> its required parameters."""
    return {t["function"]["name"]: t["function"].get("parameters", {}).get("required", []) for t in tools or []}


def judge_call(call: ToolCall, required: dict[str, list[str]]) -> Integrity:
    """The verdict on one tool call against the offered tools."""
    if call.name not in required:
        return "mangled_name" if not call.name or ABSORBED_ARGS.search(call.name) else "unknown_tool"
    args = call.args()
    if args is None or any(key not in args for key in required[call.name]):
        return "bad_json"
    if call.name in PATH_TOOLS:
        path = args["path"]
        if not isinstance(path, str):
            return "bad_json"
        if path_escapes(path):
            return "path_escape"
    return "ok"


def judge_tool_calls(calls: list[ToolCall], tools: list[dict[str, Any]] | None, finish_reason: str) -> Integrity:
    """The worst verdict over the call's tool calls (MANGLED's order: mangled > unknown > bad JSON > path escape)."""
    if not calls:
        return "missing" if finish_reason == "tool_calls" else "none"
    required = required_params(tools)
    verdicts = {judge_call(call, required) for call in calls}
    return next((v for v in MANGLED if v in verdicts), "ok")
