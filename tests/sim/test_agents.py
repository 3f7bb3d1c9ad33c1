"""soak sim driving external agents, at the wire: requests shaped like Hermes Agent 0.19, mini-swe-agent 2.4 and
aider 0.86 send them (from agent-notes.md and Hermes' own tool schemas), answered through each one's protocol."""

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import openai
import pytest

from soak.agent.prompts import opening
from soak.paths import builtin_tasks_dir
from soak.sim.agents import SUBMIT, tool_failed
from soak.sim.reply import role_of
from soak.sim.server import Scenario, SimServer
from soak.tasks.suites import load_suites


def props(*names: str) -> dict[str, Any]:
    return {name: {"type": "string"} for name in names}


def fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


HERMES_WRITE_FILE = fn(
    "write_file",
    "Write content to a file, completely replacing existing content. Use this instead of echo/cat heredoc in "
    "terminal. Creates parent directories automatically. OVERWRITES the entire file — use 'patch' for targeted "
    "edits. Auto-runs syntax checks on .py/.json/.yaml/.toml ...",
    {
        "path": {"type": "string", "description": "Path to the file to write (will be created if it doesn't exist, "
                 "overwritten if it does)"},
        "content": {"type": "string", "description": "Complete content to write to the file"},
        "cross_profile": {"type": "boolean", "default": False, "description": "Opt out of the cross-profile soft "
                          "guard. ..."},
    },
    ["path", "content"],
)
HERMES_TERMINAL = fn(
    "terminal", "Execute shell commands on a Linux environment.",
    props("command", "background", "timeout", "workdir", "pty", "notify_on_complete", "watch_patterns"), ["command"],
)
HERMES_TOOLS = [
    fn("patch", "Targeted find-and-replace edits in files.",
       props("mode", "path", "old_string", "new_string", "replace_all", "patch", "cross_profile"), ["mode"]),
    fn("process", "Manage background processes.", props("action", "session_id", "data", "timeout", "offset", "limit"),
       ["action"]),
    fn("read_file", "Read a text file with line numbers.", props("path", "offset", "limit"), ["path"]),
    fn("search_files", "Search file contents or find files by name.",
       props("pattern", "target", "path", "file_glob", "limit", "offset", "output_mode", "context"), ["pattern"]),
    HERMES_TERMINAL,
    HERMES_WRITE_FILE,
]
HERMES_SYSTEM = (
    "You are Hermes Agent, an intelligent AI assistant created by Nous Research. You are helpful, knowledgeable, and "
    "direct. ...\nIf a tool, install, or network call fails and blocks the real path, say so directly and try an "
    "alternative. ..."
)
MINI_BASH = [fn("bash", "Execute a bash command",
                {"command": {"type": "string", "description": "The bash command to execute"}}, ["command"])]
MINI_SYSTEM = "You are a helpful assistant that can interact with a computer."
MINI_INSTRUCTIONS = (
    "\n\nYou can execute bash commands and edit files to implement the necessary changes.\n\n## Recommended Workflow"
    "\n...\n6. Submit your changes and finish your work by issuing the following command: "
    "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.\n   Do not combine it with any other command.\n"
)
MINI_FORMAT_ERROR = (
    "Tool call error:\n\n<error>\nNo tool calls found in the response. Every response MUST include at least one tool "
    "call.\n</error>\n\nHere is general guidance on how to submit correct toolcalls:\n\nEvery response needs to use "
    "the 'bash' tool at least once to execute commands.\n\nIf you want to end the task, please issue the following "
    "command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`\nwithout any other command."
)
AIDER_REMINDER = """To suggest changes to a file you MUST return the entire content of the updated file.
You MUST use this *file listing* format:

path/to/filename.js
```
// entire file content ...
// ... goes in between
```

Every *file listing* MUST use this format:
- First line: the filename with any originally provided path; no extra markup, punctuation, comments, etc. **JUST** \
the filename with path.
- Second line: opening ```
- ... entire content of the file ...
- Final line: closing ```

To suggest changes to a file you MUST return a *file listing* that contains the entire content of the file.
Create a new file you MUST return a *file listing* which includes an appropriate filename, including any appropriate \
path.

Reply in English.

"""
AIDER_SYSTEM = """Act as an expert software developer.
Take requests for changes to the supplied code.
If the request is ambiguous, ask questions.
Reply in English.

Once you understand the request you MUST:
1. Determine if any code changes are needed.
2. Explain any needed changes.
3. If changes are needed, output a copy of each file that needs changes.

""" + AIDER_REMINDER
AIDER_EXAMPLES = [
    {"role": "user", "content": "Change the greeting to be more casual"},
    {"role": "assistant", "content": 'Ok, I will:\n\n1. Switch the greeting text from "Hello" to "Hey".\n\n'
     'show_greeting.py\n```\nimport sys\n\ndef greeting(name):\n    print(f"Hey {name}")\n```\n'},
    {"role": "user", "content": "I switched to a new code base. Please don't consider the above files or try to edit "
     "them any longer."},
    {"role": "assistant", "content": "Ok."},
    {"role": "user", "content": "I am not sharing any files that you can edit yet."},
    {"role": "assistant", "content": "Ok."},
]
ERROR_TAIL = (
    "\n\nThe tests failed (3/7 passed, AssertionError):\nFAILED test_solution.py::test_basic_counts\n"
    "E   AssertionError: assert [('the', 2), ('cat', 1)] == [('the', 2), ('and', 1)]\n3 of 7 tests passed\n\n"
    "The tests are correct, fix the code in solution.py."
)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("suite")
    shutil.copytree(builtin_tasks_dir() / "word-frequency", root / "word-frequency")
    return f"dir:{root}"


