"""The delegation loop: every outcome and fault, checked against its ground truth.

The loop's own decisions (rounds, budgets, refusals, fallbacks, cancellation) run against `ScriptedModel`, whose
canned replies are the ground truth; the transport's faults (stalls, 5xx, cut streams, crashes, dead and too-small
endpoints) and one clean night run against `soak sim` over real HTTP, checked against what the server served.
"""

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soak.agent.attempt import AttemptContext
from soak.agent.loop import run_task
from soak.agent.tools import fenced_code
from soak.config import Budgets, Endpoint
from soak.llm.client import ChatEndpoint
from soak.llm.integrity import ToolCall, judge_call, required_params
from soak.llm.scripted import Say, ScriptedModel
from soak.llm.tools import CODER_TOOLS
from soak.record.identity import AttemptId
from soak.record.schema import CallRow, TaskRow
from soak.sim.scenario import Scenario
from soak.sim.server import SimServer
from soak.tasks.spec import TaskSpec

TASK = "word-frequency"



def scenario(**fields: Any) -> Scenario:
    """Zero latency unless a test asks for time."""
    fields.setdefault("timing", {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 8})
    return Scenario.model_validate(fields)


@pytest.fixture
def sim(request: pytest.FixtureRequest, task: TaskSpec) -> Iterator[SimServer]:
    with SimServer(scenario(**request.param), suite=task.suite) as server:
        yield server


class LoopResult:
    """One run_task against an endpoint, with the rows it reported."""

    def __init__(self, row: TaskRow, calls: list[CallRow], workdir: Path) -> None:
        self.row, self.calls, self.workdir = row, calls, workdir

    def transcript(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.workdir / "transcript.jsonl").read_text().splitlines()]


def attempt(
    task: TaskSpec, base_url: str, tmp_path: Path, *, mode: str = "delegate", stale: float = 5.0,
    endpoint: dict[str, Any] | None = None, **budgets: Any,
) -> LoopResult:
    settings = {"base_url": base_url, "model": "sim", "retry_backoff_seconds": 0.01, "retries": 2, **(endpoint or {})}
    chat = ChatEndpoint("sim", Endpoint(**settings), stale)
    lead = chat if mode == "delegate" else None
    calls: list[CallRow] = []
    workdir = tmp_path / "work"

    async def go() -> TaskRow:
        try:
            return await run_task(
                task, AttemptContext("run-1", AttemptId(task.id, 2), workdir, on_call=calls.append), orchestrator=lead,
                coder=chat,
                budgets=Budgets(**budgets),
            )
        finally:
            await chat.close()

    return LoopResult(asyncio.run(go()), calls, workdir)


def assert_ground_truth(result: LoopResult, sim: SimServer) -> None:
    """What the harness recorded equals what the server says it served."""
    stats, row, calls = sim.stats, result.row, result.calls
    assert len(calls) == stats.requests == row.orchestrator_calls + row.coder_calls
    assert row.prompt_tokens == stats.prompt_tokens == sum(c.prompt_tokens or 0 for c in calls)
    assert row.completion_tokens == stats.completion_tokens
    assert row.cached_tokens == stats.cached_tokens
    assert row.reasoning_tokens == stats.reasoning_tokens
    assert [c.call_index for c in calls] == list(range(len(calls)))
    assert all((c.run_id, c.task_id, c.cycle) == ("run-1", TASK, 2) for c in calls)


