"""Budgets that hold: the token cap on a server that reports no usage (estimated from the text, recorded as
estimated, never a made-up zero), and the wall budget ending an attempt while its tests run (the test process dies
then, not at its own test timeout)."""

import asyncio
import functools
import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx2
import psutil
import pytest

from soak.agent.attempt import AttemptContext, Ledger
from soak.agent.loop import run_task
from soak.agent.proxy import ProxiedAttempt, RecordingProxy
from soak.config import Budgets, Endpoint, SoakConfig, redact
from soak.llm.client import ChatEndpoint
from soak.llm.reply import CHARS_PER_TOKEN, estimated_tokens
from soak.llm.scripted import Say, ScriptedModel
from soak.night.loop import Runner, SessionStart
from soak.record.folder import RunFolder
from soak.record.identity import AttemptId
from soak.record.read import read_rows
from soak.record.schema import CallRow, RunInfo, RunLimits, TaskRow
from soak.sandbox.jail import works
from soak.sandbox.judge import judge
from soak.sim.scenario import Scenario, Timing
from soak.sim.server import SimServer
from soak.tasks.spec import TaskSpec


def write(source: str) -> Say:
    return Say(calls=[("write_file", {"path": "solution.py", "content": source})])


# --- the token cap without usage -------------------------------------------------------------------


def test_the_estimate_is_four_characters_a_token_rounded_up():
    assert CHARS_PER_TOKEN == 4
    assert estimated_tokens("") == 0 and estimated_tokens("abcd") == 1 and estimated_tokens("ab", "cde") == 2


def test_token_cap_fires_on_a_scripted_server_without_usage(task: TaskSpec, tmp_path: Path):
    # Two replies of ~250 estimated tokens each against a cap of 300: the second call spends it.
    lead = ScriptedModel([Say(calls=[("delegate", {"instructions": "x" * 1000})])], usage=False)
    coder = ScriptedModel([write(task.reference + "#" * 1000)], usage=False)
    calls: list[CallRow] = []
    row = asyncio.run(run_task(
        task, AttemptContext("r", AttemptId(task.id, 1), tmp_path / "work", on_call=calls.append), orchestrator=lead,
        coder=coder,
        budgets=Budgets(max_completion_tokens=300),
    ))
    assert row.outcome == "token_cap", row.error_tail
    assert "estimated from the text" in row.error_tail and "no usage" in row.error_tail
    # The record keeps the server's silence: completion_tokens None, the estimate beside it; the task row's
    # completion_tokens counts reported tokens only.
    assert [c.completion_tokens for c in calls] == [None, None]
    assert all(c.estimated_completion_tokens and c.estimated_completion_tokens > 200 for c in calls)
    assert row.completion_tokens == 0
    # What is left after the first call is what the second may spend.
    assert coder.asked[0].max_tokens == 300 - calls[0].estimated_completion_tokens


def test_usage_reported_means_no_estimate(task: TaskSpec, tmp_path: Path):
    lead = ScriptedModel([Say(calls=[("delegate", {"instructions": "go"})]), Say(content="done")])
    coder = ScriptedModel([write(task.reference), Say(content="done")])
    calls: list[CallRow] = []
    row = asyncio.run(run_task(
        task, AttemptContext("r", AttemptId(task.id, 1), tmp_path / "work", on_call=calls.append), orchestrator=lead,
        coder=coder,
        budgets=Budgets(),
    ))
    assert row.outcome == "pass"
    assert all(c.completion_tokens and c.estimated_completion_tokens is None for c in calls)


@pytest.fixture
def llama_cpp_python_sim(task: TaskSpec):
    """`soak sim --engine llama-cpp-python`: streams carry no usage."""
    timing = Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8)
    with SimServer(Scenario(timing=timing), engine="llama-cpp-python", suite=task.suite) as server:
        yield server


def test_token_cap_fires_on_llama_cpp_python_through_soaks_loop(task: TaskSpec, llama_cpp_python_sim, tmp_path):
    endpoint = Endpoint(base_url=llama_cpp_python_sim.base_url, model="sim", tool_choice="named", retries=0)
    chat = ChatEndpoint("sim", endpoint, 5.0)
    calls: list[CallRow] = []

    async def go() -> TaskRow:
        try:
            return await run_task(
                task, AttemptContext("r", AttemptId(task.id, 1), tmp_path / "work", on_call=calls.append),
                orchestrator=chat,
                coder=chat, budgets=Budgets(max_completion_tokens=40),
            )
        finally:
            await chat.close()

    row = asyncio.run(go())
    assert row.outcome == "token_cap", (row.outcome, row.error_tail)
    assert calls and all(c.status == "ok" and c.completion_tokens is None for c in calls)
    assert sum(c.estimated_completion_tokens or 0 for c in calls) >= 40
    assert "estimated from the text" in row.error_tail
    # The server served fewer calls than the budget would have allowed had they been free.
    assert llama_cpp_python_sim.stats.requests == len(calls) < Budgets().max_calls


def test_token_cap_fires_on_llama_cpp_python_through_the_proxy(llama_cpp_python_sim):
    """An external agent's calls: the proxy counts the same estimate, then refuses the next call."""
    endpoint = Endpoint(base_url=llama_cpp_python_sim.base_url, model="sim")
    rows: list[CallRow] = []

    async def go() -> tuple[Ledger, int]:
        proxy = RecordingProxy("sim", endpoint, None, Budgets())
        await proxy.start()
        try:
            ledger = Ledger(max_calls=50, max_completion_tokens=20, on_call=rows.append)
            base_url, token = proxy.open(ProxiedAttempt(ledger, "r", AttemptId("t", 1)))
            body = {"model": "sim", "stream": True, "messages": [{"role": "user", "content": "write it"}]}
            async with httpx2.AsyncClient(timeout=30) as client:
                statuses = []
                for _ in range(10):
                    reply = await client.post(f"{base_url}/chat/completions", json=body,
                                              headers={"Authorization": f"Bearer {token}"})
                    statuses.append(reply.status_code)
                    if reply.status_code == 400:
                        assert json.loads(reply.text)["error"]["code"] == "token_cap"
                        break
            return ledger, statuses.count(200)
        finally:
            await proxy.stop()

    ledger, served = asyncio.run(go())
    assert ledger.ended is not None and ledger.ended.outcome == "token_cap"
    assert ledger.estimated_tokens == ledger.completion_tokens >= 20
    assert served == len(rows) and all(r.completion_tokens is None and r.estimated_completion_tokens for r in rows)


