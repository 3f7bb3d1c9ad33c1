"""The tools soak's own loop offers each role, as the JSON schemas the model is sent. Beside the integrity verdict
that judges calls against them, so the loop and the doctor's tool-call probe offer the same tools."""

from typing import Any


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
