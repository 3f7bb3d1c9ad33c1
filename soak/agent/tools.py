"""Running the tools of soak's own loop (their schemas are `llm.tools`): the file tools inside the workspace, the
refusal that answers a bad call, and the fenced-code fallback."""

from pathlib import Path
from typing import Any

from soak.llm.integrity import ToolCall
from soak.record.schema import Integrity

PYTHON_FENCES = ("", "python", "python3", "py")
READ_CHARS = 50_000


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
    # The verdict checked the text; resolving also catches symlinks that point out of the workspace. No path holds a
    # NUL byte (the OS refuses it before any file is touched).
    target = None if "\0" in path else (root / path).resolve()
    if target is None or not target.is_relative_to(root) or target == root:
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