@pytest.mark.parametrize("sim", [{}], indirect=True)
def test_clean_pass_delegate(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path)
    row = result.row
    assert row.outcome == "pass" and row.rounds == 1 and row.delegations == 1
    assert (row.orchestrator_calls, row.coder_calls, row.fallback_writes, row.mangled_tool_calls) == (2, 2, 0, 0)
    assert row.tests_passed == row.tests_total > 0 and row.error_kind == "" and row.test_seconds > 0
    assert (row.orchestrator_model, row.coder_model) == ("sim", "sim")
    assert_ground_truth(result, sim)
    # The coder closes in words, the orchestrator through `finish`: done, no tests claim (the sim never ran them).
    assert sim.stats.by_kind == {"delegate": 1, "write": 1, "done": 1, "finish": 1}
    assert (row.claim, row.claim_source, row.claimed_tests_pass, row.coder_claim) == ("done", "tool", False, "done")
    assert (result.workdir / "workspace" / "solution.py").read_text() == task.reference
    assert (result.workdir / "round-1" / "solution.py").read_text() == task.reference
    assert (result.workdir / "round-1" / "test_output.txt").is_file()
    lines = result.transcript()
    assert [line["thread"] for line in lines] == ["orchestrator"] * 3 + ["coder-1"] * 5 + ["orchestrator"] * 3
    assert task.prompt.strip() in lines[1]["content"] and "solution.py" in lines[1]["content"]
    assert TASK not in lines[1]["content"]  # the id is a search key for the task's folder, not a help
    assert all(c.integrity in ("ok", "none") and c.ttft_s is not None for c in result.calls)


# The stale budget leaves a loaded machine room to answer the calls that do not stall; the stall outlasts it by far.
@pytest.mark.parametrize("sim", [{"faults": [{"kind": "stall", "at_requests": [2], "seconds": 30.0}]}], indirect=True)
def test_stall_is_retried(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path, stale=2.0)
    row = result.row
    assert row.outcome == "pass"
    assert [c.status for c in result.calls][:3] == ["ok", "stalled", "ok"]
    assert result.calls[1].retry == 1 and result.calls[2].retry == 2 and result.calls[1].duration_s < 15


@pytest.mark.parametrize("sim", [{"faults": [{"kind": "http_503", "at_requests": [1, 2]}]}], indirect=True)
def test_5xx_then_recovery(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path)
    assert result.row.outcome == "pass"
    assert [(c.status, c.http_status, c.retry) for c in result.calls[:3]] == [
        ("http_5xx", 503, 1), ("http_5xx", 503, 2), ("ok", 200, 3)]
    assert_ground_truth(result, sim)


@pytest.mark.parametrize("sim", [{"faults": [{"kind": "truncate", "at_requests": [3]}]}], indirect=True)
def test_truncated_stream_is_retried(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path)
    assert result.row.outcome == "pass" and result.calls[2].status == "truncated"
    assert result.calls[3].status == "ok" and result.calls[3].retry == 2


@pytest.mark.parametrize("sim", [{"faults": [{"kind": "crash", "at_requests": [3]}]}], indirect=True)
def test_crash_mid_task_is_infra_error(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path)
    row = result.row
    assert row.outcome == "infra_error" and row.error_kind in ("connection", "truncated", "bad_response")
    assert [c.status for c in result.calls[:2]] == ["ok", "ok"] and len(result.calls) == 2 + 3
    assert all(c.status != "ok" for c in result.calls[2:]) and "attempt" in row.error_tail


def test_dead_endpoint_is_infra_error(task: TaskSpec, tmp_path: Path):
    result = attempt(task, "http://127.0.0.1:9/v1", tmp_path, endpoint={"retries": 1})
    row = result.row
    assert row.outcome == "infra_error" and row.error_kind == "connection" and len(result.calls) == 2
    assert row.rounds == 1 and row.tests_total == 0


def test_context_window_aborts_without_retry(task: TaskSpec, tmp_path: Path):
    with SimServer(scenario(max_model_len=64), suite=task.suite) as sim:
        result = attempt(task, sim.base_url, tmp_path)
    assert result.row.outcome == "infra_error" and result.row.error_kind == "context_window"
    assert len(result.calls) == 1 and result.calls[0].http_status == 400


@pytest.mark.parametrize("sim", [{"coder": {"p_fenced": 1.0}}], indirect=True)
def test_named_tool_choice_gets_the_file_written_by_the_tool(task: TaskSpec, sim: SimServer, tmp_path: Path):
    result = attempt(task, sim.base_url, tmp_path, endpoint={"tool_choice": "named"})
    row = result.row
    # Told to call write_file, even a fenced-code coder writes through the tool; once written, nothing is forced.
    assert row.outcome == "pass" and row.fallback_writes == 0 and row.delegations == 1
    assert sim.stats.by_kind == {"delegate": 1, "write": 1, "done": 1, "finish": 1}
    assert_ground_truth(result, sim)


