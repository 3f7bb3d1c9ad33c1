"""The tools offered to each role, and the integrity verdict on the tool calls a model makes."""

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from soak.record import Integrity

PATH_TOOLS = frozenset({"write_file", "read_file"})
ABSORBED_ARGS = re.compile(r"[\s()<>=\"'{}\[\],:;]")
"""Characters a clean function name never has; seeing one means the name swallowed its arguments."""
BAD_VERDICTS: tuple[Integrity, ...] = ("mangled_name", "unknown_tool", "bad_json", "path_escape")
"""Worst first."""
PYTHON_FENCES = ("", "python", "python3", "py")
READ_CHARS = 50_000


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string", "description": text} for key, text in params.items()},
                "required": list(params),
            },
        },
    }


DELEGATE = _tool(
    "delegate",
    "Hand a coding job to the coder, who writes files in the task workspace. Returns the coder's report.",
    instructions="What the coder must do: the files to write and the behaviour required.",
)
WRITE_FILE = _tool(
    "write_file",
    "Write a whole file in the task workspace (creates or replaces it).",
    path="File path relative to the workspace, e.g. solution.py.",
    content="The complete file content.",
)
READ_FILE = _tool("read_file", "Read a file from the task workspace.", path="File path relative to the workspace.")
ORCHESTRATOR_TOOLS = [DELEGATE]
CODER_TOOLS = [WRITE_FILE, READ_FILE]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """Raw JSON text as the server sent it."""

    def args(self) -> dict[str, Any] | None:
        """The arguments as an object, None when they are not a JSON object."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


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


def verdict_of(call: ToolCall, required: dict[str, list[str]]) -> Integrity:
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
    """The worst verdict over the call's tool calls (mangled > unknown > bad JSON > path escape)."""
    if not calls:
        return "missing" if finish_reason == "tool_calls" else "none"
    required = required_params(tools)
    verdicts = {verdict_of(call, required) for call in calls}
    return next((v for v in BAD_VERDICTS if v in verdicts), "ok")


def signature(tool: dict[str, Any]) -> str:
    function = tool["function"]
    return f"{function['name']}({', '.join(function['parameters']['properties'])})"


def refusal(call: ToolCall, verdict: Integrity, tools: list[dict[str, Any]], entry: str) -> str:
    """The tool message answering a bad tool call, so the model can correct itself."""
    offered = " and ".join(signature(tool) for tool in tools)
    if verdict == "bad_json":
        return f"error: the arguments of {call.name} are not a JSON object with every required field; tools: {offered}"
    if verdict == "path_escape":
        return f"error: paths must stay inside the workspace; write {entry} with a relative path"
    return f"error: there is no tool named {call.name!r}; the tools are {offered}"


def run_file_tool(call: ToolCall, workspace: Path) -> tuple[str, str | None]:
    """Run a judged-ok write_file / read_file inside `workspace`: (reply, path written or None)."""
    args = call.args() or {}
    path = args["path"]
    root = workspace.resolve()
    target = (root / path).resolve()
    # The verdict checked the text; resolving also catches symlinks that point out of the workspace.
    if not target.is_relative_to(root) or target == root:
        return f"error: {path!r} is not a file inside the workspace", None
    try:
        if call.name == "read_file":
            return target.read_text(errors="replace")[:READ_CHARS], None
        content = args["content"]
        if not isinstance(content, str):
            return "error: content must be a string holding the whole file", None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    except OSError as error:
        return f"error: {path}: {error.strerror or error}", None
    return f"wrote {path} ({len(content)} characters)", str(target.relative_to(root))


def fenced_code(text: str) -> str | None:
    """The longest fenced python (or unlabelled) block of a reply, if any; an unclosed last block counts too."""
    blocks: list[str] = []
    block: list[str] | None = None
    language = ""
    for line in (text or "").splitlines(keepends=True):
        fence = line.strip().startswith("```")
        if block is None and fence:
            block, language = [], line.strip()[3:].strip().lower()
        elif block is not None and fence:
            if language in PYTHON_FENCES:
                blocks.append("".join(block))
            block = None
        elif block is not None:
            block.append(line)
    if block is not None and language in PYTHON_FENCES:
        blocks.append("".join(block))
    blocks = [code for code in blocks if code.strip()]
    return max(blocks, key=len) if blocks else None
