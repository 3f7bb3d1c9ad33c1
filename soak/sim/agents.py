"""How the sim's scripted model drives external coding agents through their own way of writing a file.

Three protocols, picked from what the request offers (reply.py turns them into replies):

- **write_file**: a `write_file(path, content)` tool (soak's own coder, Hermes Agent): the coder's protocol in
  reply.py, write the entry file, then a plain text answer once the tool result arrives.
- **shell**: a shell tool taking a `command` string (`bash` for mini-swe-agent, Hermes' `terminal`): write the entry
  file with a quoted heredoc; once that succeeded, submit with `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` when the
  conversation asks for it (mini-swe-agent), else answer in plain text.
- **whole**: no tools and a system prompt describing aider's *whole* edit format: a text reply with the path line,
  the opening fence, the whole file and the closing fence.

Each protocol closes with words the claim detector reads as the scenario's ground truth: the text answer after a
write, the content sent with mini-swe-agent's submit, the words after aider's listing; an honest abort (a revision
round, `[honesty]`) is that closing alone, nothing written.

Everything here is plain data and text; what is written (the reference, a broken variant, the cheat) and what is
claimed stay with the Planner. Tool-call faults (name_absorbs_args, bad_json_args, path_escape: the heredoc's target)
and p_fenced apply to the tool protocols; aider always gets a well-formed listing. The task is found as for soak's
coder (`Task id:` or the prompt's text), and a conversation holding `The tests failed` (soak's revision message) is a
revision round.
"""

import json
import re
import shlex
from typing import Any

SHELL_TOOLS = ("bash", "terminal", "shell", "run_shell_command", "execute_bash", "execute_command")
"""Tool names read as a shell when they take a `command` string."""
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""mini-swe-agent's end-of-task command: `echo` it alone."""
HEREDOC = "SOAK_EOF"
WHOLE_FORMAT = "*file listing*"
"""Phrase of aider's whole edit format prompt ("You MUST use this *file listing* format")."""
OPENING = re.compile(r"^- Second line: opening (\S+)", re.MULTILINE)
CLOSING = re.compile(r"^- Final line: closing (\S+)", re.MULTILINE)
TOOL_ERROR = re.compile(
    r"\b(error|invalid|not valid|not allowed|outside|unknown|refused|denied|failed|cannot|could not)\b", re.IGNORECASE
)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def tool_names(tools: list[Any] | None) -> set[str]:
    return {str((tool.get("function") or {}).get("name")) for tool in tools or [] if isinstance(tool, dict)}


def shell_tool(tools: list[Any] | None) -> str | None:
    """The offered shell tool's name: one of SHELL_TOOLS whose parameters include `command`."""
    for tool in tools or []:
        function = (tool.get("function") or {}) if isinstance(tool, dict) else {}
        properties = (function.get("parameters") or {}).get("properties") or {}
        if function.get("name") in SHELL_TOOLS and "command" in properties:
            return str(function["name"])
    return None


def whole_fence(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """aider's whole-format fences (usually ``` and ```) when a system or user message describes that format."""
    for message in messages:
        text = text_of(message)
        if message.get("role") in ("system", "user") and WHOLE_FORMAT in text:
            opening, closing = OPENING.search(text), CLOSING.search(text)
            return (opening.group(1) if opening else "```", closing.group(1) if closing else "```")
    return None


def tool_failed(text: str) -> bool:
    """Whether a tool result reports a failure: a JSON result by its error / success / exit code fields (so a path or
    file name in a good result is never mistaken for an error), any other text by its wording."""
    try:
        data = json.loads(text)
    except ValueError:
        return bool(TOOL_ERROR.search(text))
    if not isinstance(data, dict):
        return bool(TOOL_ERROR.search(text))
    if data.get("error") or data.get("success") is False:
        return True
    code = next((data[key] for key in ("returncode", "exit_code", "exitCode") if key in data), 0)
    return code != 0


def heredoc(entry: str, source: str) -> str:
    """A shell command writing `source` to `entry` verbatim (quoted heredoc: no expansion)."""
    body = source if source.endswith("\n") else source + "\n"
    return f"cat <<'{HEREDOC}' > {shlex.quote(entry)}\n{body}{HEREDOC}"


def retarget(command: str, path: str) -> str:
    """The heredoc command writing to `path` instead (the path_escape fault)."""
    head, newline, rest = command.partition("\n")
    return f"{head.rsplit('>', 1)[0]}> {shlex.quote(path)}{newline}{rest}"


def listing(entry: str, source: str, fence: tuple[str, str], closing: str) -> str:
    """One aider whole-format file listing, then the closing words (aider's last reply is the claim read)."""
    body = source if source.endswith("\n") else source + "\n"
    return f"Here is `{entry}`.\n\n{entry}\n{fence[0]}\n{body}{fence[1]}\n\n{closing}\n"


def last_call(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """Name and parsed arguments (None if not a JSON object) of the last assistant message's first tool call."""
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if not calls or not isinstance(calls[0], dict):
            return "", None
        function = calls[0].get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "")
        except (TypeError, ValueError):
            arguments = None
        return str(function.get("name") or ""), arguments if isinstance(arguments, dict) else None
    return "", None


def written_source(messages: list[dict[str, Any]]) -> str | None:
    """What the last tool call wrote: a write_file call's content or a heredoc's body (None: no write seen)."""
    _, arguments = last_call(messages)
    if arguments is None:
        return None
    if isinstance(arguments.get("content"), str):
        return str(arguments["content"])
    command = str(arguments.get("command", ""))
    if command.startswith("cat <<") and HEREDOC in command:
        return command.split("\n", 1)[1].removesuffix(HEREDOC)
    return None


def shell_step(messages: list[dict[str, Any]], tool: str) -> str:
    """The shell protocol's next move: `write` the entry file, `submit` (mini-swe-agent) or say `done` in text.

    Write until a heredoc write came back without error (a user turn, a mangled call, a failed command: write
    again); then submit when the conversation mentions the submit command, else answer done.
    """
    last = messages[-1]
    name, arguments = last_call(messages)
    command = str((arguments or {}).get("command", ""))
    if last.get("role") != "tool" or name != tool:
        return "write"
    if HEREDOC in command and not tool_failed(text_of(last)):
        return "submit" if any(SUBMIT in text_of(m) for m in messages) else "done"
    if SUBMIT in command:
        return "submit"
    return "write"
