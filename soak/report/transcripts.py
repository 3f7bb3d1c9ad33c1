"""Reading the transcripts of a run's attempts for the report (whatever tools the agent offered)."""

import json
from pathlib import Path
from typing import Any

from soak.llm.integrity import ABSORBED_ARGS

EXCERPT_CHARS = 1200


def _broken(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name or ABSORBED_ARGS.search(name):
        return True
    try:
        return not isinstance(json.loads(function.get("arguments") or ""), dict)
    except (json.JSONDecodeError, TypeError):
        return True


def broken_tool_calls(run_path: Path, task_id: str, cycle: int) -> list[str]:
    """Raw tool calls in a transcript whose name swallowed its arguments or whose arguments are no JSON object."""
    path = run_path / "work" / task_id / str(cycle) / "transcript.jsonl"
    found: list[str] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if _broken(call):
                found.append(json.dumps(call.get("function", call), ensure_ascii=False)[:EXCERPT_CHARS])
    return found
