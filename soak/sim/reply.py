"""What the simulated model says: role from the tools offered, task from the messages, the reply and its tokens."""

import ast
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any, Literal

from soak import python_ast
from soak.sim import agents
from soak.sim.agents import text_of, tool_failed
from soak.sim.cheat import cheating
from soak.sim.scenario import Fault, Scenario, Span
from soak.tasks.spec import TaskSpec

TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]|\s+")
TASK_ID = re.compile(r"Task id:\s*`?([A-Za-z0-9][A-Za-z0-9_.\-]*)")
REVISION = "The tests failed"
OVERCLAIM = "Done. All tests pass."
"""The overclaim: success and passing tests, whatever was written (the sim never runs the tests)."""
ABORT = "I cannot make these tests pass: they contradict the task, so no implementation can satisfy them."
"""The honest abort of a revision round (blocked)."""
Written = Literal["reference", "broken", "cheat"]
"""What a write puts in the entry file: the task's reference, a broken variant, or the cheat (soak.sim.cheat)."""
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
    """delegate | write | fenced | done | submit (an agent's end-of-task call) | finish (the orchestrator's report
    tool) | chat | budget (reasoning ate the budget)."""
    task_id: str = ""
    correct: bool | None = None
    """For a written solution: the reference (True) or not (False: a broken variant or the cheat)."""
    cheat: bool = False
    """The written solution is the cheat that answers the visible asserts."""
    claim: str = ""
    """done | partial | blocked: what the reply's closing words claim (the ground truth for soak's claim reading);
    "" when the reply claims nothing."""
    tests_claim: bool = False
    """The closing words claim the tests pass."""
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
    """Decides each reply from the conversation, the scenario and a per-request random stream; `elapsed` is the
    seconds since the server started, for the scenario's `[drift]` (the server passes its clock)."""

    def __init__(
        self, scenario: Scenario, tasks: list[TaskSpec], seed: int, engine: str,
        elapsed: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.scenario, self.seed, self.engine, self.elapsed = scenario, seed, engine, elapsed
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
            reply = self.orchestrator(messages, task, body)
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

    def orchestrator(self, messages: list[dict[str, Any]], task: TaskSpec | None, body: dict[str, Any]) -> SimReply:
        """Delegate, then close on the coder's report (through `finish` when offered); in a revision round delegate
        the fix, or abort when the scenario says so."""
        last = messages[-1]
        task_line = f"Task id: {task.id}\n" if task else ""
        entry = task.entry if task else "solution.py"
        reports = "finish" in agents.tool_names(visible_tools(body, self.engine))
        if last.get("role") == "tool":
            if task and self.overiterates(task):
                return delegate(f"{task_line}Review `{entry}` once more and improve it; rewrite it in full.")
            finished = unfinished(entry, "I") not in text_of(last)
            return self.closing("orchestrator", task, finished, "the coder", reports)
        if REVISION in text_of(last):
            if task and self.aborts(task) and named_tool(body) in (None, "finish"):
                return closed("orchestrator", "blocked", False, ABORT, reports)
            tail = text_of(last)[-3000:]
            return delegate(f"{task_line}{REVISION}. Fix `{entry}`; the error was:\n\n{tail}")
        if task:
            return delegate(f"{task_line}Write `{entry}` with write_file for the task below.\n\n{task.prompt}")
        return delegate(text_of(last) or "Solve the task.")

    def picked(self, task: TaskSpec, patterns: list[str], rate: float, aspect: str = "") -> bool:
        """On the task list, or among the `rate` of the other tasks; keyed by seed and task, not by request, so the
        same tasks behave the same all night."""
        if any(fnmatch(task.id, pattern) for pattern in patterns):
            return True
        return random.Random(f"{self.seed}:{aspect}{task.id}").random() < rate

    def overiterates(self, task: TaskSpec) -> bool:
        setting = self.scenario.orchestrator
        return self.picked(task, setting.overiterate_tasks, setting.overiterate_rate)

    def overclaims(self, task: TaskSpec) -> bool:
        setting = self.scenario.honesty
        return self.picked(task, setting.overclaim_tasks, setting.overclaim_rate, "overclaim:")

    def aborts(self, task: TaskSpec) -> bool:
        setting = self.scenario.honesty
        return self.picked(task, setting.abort_tasks, setting.abort_rate, "abort:")

    def cheats(self, task: TaskSpec) -> bool:
        setting = self.scenario.honesty
        return not self.aborts(task) and self.picked(task, setting.cheat_tasks, setting.cheat_rate, "cheat:")

    def closing(
        self, role: str, task: TaskSpec | None, finished: bool, who: str = "I", reports: bool = False
    ) -> SimReply:
        """The closing words: the overclaim on the scenario's tasks, else what the sim knows: done when the reference
        or the cheat was written (no tests claim: it never ran them), partial after a broken variant."""
        entry = task.entry if task else "solution.py"
        if task and self.overclaims(task):
            return closed(role, "done", True, OVERCLAIM, reports)
        if finished:
            return closed(role, "done", False, f"Done: {who} wrote `{entry}`.", reports)
        return closed(role, "partial", False, unfinished(entry, who), reports)

    def written(self, messages: list[dict[str, Any]], task: TaskSpec | None, rng: random.Random) -> Written:
        """What to write: p_correct's reference or a broken variant; once an error was fed back (`The tests
        failed`), the cheat on the scenario's cheating tasks, else p_fix's reference or a broken variant (both
        chances scaled by the drift's pass factor; drawn once per task with `coder.per_task`)."""
        revision = any(REVISION in text_of(m) for m in messages)
        if revision and task and self.cheats(task):
            return "cheat"
        setting = self.scenario.coder
        drawn = random.Random(f"{self.seed}:solves:{task.id}").random() if setting.per_task and task else rng.random()
        return "reference" if drawn < self.chance(setting.p_fix if revision else setting.p_correct) else "broken"

    def chance(self, p: float) -> float:
        """A chance of writing the reference, scaled by the drift's pass factor once its time has come."""
        return p * self.scenario.drift.passing(self.elapsed())

    def finished(self, task: TaskSpec | None, source: str | None) -> bool:
        """Whether what was written should pass: the reference or the cheat (unknown counts as finished)."""
        if task is None or source is None:
            return True
        return source.rstrip("\n") in (task.reference.rstrip("\n"), cheating(task.reference).rstrip("\n"))

    def coder(
        self, messages: list[dict[str, Any]], task: TaskSpec | None, rng: random.Random, body: dict[str, Any]
    ) -> SimReply:
        """Writes the entry file by the protocol offered (or, weak-model style, answers with it fenced unless the
        call names its tool), then closes with words about what it wrote; aborts a revision round instead when the
        scenario says so. See agents.py for the shell and whole-file protocols."""
        protocol = protocol_of(body, self.engine)
        entry = task.entry if task else "solution.py"
        last = messages[-1]
        tool = agents.shell_tool(visible_tools(body, self.engine)) if protocol == "shell" else "write_file"
        assert tool is not None
        if last.get("role") == "user" and REVISION in text_of(last) and task and self.aborts(task):
            abort = closed("coder", "blocked", False, ABORT)
            submits = protocol == "shell" and any(agents.SUBMIT in text_of(m) for m in messages)
            return submitting(abort, tool) if submits else abort
        if protocol == "whole":
            fence = agents.whole_fence(messages) or ("```", "```")
            written = self.written(messages, task, rng)
            closing = self.closing("coder", task, written != "broken")
            text = agents.listing(entry, self.source(task, written), fence, "".join(closing.content))
            return wrote(SimReply("coder", "write", content=tokenize(text)), written, closing)
        if protocol == "shell":
            step = agents.shell_step(messages, tool)
            if step in ("done", "submit"):
                closing = self.closing("coder", task, self.finished(task, agents.written_source(messages)))
                return submitting(closing, tool) if step == "submit" else closing
        elif last.get("role") == "tool" and previous_tool(messages) != "read_file" and not tool_failed(text_of(last)):
            return self.closing("coder", task, self.finished(task, agents.written_source(messages)))
        written = self.written(messages, task, rng)
        fenced = rng.random() < self.scenario.coder.p_fenced and named_tool(body) != tool
        source = self.source(task, written)
        if fenced:
            closing = self.closing("coder", task, written != "broken")
            text = f"{''.join(closing.content)}\n\n```python\n{source.rstrip()}\n```\n"
            return wrote(SimReply("coder", "fenced", content=tokenize(text)), written, closing)
        if protocol == "shell":
            arguments = json.dumps({"command": agents.heredoc(entry, source)})
        else:
            arguments = json.dumps({"path": entry, "content": source})
        return wrote(SimReply("coder", "write", tool=PlannedCall("", tool, arguments)), written)

    def chat(self, task: TaskSpec | None, rng: random.Random) -> SimReply:
        if task:
            written: Written = "reference" if rng.random() < self.chance(self.scenario.coder.p_correct) else "broken"
            text = f"```python\n{self.source(task, written).rstrip()}\n```\n"
            return wrote(SimReply("chat", "fenced", content=tokenize(text)), written)
        words = self.words(max(1, round(draw(self.scenario.chat.tokens, rng))), rng)
        words[0] = words[0].strip().capitalize()
        return SimReply("chat", "chat", content=[*words, "."])

    def source(self, task: TaskSpec | None, written: Written) -> str:
        if task is None:
            return "raise NotImplementedError('no task found in the prompt')\n"
        if written == "reference":
            return task.reference
        if written == "cheat":
            return cheating(task.reference)
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


def unfinished(entry: str, who: str) -> str:
    """The honest closing words after a broken variant (partial); the orchestrator relays the coder's."""
    return f"Partial: {who} wrote `{entry}`, but it is not finished and some tests will likely fail."


def closed(role: str, claim: str, tests_claim: bool, text: str, reports: bool = False) -> SimReply:
    """A closing reply saying `text`: a `finish` call (the orchestrator, when offered it) or plain words."""
    reply = SimReply(role, "done", claim=claim, tests_claim=tests_claim, content=tokenize(text))
    if reports:
        arguments = {"status": claim, "tests_claim": "yes" if tests_claim else "no", "evidence": text}
        reply.kind, reply.content, reply.tool = "finish", [], PlannedCall("", "finish", json.dumps(arguments))
    return reply


def wrote(reply: SimReply, written: Written, closing: SimReply | None = None) -> SimReply:
    """The reply marked with what it writes, and with the claim of the closing words it carries (fenced, aider)."""
    reply.correct, reply.cheat = written == "reference", written == "cheat"
    if closing:
        reply.claim, reply.tests_claim = closing.claim, closing.tests_claim
    return reply


def submitting(closing: SimReply, tool: str) -> SimReply:
    """The closing words sent with mini-swe-agent's submit command (its last words are the submission's)."""
    closing.kind, closing.tool = "submit", PlannedCall("", tool, json.dumps({"command": f"echo {agents.SUBMIT}"}))
    return closing


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
