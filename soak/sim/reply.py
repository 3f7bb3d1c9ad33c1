"""What the simulated model says: role from the tools offered, task from the messages, the reply and its tokens."""

import ast
import json
import random
import re
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

from soak import python_ast
from soak.sim import agents
from soak.sim.agents import text_of, tool_failed
from soak.sim.scenario import Fault, Scenario, Span
from soak.tasks.spec import TaskSpec

TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]|\s+")
TASK_ID = re.compile(r"Task id:\s*`?([A-Za-z0-9][A-Za-z0-9_.\-]*)")
REVISION = "The tests failed"
WORDS = [
    "let", "me", "think", "about", "the", "edge", "cases", "first", "then", "check", "input", "format", "and",
    "expected", "output", "so", "function", "handles", "empty", "values", "negative", "numbers", "ties", "ordering",
    "large", "inputs", "without", "surprises",
]


def tokenize(text: str) -> list[str]:
    """The sim's tokenizer: words and single punctuation marks, leading whitespace attached (joins back exactly)."""
    return TOKEN.findall(text)


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[str]:
    """A deterministic token list for the prompt; a longer conversation extends a shorter one's list (prefix)."""
    tokens = tokenize(json.dumps(tools, sort_keys=True)) if tools else []
    for message in messages:
        tokens.append(f"<|{message.get('role', '')}|>")
        tokens += tokenize(text_of(message))
        if message.get("tool_calls"):
            tokens += tokenize(json.dumps(message["tool_calls"], sort_keys=True))
    return tokens


def draw(span: Span, rng: random.Random) -> float:
    return float(span) if isinstance(span, int | float) else rng.uniform(*span)


@dataclass
class PlannedCall:
    id: str
    name: str
    arguments: str


@dataclass
class SimReply:
    """One planned assistant message; the wire layer streams exactly these pieces and counts them."""

    role: str
    kind: str
    """delegate | write | fenced | done | submit (an agent's end-of-task call) | chat | budget (reasoning ate the
    budget)."""
    task_id: str = ""
    correct: bool | None = None
    """For a written solution: the reference (True) or a broken variant (False)."""
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    tool: PlannedCall | None = None
    tool_name_tokens: int = 0
    arguments: list[str] = field(default_factory=list)
    finish: str = "stop"
    faults: list[str] = field(default_factory=list)

    @property
    def completion_tokens(self) -> int:
        tool = self.tool_name_tokens + len(self.arguments) if self.tool else 0
        return len(self.reasoning) + len(self.content) + tool


def visible_tools(body: dict[str, Any], engine: str = "vllm") -> list[Any]:
    """The tools the model sees: none with tool_choice none, nor on llama-cpp-python (chatml-function-calling)
    whenever tool_choice is unset, since it then hides them."""
    choice = body.get("tool_choice")
    hidden = choice == "none" or (engine == "llama-cpp-python" and choice is None)
    return [] if hidden else list(body.get("tools") or [])


def protocol_of(body: dict[str, Any], engine: str = "vllm") -> str:
    """delegate | write_file | shell | whole (aider's edit format, no tools) | chat, from what the request offers."""
    tools = visible_tools(body, engine)
    names = agents.tool_names(tools)
    if "delegate" in names:
        return "delegate"
    if "write_file" in names:
        return "write_file"
    if agents.shell_tool(tools):
        return "shell"
    if not body.get("tools") and agents.whole_fence(body["messages"]):
        return "whole"
    return "chat"


def role_of(body: dict[str, Any], engine: str = "vllm") -> str:
    """Orchestrator if offered `delegate`; coder if it can write a file (`write_file`, a shell tool, aider's edit
    format); else chat."""
    protocol = protocol_of(body, engine)
    return "orchestrator" if protocol == "delegate" else "chat" if protocol == "chat" else "coder"