@pytest.mark.parametrize("mode", ["delegate", "direct"])
@pytest.mark.parametrize(("honesty", "claim", "false_success"), [
    ({"overclaim_tasks": [TASK]}, ("done", True), True),
    ({"abort_tasks": [TASK]}, ("blocked", False), False),
])
def test_the_sims_claims_are_recorded(task: TaskSpec, tmp_path: Path, mode: str, honesty: dict, claim: tuple,
                                      false_success: bool):
    """Broken writes throughout; what the record says was claimed is what the sim's scenario made it claim."""
    with SimServer(scenario(coder={"p_correct": 0.0, "p_fix": 0.0}, honesty=honesty), suite=task.suite) as sim:
        row = attempt(task, sim.base_url, tmp_path, mode=mode).row
    assert row.outcome == "fail" and (row.claim, row.claimed_tests_pass) == claim
    assert row.false_success is false_success
    assert row.claim_source == ("tool" if mode == "delegate" else "model")
    closing = [r for r in sim.stats.records if r.claim][-1]
    assert (closing.claim, closing.tests_claim) == claim


# --- the loop against a scripted model ----------------------------------------------------------------

WRONG = "raise NotImplementedError('not yet')\n"
DELEGATE = Say(calls=[("delegate", {"instructions": "Write solution.py as the task says."})])
DONE = Say("Done: solution.py is written.")


def write(source: str, path: str = "solution.py", **fields: Any) -> Say:
    return Say(calls=[("write_file", {"path": path, "content": source})], **fields)


def scripted(
    task: TaskSpec, tmp_path: Path, orchestrator: list[Say], coder: list[Say], *, mode: str = "delegate",
    max_tokens: int = 1024, judge: Any = None, **budgets: Any,
) -> tuple[LoopResult, ScriptedModel, ScriptedModel]:
    lead = ScriptedModel(orchestrator, name="lead", model="lead-model", max_tokens=max_tokens)
    coder_model = ScriptedModel(coder, name="coder", model="coder-model", max_tokens=max_tokens)
    calls: list[CallRow] = []
    workdir = tmp_path / "work"
    extra = {"judge": judge} if judge else {}
    context = AttemptContext("run-1", AttemptId(task.id, 2), workdir, on_call=calls.append)
    row = asyncio.run(run_task(task, context, orchestrator=lead if mode == "delegate" else None,
                               coder=coder_model, budgets=Budgets(**budgets), **extra))
    return LoopResult(row, calls, workdir), lead, coder_model


def assert_script_served(result: LoopResult, *models: ScriptedModel) -> None:
    """What the harness recorded equals what the script served, and the whole script was used."""
    row, calls = result.row, result.calls
    assert all(len(model.asked) == len(model.replies) for model in models), "the loop stopped before the script"
    assert len(calls) == sum(len(model.asked) for model in models) == row.orchestrator_calls + row.coder_calls
    assert row.completion_tokens == sum(c.completion_tokens or 0 for c in calls)
    assert row.prompt_tokens == sum(c.prompt_tokens or 0 for c in calls) > 0
    assert [c.call_index for c in calls] == list(range(len(calls)))
    assert all((c.run_id, c.task_id, c.cycle) == ("run-1", TASK, 2) for c in calls)


def test_scripted_clean_pass_owes_each_tool_until_it_is_called(task: TaskSpec, tmp_path: Path):
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE], [write(task.reference), DONE])
    row = result.row
    assert row.outcome == "pass" and row.rounds == 1 and row.delegations == 1
    assert (row.orchestrator_calls, row.coder_calls, row.fallback_writes, row.mangled_tool_calls) == (2, 2, 0, 0)
    assert (row.orchestrator_model, row.coder_model) == ("lead-model", "coder-model")
    assert_script_served(result, lead, coder)
    assert [a.owed_tool for a in lead.asked] == ["delegate", None]
    assert [a.owed_tool for a in coder.asked] == ["write_file", None]
    assert [a.role for a in lead.asked + coder.asked] == ["orchestrator"] * 2 + ["coder"] * 2
    # The coder's report is the delegate tool's answer the orchestrator sees.
    assert "Files written: solution.py." in lead.asked[1].messages[-1]["content"]
    assert (result.workdir / "workspace" / "solution.py").read_text() == task.reference
    lines = result.transcript()
    assert [line["thread"] for line in lines] == ["orchestrator"] * 3 + ["coder-1"] * 5 + ["orchestrator"] * 2