@pytest.fixture(scope="module")
def task(suite: str) -> Any:
    return next(t for t in load_suites(suite) if t.id == "word-frequency")


@pytest.fixture
def serve(suite: str):
    servers: list[SimServer] = []

    def start(**fields: Any) -> SimServer:
        scn = Scenario.model_validate({"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0}} | fields)
        sim = SimServer(scn, suite=suite)
        sim.start()
        servers.append(sim)
        return sim

    yield start
    for sim in servers:
        sim.stop()


def client(sim: SimServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="sk-soak-test-key", max_retries=0, timeout=20)


def collect(stream: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": "", "name": "", "arguments": "", "id": None, "finish": None, "usage": None}
    for chunk in stream:
        if chunk.usage is not None:
            out["usage"] = chunk.usage
        for choice in chunk.choices:
            out["content"] += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                out["id"] = out["id"] or call.id
                out["name"] += call.function.name or ""
                out["arguments"] += call.function.arguments or ""
            out["finish"] = choice.finish_reason or out["finish"]
    return out


# --- Hermes Agent: streamed, its own write_file tool ---------------------------------------------------------------


def hermes(sim: SimServer, messages: list[dict[str, Any]], tools: list[dict[str, Any]] = HERMES_TOOLS) -> dict:
    stream = client(sim).chat.completions.create(
        model="fake-model", messages=[{"role": "system", "content": HERMES_SYSTEM}, *messages], tools=tools,
        stream=True, stream_options={"include_usage": True}, max_tokens=4096,
    )
    return collect(stream)


def after_call(messages: list[dict], out: dict, name: str, result: str) -> list[dict]:
    call = {"id": out["id"], "type": "function", "function": {"name": name, "arguments": out["arguments"]}}
    return [*messages, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": name, "tool_call_id": out["id"], "content": result}]


def test_hermes_writes_entry_with_its_write_file_then_answers_in_text(serve, task) -> None:
    sim = serve()
    messages = [{"role": "user", "content": opening(task)}]
    out = hermes(sim, messages)
    assert out["name"] == "write_file" and out["finish"] == "tool_calls" and out["usage"].completion_tokens > 0
    assert json.loads(out["arguments"]) == {"path": "solution.py", "content": task.reference}
    # Hermes' real result; a workspace path with "error" in it is no tool error.
    result = json.dumps({"bytes_written": len(task.reference), "dirs_created": True,
                         "lint": {"status": "ok", "output": ""}, "resolved_path": "/tmp/error-ws/solution.py",
                         "files_modified": ["/tmp/error-ws/solution.py"]})
    done = hermes(sim, after_call(messages, out, "write_file", result))
    assert done["finish"] == "stop" and not done["name"] and "solution.py" in done["content"]
    records = sim.stats.records
    assert [(r.role, r.kind, r.task_id, r.correct) for r in records] == [
        ("coder", "write", "word-frequency", True), ("coder", "done", "word-frequency", None)]


def test_hermes_tool_error_gets_another_write(serve, task) -> None:
    sim = serve()
    messages = [{"role": "user", "content": opening(task)}]
    out = hermes(sim, messages)
    error = json.dumps({"error": "write_file: missing required field 'path'. Re-emit the tool call with both 'path' "
                        "and 'content' set."})
    again = hermes(sim, after_call(messages, out, "write_file", error))
    assert again["name"] == "write_file" and json.loads(again["arguments"])["content"] == task.reference


def test_hermes_terminal_only_writes_by_heredoc_then_answers(serve, task, tmp_path: Path) -> None:
    sim = serve()
    messages = [{"role": "user", "content": opening(task)}]
    out = hermes(sim, messages, tools=[HERMES_TERMINAL])
    assert out["name"] == "terminal"
    subprocess.run(["bash", "-c", json.loads(out["arguments"])["command"]], cwd=tmp_path, check=True)
    assert (tmp_path / "solution.py").read_text() == task.reference
    result = json.dumps({"output": "", "exit_code": 0, "error": None})
    done = hermes(sim, after_call(messages, out, "terminal", result), tools=[HERMES_TERMINAL])
    assert done["finish"] == "stop" and not done["name"] and SUBMIT not in done["content"]


# --- mini-swe-agent: non-streamed, one bash tool, submit by echo -----------------------------------------------------


def mini_first(task: Any, prompt: str | None = None) -> list[dict[str, Any]]:
    return [{"role": "system", "content": MINI_SYSTEM},
            {"role": "user", "content": f"Please solve this issue: {prompt or opening(task)}{MINI_INSTRUCTIONS}"}]


def mini(sim: SimServer, messages: list[dict[str, Any]]) -> Any:
    return client(sim).chat.completions.create(model="fake-model", messages=messages, tools=MINI_BASH)


def observed(messages: list[dict], reply: Any, returncode: int, output: str = "") -> list[dict]:
    message = reply.choices[0].message
    call = message.tool_calls[0]
    observation = f'{{\n  "returncode": {returncode},\n  "output": {json.dumps(output)}\n}}'
    return [*messages, message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": observation}]


def run_command(reply: Any, cwd: Path) -> str:
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "bash" and reply.choices[0].finish_reason == "tool_calls"
    command = json.loads(call.function.arguments)["command"]
    subprocess.run(["bash", "-c", command], cwd=cwd, check=True, capture_output=True)
    return command


def test_mini_writes_by_quoted_heredoc_then_submits(serve, task, tmp_path: Path) -> None:
    sim = serve()
    messages = mini_first(task)
    write = mini(sim, messages)
    command = run_command(write, tmp_path)
    assert command.startswith("cat <<'SOAK_EOF' > solution.py\n") and command.endswith("\nSOAK_EOF")
    assert (tmp_path / "solution.py").read_text() == task.reference
    submit = mini(sim, observed(messages, write, 0))
    call = submit.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"command": f"echo {SUBMIT}"}
    assert [(r.kind, r.stream, r.correct) for r in sim.stats.records] == [("write", False, True),
                                                                        ("submit", False, None)]
    assert sim.stats.by_role == {"coder": 2}


def test_mini_rewrites_after_failed_command_or_format_error(serve, task) -> None:
    sim = serve()
    messages = mini_first(task)
    write = mini(sim, messages)
    failed = mini(sim, observed(messages, write, 1, "bash: solution.py: Permission denied"))
    assert "SOAK_EOF" in json.loads(failed.choices[0].message.tool_calls[0].function.arguments)["command"]
    lost = [*messages, {"role": "assistant", "content": "Let me think."},
            {"role": "user", "content": MINI_FORMAT_ERROR}]
    retry = mini(sim, lost)
    assert "SOAK_EOF" in json.loads(retry.choices[0].message.tool_calls[0].function.arguments)["command"]


def test_mini_task_found_from_prompt_text_alone(serve, task) -> None:
    sim = serve()
    rewrapped = " ".join(task.prompt.split())  # an agent that re-flowed the prompt and dropped the task id
    mini(sim, mini_first(task, rewrapped))
    assert sim.stats.records[0].task_id == "word-frequency" and sim.stats.records[0].correct


# --- aider: streamed text in the whole edit format -------------------------------------------------------------------


def aider(sim: SimServer, prompt: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": AIDER_SYSTEM}, *AIDER_EXAMPLES,
                {"role": "user", "content": f"{prompt}\n\n{AIDER_REMINDER}"}]
    return collect(client(sim).chat.completions.create(model="fake-model", messages=messages, stream=True,
                                                       temperature=0))


def whole_edits(text: str) -> dict[str, str]:
    """Files in a whole-format reply, parsed as aider's WholeFileCoder does: the line before an opening fence."""
    lines, edits, index = text.splitlines(keepends=True), {}, 0
    while index < len(lines):
        if lines[index].startswith("```") and index > 0:
            name = lines[index - 1].strip()
            end = next(j for j in range(index + 1, len(lines)) if lines[j].startswith("```"))
            edits[name] = "".join(lines[index + 1 : end])
            index = end
        index += 1
    return edits


def test_aider_gets_a_whole_file_listing(serve, task) -> None:
    sim = serve()
    out = aider(sim, opening(task))
    assert out["finish"] == "stop" and not out["name"]
    assert whole_edits(out["content"]) == {"solution.py": task.reference}
    record = sim.stats.records[0]
    assert (record.role, record.kind, record.correct, record.stream) == ("coder", "write", True, True)


def test_aider_other_fence_is_followed(serve, task) -> None:
    sim = serve()
    system = AIDER_SYSTEM.replace("opening ```", "opening ````").replace("closing ```", "closing ````")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": opening(task)}]
    out = collect(client(sim).chat.completions.create(model="m", messages=messages, stream=True))
    assert f"solution.py\n````\n{task.reference}````\n" in out["content"]


# --- the scenario's choices hold for agents ---------------------------------------------------------------------------


def written(protocol: str, sim: SimServer, prompt: str) -> str:
    """The entry file's content one agent request writes."""
    if protocol == "hermes":
        return json.loads(hermes(sim, [{"role": "user", "content": prompt}])["arguments"])["content"]
    if protocol == "aider":
        return whole_edits(aider(sim, prompt)["content"])["solution.py"]
    reply = mini(sim, [{"role": "system", "content": MINI_SYSTEM}, {"role": "user", "content": prompt}])
    command = json.loads(reply.choices[0].message.tool_calls[0].function.arguments)["command"]
    return command.split("\n", 1)[1].removesuffix("SOAK_EOF")


@pytest.mark.parametrize("protocol", ["hermes", "mini", "aider"])
def test_revise_broken_first_then_reference_once_the_error_is_fed_back(serve, task, protocol: str) -> None:
    sim = serve(coder={"p_correct": 0.0, "p_fix": 1.0})
    assert written(protocol, sim, opening(task)) == task.wrong
    assert written(protocol, sim, opening(task) + ERROR_TAIL) == task.reference
    assert [r.correct for r in sim.stats.records] == [False, True]


def faulted(kind: str) -> dict[str, Any]:
    return {"faults": [{"kind": kind, "at_requests": [1], "roles": ["coder"]}]}


def test_mangled_bash_calls(serve, task, tmp_path: Path) -> None:
    absorbed = mini(serve(**faulted("name_absorbs_args")), mini_first(task)).choices[0].message.tool_calls[0]
    assert absorbed.function.name.startswith('bash(command="cat <<') and absorbed.function.arguments == "{}"
    bad = mini(serve(**faulted("bad_json_args")), mini_first(task)).choices[0].message.tool_calls[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad.function.arguments)
    escape = {"faults": [{"kind": "path_escape", "at_requests": [1], "roles": ["coder"], "path": "../solution.py"}]}
    sim = serve(**escape)
    inner = tmp_path / "ws"
    inner.mkdir()
    run_command(mini(sim, mini_first(task)), inner)
    assert (tmp_path / "solution.py").read_text() == task.reference and not (inner / "solution.py").exists()
    assert sim.stats.records[0].faults == ["path_escape"]


def test_mangled_hermes_write(serve, task) -> None:
    out = hermes(serve(**faulted("name_absorbs_args")), [{"role": "user", "content": opening(task)}])
    assert out["name"].startswith('write_file(path="solution.py"') and out["arguments"] == "{}"


def test_roles_and_hidden_tools(task) -> None:
    user = [{"role": "user", "content": opening(task)}]
    assert role_of({"messages": user, "tools": MINI_BASH}) == "coder"
    assert role_of({"messages": user, "tools": MINI_BASH, "tool_choice": "none"}) == "chat"
    assert role_of({"messages": user, "tools": MINI_BASH}, engine="llama-cpp-python") == "chat"
    assert role_of({"messages": [{"role": "system", "content": AIDER_SYSTEM}, *user]}) == "coder"
    assert role_of({"messages": user}) == "chat"
    assert role_of({"messages": user, "tools": [fn("bash", "", props("script"), [])]}) == "chat"


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ('{"returncode": 0, "output": "error: none"}', False),
        ('{"returncode": 2, "output": ""}', True),
        ('{"output": "", "exit_code": 1, "error": null}', True),
        ('{"bytes_written": 3, "resolved_path": "/ws/unknown-error/solution.py"}', False),
        ('{"success": false}', True),
        ("wrote 312 bytes to solution.py", False),
        ("error: arguments are not valid JSON", True),
    ],
)
def test_tool_failed_reads_json_results_by_their_fields(text: str, failed: bool) -> None:
    assert tool_failed(text) is failed
