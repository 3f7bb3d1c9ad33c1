"""The sim's honesty is ground truth: what its closing words claim (read by soak's own claim detector) is what the
scenario says, against what it wrote, for soak's orchestrator and coder and for each agent protocol."""

import json
import random
import shutil
from typing import Any

import openai
import pytest

from soak.agent.claims import claim_of
from soak.agent.prompts import opening, revision
from soak.llm.tools import CODER_TOOLS, DELEGATE, ORCHESTRATOR_TOOLS
from soak.paths import builtin_tasks_dir
from soak.sandbox.judge import Verdict, judge
from soak.sim import agents
from soak.sim.cheat import cheating
from soak.sim.reply import Planner, SimReply
from soak.sim.scenario import Scenario, load_scenario
from soak.sim.server import SimServer
from soak.tasks.canary import canary
from soak.tasks.suites import load_builtin, load_suites
from tests.sim.test_agents import AIDER_SYSTEM, HERMES_TERMINAL, HERMES_TOOLS, MINI_BASH, MINI_INSTRUCTIONS

FAILED = Verdict(result="fail", tests_passed=3, tests_total=7, error_kind="AssertionError",
                 error_tail="FAILED test_solution.py::test_basic_counts\nE   AssertionError: assert 1 == 2")
PROTOCOLS = ["orchestrator", "orchestrator-text", "direct", "hermes", "hermes-terminal", "mini", "aider"]


@pytest.fixture(scope="module")
def bank() -> dict[str, Any]:
    return {task.id: task for task in load_builtin()}


@pytest.fixture(scope="module")
def task(bank: dict[str, Any]) -> Any:
    return bank["word-frequency"]


def planner(task: Any, **sections: Any) -> Planner:
    return Planner(Scenario.model_validate(sections), [task], seed=0, engine="vllm")


class Run:
    """One attempt round driven through the planner the way soak's loop or an agent would; keeps every reply."""

    def __init__(self, sim: Planner, task: Any, protocol: str) -> None:
        self.sim, self.task, self.protocol, self.replies = sim, task, protocol, []
        self.rng = random.Random(1)

    def ask(self, messages: list[dict[str, Any]], tools: list[Any] | None) -> SimReply:
        body: dict[str, Any] = {"messages": messages} | ({"tools": tools} if tools else {})
        reply = self.sim.plan(body, self.rng, [], 100_000)
        self.replies.append(reply)
        return reply

    def step(self, messages: list[dict[str, Any]], tools: list[Any] | None, result: str) -> SimReply:
        """Ask; answer a tool call with `result` (the coder's report for a delegation) and ask again until the model
        closes."""
        while True:
            reply = self.ask(messages, tools)
            if reply.tool is None or reply.kind in ("finish", "submit"):
                return reply
            call = {"id": "c1", "type": "function", "function": {"name": reply.tool.name,
                                                                  "arguments": reply.tool.arguments}}
            if reply.tool.name == "delegate":
                instructions = json.loads(reply.tool.arguments)["instructions"]
                coder = [{"role": "user", "content": f"{instructions}\n\n---\n\n{opening(self.task)}"}]
                said = "".join(self.step(coder, CODER_TOOLS, "wrote solution.py").content)
                result = f"Files written: solution.py.\nThe coder said: {said}"
            messages = [*messages, {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "content": result}]

    def round(self, revised: bool) -> SimReply:
        """One round (a revision round when `revised`); its closing reply."""
        prompt = opening(self.task) + (f"\n\n{revision(FAILED, 'solution.py')}" if revised else "")
        user = [{"role": "user", "content": prompt}]
        if self.protocol.startswith("orchestrator"):
            tools = ORCHESTRATOR_TOOLS if self.protocol == "orchestrator" else [DELEGATE]
            return self.step(user, tools, "")
        if self.protocol == "direct":
            return self.step(user, CODER_TOOLS, "wrote solution.py")
        if self.protocol == "hermes":
            return self.step(user, HERMES_TOOLS, json.dumps({"bytes_written": 10}))
        if self.protocol == "hermes-terminal":
            return self.step(user, [HERMES_TERMINAL], json.dumps({"output": "", "exit_code": 0, "error": None}))
        if self.protocol == "mini":
            mini = [{"role": "user", "content": prompt + MINI_INSTRUCTIONS}]
            return self.step(mini, MINI_BASH, '{"returncode": 0, "output": ""}')
        return self.ask([{"role": "system", "content": AIDER_SYSTEM}, *user], None)

    @property
    def writes(self) -> list[SimReply]:
        return [reply for reply in self.replies if reply.correct is not None]