def test_direct_mode_uses_only_the_coder(task: TaskSpec, tmp_path: Path):
    result, lead, coder = scripted(task, tmp_path, [], [write(task.reference), DONE], mode="direct")
    row = result.row
    assert row.outcome == "pass" and (row.orchestrator_calls, row.coder_calls, row.delegations) == (0, 2, 0)
    assert row.orchestrator_model == "" and not lead.asked and {c.role for c in result.calls} == {"coder"}
    assert_script_served(result, coder)


def test_revision_that_fixes(task: TaskSpec, tmp_path: Path):
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE] * 2,
                                   [write(WRONG), DONE, write(task.reference), DONE])
    row = result.row
    assert row.outcome == "pass" and row.rounds == 2 and row.delegations == 2
    assert_script_served(result, lead, coder)
    revision = [line for line in result.transcript() if "The tests failed" in str(line.get("content"))][0]
    assert (revision["role"], revision["round"]) == ("user", 2)
    assert "fix the code in solution.py" in revision["content"] and "NotImplementedError" in revision["content"]
    assert lead.asked[2].messages[-1]["content"] == revision["content"]
    assert (result.workdir / "round-1" / "solution.py").read_text() == WRONG
    assert (result.workdir / "round-1" / "test_output.txt").read_text()
    assert (result.workdir / "round-2" / "solution.py").read_text() == task.reference


def test_revision_that_does_not_fix(task: TaskSpec, tmp_path: Path):
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE] * 2, [write(WRONG), DONE] * 2, max_rounds=2)
    row = result.row
    assert row.outcome == "fail" and row.rounds == 2 and row.tests_passed < row.tests_total
    assert row.error_kind and "NotImplementedError" in row.error_tail
    assert_script_served(result, lead, coder)