# --- the wall budget while the tests run ---------------------------------------------------------------------------

SLOW_TEST = """import time

from solution import answer


def test_answer():
    time.sleep(120)
    assert answer() == 42
"""
SOLUTION = "def answer():\n    return 42\n"
KINDS = [kind for kind in ("bwrap", "session") if works(kind)]


def slow_task(**fields) -> TaskSpec:
    """One test that sleeps far past any budget here; its own timeout would let it run for minutes."""
    return TaskSpec(id="slow-test", title="slow", difficulty="easy", suite="test", prompt="Return 42.",
                    tests={"test_slow.py": SLOW_TEST}, reference=SOLUTION, test_timeout_seconds=300, **fields)


class PytestWatch:
    """Every process of the sandbox's pytest runs under `root` (the judge's workspaces: tempfile's dir is moved
    there), as it appears; `running` is set once one runs the tests (not the trusted collection)."""

    def __init__(self, root: Path, on_running=None) -> None:
        self.root, self.on_running = str(root), on_running
        self.seen: dict[int, psutil.Process] = {}
        self.running = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def __enter__(self) -> "PytestWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    def watch(self) -> None:
        while not self.done.is_set():
            for process in psutil.process_iter(["cmdline"]):
                cmdline = process.info["cmdline"] or []
                # `-m pytest`, or under bubblewrap a bootstrap that runs the module pytest
                tests = any(arg == "pytest" or "'pytest'" in arg for arg in cmdline)
                if tests and any(self.root in arg for arg in cmdline) and process.pid not in self.seen:
                    self.seen[process.pid] = process
                    if "--collect-only" not in cmdline and not self.running.is_set():
                        self.running.set()
                        if self.on_running:
                            self.on_running()
            self.done.wait(0.02)

    def alive_after(self, seconds: float) -> list[psutil.Process]:
        """The seen processes still alive once `seconds` have passed (returns as soon as all are gone)."""
        _, alive = psutil.wait_procs(list(self.seen.values()), timeout=seconds)
        return [process for process in alive if not dead(process)]


def dead(process: psutil.Process) -> bool:
    """Gone, or a zombie: it runs nothing, and a launcher orphaned into a container's init may wait for reaping."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "judge-tmp"
    root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(root))
    return root


@pytest.mark.parametrize("kind", KINDS)
def test_a_wall_budget_ending_during_the_tests_kills_them(kind: str, workspaces: Path, tmp_path: Path):
    task = slow_task(budget_seconds=6)
    coder = ScriptedModel([write(SOLUTION), Say(content="written")])
    calls: list[CallRow] = []
    with PytestWatch(workspaces) as watch:
        started = time.monotonic()
        row = asyncio.run(run_task(
            task, AttemptContext("r", AttemptId(task.id, 1), tmp_path / "work", on_call=calls.append),
            orchestrator=None, coder=coder,
            budgets=Budgets(), judge=functools.partial(judge, kind=kind),
        ))
        returned = time.monotonic() - started
        alive = watch.alive_after(1.0)
    assert watch.running.is_set(), "the budget ended before the tests ran: nothing was checked"
    assert not alive, [p.info["cmdline"] for p in alive]
    assert row.outcome == "timeout" and "wall budget of 6 s" in row.error_tail
    # asyncio.run returns once its threads are done: the whole attempt held its budget, not the test's timeout.
    assert returned < 6 + 3


@pytest.mark.parametrize("kind", KINDS[:1])
def test_ctrl_c_during_the_tests_leaves_no_pytest_process(kind: str, workspaces: Path, tmp_path: Path):
    """The night's cancellation (Ctrl-C here; the deadline's grace cancels the same way) kills the test process
    before the attempt's cancelled row is written and the night ends."""
    config = SoakConfig(endpoints={"e": Endpoint(base_url="http://127.0.0.1:9/v1", model="m")}, concurrency=1)
    folder = RunFolder(tmp_path / "night")
    folder.path.mkdir()
    info = RunInfo(run_id="night", created_at=time.time(), config=redact(config.model_dump(mode="json")),
                   limits=RunLimits(max_tasks=1))
    folder.write_info(info)

    async def attempt(task: TaskSpec, at: AttemptContext) -> TaskRow:
        coder = ScriptedModel([write(SOLUTION), Say(content="written")])
        return await run_task(task, at, orchestrator=None, coder=coder, budgets=Budgets(),
                              judge=functools.partial(judge, kind=kind))

    folder.open()
    try:
        with PytestWatch(workspaces, on_running=lambda: os.kill(os.getpid(), signal.SIGINT)) as watch:
            runner = Runner(folder, info, config, [slow_task()], attempt, SessionStart(None))
            end = asyncio.run(runner.run())
            alive = watch.alive_after(1.0)
    finally:
        folder.close()
    assert watch.running.is_set()
    assert not alive, [p.info["cmdline"] for p in alive]
    assert end.reason == "signal"
    assert [r.outcome for r in read_rows(folder.path / "tasks.csv", TaskRow)] == ["cancelled"]
