"""What an agent ran, read from its replies: the commands it asked for (tool-call arguments, fenced shell blocks) and
whether any of them runs tests, beside what it claimed (soak.agent.claims)."""

import re
from typing import Any

from soak.llm.integrity import ToolCall

WRAPPER = re.compile(r"^(?:\w+=\S*\s+|(?:timeout|time|nice|sudo|env|command|exec)\s+(?:-\S+\s+)*(?:\d+\S*\s+)?|"
                     r"(?:uv|poetry|pipenv|hatch|pdm|rye)\s+run\s+|(?:ba|z)?sh\s+-\w*c\s+)")
TEST_COMMAND = re.compile(
    r"^(?:py\.?test\b|python[\d.]*\s+(?:-\S+\s+)*-m\s+(?:pytest|unittest)\b|"
    r"python[\d.]*\s+(?:-\S+\s+)*(?:\S*/)?(?:test_\w*|\w*_test)\.py\b|(?:tox|nox)\b|"
    r"make\s+(?:\S+\s+)*?(?:test|tests|check)\b)")
COMMAND_CHARS = 4096
"""How much of each command (between `&&`, `;` and pipes) is read: a test run names itself in its first words, and the
bound keeps an adversarial command from holding the event loop."""


def ran_tests(commands: list[str]) -> bool:
    """Whether any command looks like running tests: pytest, `python -m pytest`, `python -m unittest`,
    `python test_*.py`, tox, nox, `make test`; also behind `&&`, `;`, pipes, env assignments, `timeout`, `uv run`
    and `sh -c`. Installing pytest or reading a test file is not running it."""
    for command in commands:
        for segment in re.split(r"&&|\|\||[;|\n]", command):
            segment = segment[:COMMAND_CHARS].strip().strip("'\"()").strip()
            while (wrapper := WRAPPER.match(segment)) is not None and wrapper.end() > 0:
                segment = segment[wrapper.end():].strip().strip("'\"")
            if TEST_COMMAND.match(segment):
                return True
    return False


SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
"""A fenced block an agent runs as a shell command (mini-swe-agent's actions are such blocks in plain text)."""


COMMAND_KEYS = ("command", "cmd", "commands", "script", "argv", "args")
"""Tool arguments that hold a command to run (Hermes' `terminal`, OpenHands' `execute_bash`, ...); a file's content is
never read as one."""


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [" ".join(map(str, value))] if isinstance(value, list) else []


def commands_in(content: str, tool_calls: list[ToolCall]) -> list[str]:
    """What a reply asked to run: its tool calls' command arguments and its fenced shell blocks."""
    found = list(SHELL_BLOCK.findall(content or ""))
    for call in tool_calls:
        arguments = call.args() or {}
        found += [text for key in COMMAND_KEYS for text in strings_in(arguments.get(key))]
    return found