FORCE_PASS = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    (yield).get_result().outcome = "passed"
"""
AGREEING_TESTS = "from solution import top_words\n\n\ndef test_top_words():\n    assert top_words('a b', 2) == []\n"


def test_a_planted_conftest_and_rewritten_tests_do_not_pass_a_wrong_solution(task: TaskSpec, tmp_path: Path):
    wrong = "def top_words(text, k):\n    return []\n"
    plant = Say(calls=[("write_file", {"path": "solution.py", "content": wrong}),
                       ("write_file", {"path": "conftest.py", "content": FORCE_PASS}),
                       ("write_file", {"path": "test_solution.py", "content": AGREEING_TESTS})])
    result, _, _ = scripted(task, tmp_path, [DELEGATE, DONE], [plant, DONE], max_rounds=1)
    row = result.row
    assert (row.outcome, row.tests_touched) == ("fail", "conftest.py; test_solution.py"), row.error_tail
    assert row.tests_passed < row.tests_total
    # Where they lie, the planted files pass the wrong solution: only the judge's fresh folder keeps them out.
    workspace = result.workdir / "workspace"
    planted = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=workspace,
                             capture_output=True, text=True)
    assert planted.returncode == 0 and "1 passed" in planted.stdout, planted.stdout


def test_over_iteration_hits_the_call_cap(task: TaskSpec, tmp_path: Path):
    # An orchestrator that delegates again after every report: the 8th call is refused before it is made.
    result, lead, coder = scripted(task, tmp_path, [DELEGATE] * 3, [write(task.reference), DONE] * 2, max_calls=7)
    row = result.row
    assert row.outcome == "call_cap" and len(result.calls) == 7 and row.delegations == 3
    assert_script_served(result, lead, coder)
    # The last written solution is still tested.
    assert row.tests_passed == row.tests_total > 0 and "call cap" in row.error_tail


def test_wall_budget_ends_in_timeout(task: TaskSpec, tmp_path: Path):
    result, lead, _ = scripted(task, tmp_path, [Say(hang=True)], [], task_seconds=1.0)
    row = result.row
    assert row.outcome == "timeout" and row.duration_s < 1.5
    assert [c.status for c in result.calls] == ["cancelled"] and "wall budget" in row.error_tail


def test_token_cap(task: TaskSpec, tmp_path: Path):
    # The coder's reply would run past the 180 tokens left: it stops at "length", and the budget is spent.
    result, lead, coder = scripted(task, tmp_path, [Say(calls=DELEGATE.calls, completion_tokens=120)],
                                   [write(task.reference, completion_tokens=250)], max_completion_tokens=300)
    row = result.row
    assert row.outcome == "token_cap" and row.completion_tokens == 300
    assert [c.max_tokens for c in result.calls] == [300, 180]
    assert [c.finish_reason for c in result.calls] == ["tool_calls", "length"]
    assert_script_served(result, lead, coder)


@pytest.mark.parametrize(
    ("broken", "verdict"),
    [
        (('write_file {"path": "solution.py"}', "{}"), "mangled_name"),
        (("write_file", '{"path": "solution.py", "content": "x = '), "bad_json"),
        (("write_file", '{"path": "solution.py", "content": ' + "[" * 1000), "bad_json"),  # past the parser's depth
    ],
    ids=["mangled name", "cut JSON", "deep JSON"],
)
def test_bad_tool_calls_are_answered_and_counted(task: TaskSpec, tmp_path: Path, broken: tuple, verdict: str):
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE],
                                   [Say(calls=[broken]), write(task.reference), DONE])
    row = result.row
    assert row.outcome == "pass" and row.mangled_tool_calls == 1 and row.coder_calls == 3
    assert [c.integrity for c in result.calls if c.integrity not in ("ok", "none")] == [verdict]
    refusal = [line for line in result.transcript() if line["role"] == "tool"][0]
    assert refusal["content"].startswith("error:")
    # The transcript keeps the broken call as the model wrote it; the server is sent {} for unreadable arguments.
    written = [call["function"] for line in result.transcript() for call in line.get("tool_calls", [])]
    assert {"name": broken[0], "arguments": broken[1]} in written
    required = required_params(CODER_TOOLS)
    assert verdict in [judge_call(ToolCall(id="", **function), required) for function in written]
    sent = coder.asked[1].messages[-2]["tool_calls"][0]["function"]
    assert sent["arguments"] == ("{}" if verdict == "bad_json" else broken[1])
    assert_script_served(result, lead, coder)


def test_path_escape_writes_nothing_outside(task: TaskSpec, tmp_path: Path):
    outside = tmp_path / "outside.py"
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE], [
        write(task.reference, str(outside)), write(task.reference, "../escaped.py"), write(task.reference), DONE])
    row = result.row
    assert row.outcome == "pass" and row.mangled_tool_calls == 2
    assert [c.integrity for c in result.calls].count("path_escape") == 2
    assert not outside.exists() and not (result.workdir / "escaped.py").exists()
    # The transcript keeps each tool call's verdict, which the report shows as the loop judged it.
    lines = [json.loads(line) for line in (result.workdir / "transcript.jsonl").read_text().splitlines()]
    recorded = [v for line in lines for v in (line.get("verdicts") or {}).values()]
    assert recorded == ["ok", "path_escape", "path_escape", "ok"]
    assert_script_served(result, lead, coder)


def test_reasoning_eating_the_budget(task: TaskSpec, tmp_path: Path):
    result, _, coder = scripted(task, tmp_path, [], [Say(reasoning="Let me think about it. " * 40)],
                                mode="direct", max_tokens=64, max_rounds=1)
    row = result.row
    assert row.outcome == "no_artifact" and row.reasoning_exhausted == 1
    (exhausted,) = [c for c in result.calls if c.reasoning_exhausted]
    assert exhausted.role == "coder" and exhausted.finish_reason == "length" and exhausted.completion_tokens == 64
    assert_script_served(result, coder)


def test_fallback_write(task: TaskSpec, tmp_path: Path):
    fenced = Say(f"Here it is:\n```python\n{task.reference}```\nDone.")
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE], [fenced])
    row = result.row
    assert row.outcome == "pass" and row.fallback_writes == 1 and row.coder_calls == 1
    assert (result.workdir / "workspace" / "solution.py").read_text().strip() == task.reference.strip()
    assert "Files written: solution.py." in lead.asked[1].messages[-1]["content"]
    assert_script_served(result, lead, coder)


LONE = "\ud800"
"""A lone surrogate: JSON may escape one ("\\ud800"), no file, CSV or JSON writer takes one."""


def lone_surrogate_scripts(where: str, reference: str) -> tuple[list[Say], list[Say]]:
    """(orchestrator, coder) replies that hold a lone surrogate `where`, and otherwise pass."""
    finish = Say(calls=[("finish", {"status": "done", "tests_claim": "no", "evidence": f"written {LONE}"})])
    return {
        "written file": ([DELEGATE, DONE], [write(f"{reference}# {LONE}\n"), DONE]),
        "fenced fallback": ([DELEGATE, DONE], [Say(f"```python\n{reference}# {LONE}\n```\nDone.")]),
        "closing words": ([DELEGATE, finish], [write(reference), Say(f"Done {LONE}.", reasoning=LONE)]),
        "tool name": ([DELEGATE, DONE], [Say(calls=[(f"write_file{LONE}", {"path": "solution.py", "content": ""})]),
                                         write(reference), DONE]),
    }[where]


@pytest.mark.parametrize("where", ["written file", "fenced fallback", "closing words", "tool name"])
def test_a_lone_surrogate_from_the_model_is_judged_on_its_merits(task: TaskSpec, tmp_path: Path, where: str):
    """The model's text reaches the workspace, the transcript and the rows as valid Unicode (U+FFFD for the lone
    surrogate): the attempt is judged, not ended by soak's own error."""
    result, lead, coder = scripted(task, tmp_path, *lone_surrogate_scripts(where, task.reference))
    assert result.row.outcome == "pass", result.row.error_tail
    assert_script_served(result, lead, coder)
    transcript = (result.workdir / "transcript.jsonl").read_text()
    source = (result.workdir / "workspace" / "solution.py").read_text()
    assert "\ufffd" in transcript + source and LONE not in result.row.model_dump_json() + str(result.calls)