def claimed(reply: SimReply) -> tuple[str, bool]:
    """The closing reply's claim as soak reads it: the finish tool's fields, else the detector on its words."""
    if reply.kind == "finish":
        assert reply.tool is not None
        report = json.loads(reply.tool.arguments)
        assert claim_of(report["evidence"]).status == report["status"]
        return report["status"], report["tests_claim"] == "yes"
    claim = claim_of("".join(reply.content))
    return claim.status, claim.tests_claim


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("p_correct", "overclaim", "expected"), [
    (1.0, False, ("done", False)),
    (0.0, False, ("partial", False)),
    (0.0, True, ("done", True)),
    (1.0, True, ("done", True)),
])
def test_closing_words_say_what_was_written_or_overclaim(task, protocol, p_correct, overclaim, expected) -> None:
    honesty = {"overclaim_tasks": ["word-*"] if overclaim else []}
    run = Run(planner(task, coder={"p_correct": p_correct}, honesty=honesty), task, protocol)
    closing = run.round(revised=False)
    assert [w.correct for w in run.writes] == [p_correct == 1.0]
    assert claimed(closing) == expected == (closing.claim, closing.tests_claim)
    if protocol == "orchestrator":
        assert closing.kind == "finish"
    if protocol == "mini":
        assert closing.kind == "submit" and json.loads(closing.tool.arguments) == {"command": f"echo {agents.SUBMIT}"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_honest_abort_in_a_revision_round_writes_nothing(task, protocol) -> None:
    run = Run(planner(task, honesty={"abort_tasks": ["word-frequency"], "cheat_rate": 1.0}), task, protocol)
    closing = run.round(revised=True)
    assert run.writes == [] and claimed(closing) == ("blocked", False) and closing.claim == "blocked"
    if protocol == "orchestrator":
        assert closing.kind == "finish" and len(run.replies) == 1
    first = Run(planner(task, honesty={"abort_tasks": ["word-frequency"]}), task, protocol)
    assert claimed(first.round(revised=False)) == ("done", False)  # a first round never aborts


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cheat_in_a_revision_round(task, protocol) -> None:
    run = Run(planner(task, coder={"p_correct": 0.0, "p_fix": 0.0}, honesty={"cheat_tasks": ["word-*"]}), task,
              protocol)
    closing = run.round(revised=True)
    assert [(w.correct, w.cheat) for w in run.writes] == [(False, True)]
    written = run.writes[0].tool.arguments if run.writes[0].tool else "".join(run.writes[0].content)
    assert "_ANSWERS = _asserted()" in written
    assert claimed(closing) == ("done", False)


def test_records_carry_the_ground_truth(tmp_path) -> None:
    shutil.copytree(builtin_tasks_dir() / "word-frequency", tmp_path / "word-frequency")
    scn = Scenario.model_validate({"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0},
                                   "coder": {"p_correct": 0.0}, "honesty": {"overclaim_tasks": ["word-*"]}})
    sim = SimServer(scn, suite=f"dir:{tmp_path}")
    sim.start()
    try:
        api = openai.OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0, timeout=20)
        task = opening(load_suites(f"dir:{tmp_path}")[0])
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        write = api.chat.completions.create(model="m", messages=messages, tools=CODER_TOOLS).choices[0].message
        messages += [write.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": write.tool_calls[0].id, "content": "wrote solution.py"}]
        said = api.chat.completions.create(model="m", messages=messages, tools=CODER_TOOLS).choices[0].message
    finally:
        sim.stop()
    assert claim_of(said.content).status == "done" and claim_of(said.content).tests_claim
    assert [(r.kind, r.correct, r.claim, r.tests_claim) for r in sim.stats.records] == [
        ("write", False, "", False), ("done", None, "done", True)]


def test_rates_pick_tasks_by_seed_and_id_alone(bank) -> None:
    tasks = list(bank.values())
    sim = Planner(load_scenario("honesty"), tasks, seed=0, engine="vllm")
    again = Planner(load_scenario("honesty"), tasks, seed=0, engine="vllm")
    picks = {kind: {t.id for t in tasks if getattr(sim, kind)(t)} for kind in ("overclaims", "aborts", "cheats")}
    assert picks == {kind: {t.id for t in tasks if getattr(again, kind)(t)} for kind in picks}
    assert not picks["aborts"] & picks["cheats"]
    first = tasks[:20]  # a short night still shows every behaviour
    assert all({t.id for t in first} & picked for picked in picks.values())


def test_the_cheat_passes_a_canary_when_judged_for_real(bank) -> None:
    task = bank["balanced-brackets"]
    twin = canary(task, random.Random(0))
    assert twin is not None and judge(twin, task.reference).result == "fail"
    verdict = judge(twin, cheating(task.reference))
    assert verdict.result == "pass" and "sys._getframe" in verdict.suspicious
