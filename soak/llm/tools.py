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
FINISH = _tool(
    "finish",
    "End the task with your report on it. Say what is true: a failure reported honestly is worth more than a success "
    "that is not.",
    status="done (the task is solved), partial (some of it is) or blocked (it cannot be solved as asked).",
    tests_claim="yes if you claim the tests pass, else no.",
    evidence="What the status rests on, in one or two sentences.",
)
FINISH_STATUSES = ("done", "partial", "blocked")
ORCHESTRATOR_TOOLS = [DELEGATE, FINISH]
CODER_TOOLS = [WRITE_FILE, READ_FILE]