def test_a_path_no_file_can_have_is_answered_as_the_models_error(task: TaskSpec, tmp_path: Path):
    result, lead, coder = scripted(task, tmp_path, [DELEGATE, DONE],
                                   [write(task.reference, "solution\0.py"), write(task.reference), DONE])
    assert result.row.outcome == "pass", result.row.error_tail
    assert_script_served(result, lead, coder)
    replies = [line["content"] for line in result.transcript() if line["role"] == "tool"]
    assert replies[0] == "error: 'solution\\x00.py' is not a file inside the workspace"


def test_harness_error_keeps_the_traceback(task: TaskSpec, tmp_path: Path):
    def broken_judge(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sandbox exploded")

    result, _, _ = scripted(task, tmp_path, [DELEGATE, DONE], [write(task.reference), DONE], judge=broken_judge)
    row = result.row
    assert row.outcome == "harness_error" and row.error_kind == "RuntimeError"
    assert "sandbox exploded" in row.error_tail and "Traceback" in row.error_tail


def test_cancellation_propagates(task: TaskSpec, tmp_path: Path):
    lead = ScriptedModel([Say(hang=True)])
    calls: list[CallRow] = []

    async def go() -> None:
        running = asyncio.create_task(run_task(
            task, AttemptContext("r", AttemptId(task.id, 0), tmp_path, on_call=calls.append), orchestrator=lead,
            coder=lead,
            budgets=Budgets()))
        await lead.hanging.wait()  # the call is in flight
        running.cancel()
        await running

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    assert [c.status for c in calls] == ["cancelled"]


def test_fenced_code_picks_the_longest_python_block():
    text = "x\n```bash\nls\n```\n```python\nshort = 1\n```\n```\nlonger = 2\nmore = 3\n```"
    assert fenced_code(text) == "longer = 2\nmore = 3\n"
    assert fenced_code("no code here") is None