def named_tool(body: dict[str, Any]) -> str | None:
    """The function a request's tool_choice names, if it names one."""
    choice = body.get("tool_choice")
    return (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None


def find_task(messages: list[dict[str, Any]], tasks: dict[str, TaskSpec]) -> TaskSpec | None:
    """The `Task id: <id>` line, else the first task whose prompt opening appears in the conversation (also when an
    agent re-wrapped its lines: whitespace runs count as one space)."""
    texts = [text_of(m) for m in messages]
    for text in texts:
        for match in TASK_ID.finditer(text):
            task_id = match.group(1)
            task = tasks.get(task_id) or tasks.get(task_id.rstrip("."))
            if task:
                return task
    joined = "\n".join(texts)
    found = next((t for t in tasks.values() if t.prompt.strip()[:200] in joined), None)
    if found:
        return found
    flat = " ".join(joined.split())
    return next((t for t in tasks.values() if " ".join(t.prompt.split())[:200] in flat), None)


def broken_variant(task: TaskSpec) -> str:
    """The task's wrong.py, else the reference with every function body raising, so the tests surely fail."""
    if task.wrong:
        return task.wrong
    try:
        tree = python_ast.parse(task.reference)
    except SyntaxError:
        return "raise NotImplementedError('broken on purpose')\n"
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        return task.reference + "\nraise NotImplementedError('broken on purpose')\n"
    for node in functions:
        node.body = [python_ast.parse("raise NotImplementedError('broken on purpose')").body[0]]
    return ast.unparse(tree) + "\n"


class Planner:
    """Decides each reply from the conversation, the scenario and a per-request random stream."""

    def __init__(self, scenario: Scenario, tasks: list[TaskSpec], seed: int, engine: str) -> None:
        self.scenario, self.seed, self.engine = scenario, seed, engine
        self.tasks = {task.id: task for task in tasks}
        self._broken: dict[str, str] = {}

    def plan(self, body: dict[str, Any], rng: random.Random, faults: list[Fault], max_tokens: int) -> SimReply:
        messages, role = body["messages"], role_of(body, self.engine)
        task = find_task(messages, self.tasks)
        budget = next((f for f in faults if f.kind == "reasoning_budget"), None)
        if budget:
            reply = SimReply(role, "budget", reasoning=self.words(max_tokens, rng), finish="length",
                             faults=[budget.kind])
        elif role == "orchestrator":
            reply = self.orchestrator(messages, task)
        elif role == "coder":
            reply = self.coder(messages, task, rng, body)
        else:
            reply = self.chat(task, rng)
        reply.task_id = task.id if task else ""
        if self.scenario.reasoning.enabled and not budget:
            reply.reasoning = self.words(round(draw(self.scenario.reasoning.tokens, rng)), rng)
        if reply.tool:
            self.mangle(reply, body, rng, faults, task)
        return fit(reply, max_tokens)

    def words(self, count: int, rng: random.Random) -> list[str]:
        return [" " + word for word in rng.choices(WORDS, k=count)]

    def orchestrator(self, messages: list[dict[str, Any]], task: TaskSpec | None) -> SimReply:
        last = messages[-1]
        task_line = f"Task id: {task.id}\n" if task else ""
        entry = task.entry if task else "solution.py"
        if last.get("role") == "tool":
            if task and self.overiterates(task):
                return delegate(f"{task_line}Review `{entry}` once more and improve it; rewrite it in full.")
            return SimReply("orchestrator", "done", content=tokenize(f"Done: the coder wrote `{entry}`."))
        if REVISION in text_of(last):
            tail = text_of(last)[-3000:]
            return delegate(f"{task_line}{REVISION}. Fix `{entry}`; the error was:\n\n{tail}")
        if task:
            return delegate(f"{task_line}Write `{entry}` with write_file for the task below.\n\n{task.prompt}")
        return delegate(text_of(last) or "Solve the task.")

    def overiterates(self, task: TaskSpec) -> bool:
        setting = self.scenario.orchestrator
        if any(fnmatch(task.id, pattern) for pattern in setting.overiterate_tasks):
            return True
        # Keyed by task, not by request, so the same tasks over-iterate all night.
        return random.Random(f"{self.seed}:{task.id}").random() < setting.overiterate_rate

    def correct(self, messages: list[dict[str, Any]], rng: random.Random) -> bool:
        """Write the reference (else the broken variant)? p_fix once an error was fed back (`The tests failed`)."""
        revision = any(REVISION in text_of(m) for m in messages)
        setting = self.scenario.coder
        return rng.random() < (setting.p_fix if revision else setting.p_correct)

    def coder(
        self, messages: list[dict[str, Any]], task: TaskSpec | None, rng: random.Random, body: dict[str, Any]
    ) -> SimReply:
        """Writes the entry file by the protocol offered (or, weak-model style, answers with it fenced unless the
        call names its tool); see agents.py for the shell and whole-file protocols."""
        protocol = protocol_of(body, self.engine)
        entry = task.entry if task else "solution.py"
        done = SimReply("coder", "done", content=tokenize(f"I wrote `{entry}`."))
        if protocol == "whole":
            fence = agents.whole_fence(messages) or ("```", "```")
            correct = self.correct(messages, rng)
            text = agents.listing(entry, self.source(task, correct), fence)
            return SimReply("coder", "write", correct=correct, content=tokenize(text))
        tool = agents.shell_tool(visible_tools(body, self.engine)) if protocol == "shell" else "write_file"
        assert tool is not None
        last = messages[-1]
        if protocol == "shell":
            step = agents.shell_step(messages, tool)
            if step == "done":
                return done
            if step == "submit":
                call = PlannedCall("", tool, json.dumps({"command": f"echo {agents.SUBMIT}"}))
                return SimReply("coder", "submit", tool=call)
        elif last.get("role") == "tool" and previous_tool(messages) != "read_file" and not tool_failed(text_of(last)):
            return done
        correct = self.correct(messages, rng)
        fenced = rng.random() < self.scenario.coder.p_fenced and named_tool(body) != tool
        source = self.source(task, correct)
        if fenced:
            text = f"Here is `{entry}`:\n\n```python\n{source.rstrip()}\n```\n"
            return SimReply("coder", "fenced", correct=correct, content=tokenize(text))
        if protocol == "shell":
            arguments = json.dumps({"command": agents.heredoc(entry, source)})
        else:
            arguments = json.dumps({"path": entry, "content": source})
        return SimReply("coder", "write", correct=correct, tool=PlannedCall("", tool, arguments))

    def chat(self, task: TaskSpec | None, rng: random.Random) -> SimReply:
        if task:
            correct = rng.random() < self.scenario.coder.p_correct
            text = f"```python\n{self.source(task, correct).rstrip()}\n```\n"
            return SimReply("chat", "fenced", correct=correct, content=tokenize(text))
        words = self.words(max(1, round(draw(self.scenario.chat.tokens, rng))), rng)
        words[0] = words[0].strip().capitalize()
        return SimReply("chat", "chat", content=[*words, "."])

    def source(self, task: TaskSpec | None, correct: bool) -> str:
        if task is None:
            return "raise NotImplementedError('no task found in the prompt')\n"
        if correct:
            return task.reference
        if task.id not in self._broken:
            self._broken[task.id] = broken_variant(task)
        return self._broken[task.id]

    def mangle(
        self, reply: SimReply, body: dict[str, Any], rng: random.Random, faults: list[Fault], task: TaskSpec | None
    ) -> None:
        """Apply the first tool-call fault that fits this reply (stream_mangle only to streams)."""
        assert reply.tool is not None
        reply.tool.id = f"chatcmpl-tool-{rng.getrandbits(128):032x}"
        arguments = json.loads(reply.tool.arguments)
        for fault in faults:
            if fault.kind == "name_absorbs_args":
                kwargs = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
                reply.tool.name, reply.tool.arguments = f"{reply.tool.name}({kwargs})", "{}"
            elif fault.kind == "bad_json_args":
                reply.tool.arguments = reply.tool.arguments[:-2]
            elif fault.kind == "path_escape" and ("path" in arguments or reply.kind == "write"):
                entry = task.entry if task else "solution.py"
                path = fault.path or rng.choice([f"../{entry}", f"/tmp/soak-escape/{entry}"])
                if "path" in arguments:
                    arguments["path"] = path
                else:
                    arguments["command"] = agents.retarget(arguments["command"], path)
                reply.tool.arguments = json.dumps(arguments)
            elif fault.kind == "stream_mangle" and body.get("stream"):
                if fault.style == "in_content":
                    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
                    raw = f"<tool_call>\n<function={reply.tool.name}>\n{params}</function>\n</tool_call>"
                    reply.content, reply.tool, reply.finish = tokenize(raw), None, "stop"
                else:
                    reply.tool.arguments = ""
            else:
                continue
            reply.faults.append(fault.kind)
            break
        if reply.tool:
            reply.tool_name_tokens = len(tokenize(reply.tool.name))
            reply.arguments = tokenize(reply.tool.arguments)
            reply.finish = "tool_calls"


def delegate(instructions: str) -> SimReply:
    call = PlannedCall("", "delegate", json.dumps({"instructions": instructions}))
    return SimReply("orchestrator", "delegate", tool=call)


def previous_tool(messages: list[dict[str, Any]]) -> str:
    """Name of the tool called by the last assistant message."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or [{}]
            return str((calls[0].get("function") or {}).get("name", ""))
    return ""


def fit(reply: SimReply, max_tokens: int) -> SimReply:
    """Cut the reply at max_tokens (reasoning, then content, then the tool call), as an engine would."""
    left = max_tokens - len(reply.reasoning)
    if left < 0 or reply.completion_tokens <= max_tokens:
        if left < 0:
            reply.reasoning, reply.content, reply.tool, reply.finish = reply.reasoning[:max_tokens], [], None, "length"
        return reply
    reply.finish = "length"
    if len(reply.content) >= left:
        reply.content, reply.tool = reply.content[:left], None
        return reply
    left -= len(reply.content) + reply.tool_name_tokens
    if left < 0:
        reply.tool = None
    else:
        reply.arguments = reply.arguments[:left]
    return reply
