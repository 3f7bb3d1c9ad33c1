import asyncio
import io
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from soak.agent.attempt import AttemptContext, Ledger
from soak.config import Endpoint, SoakConfig, redact
from soak.night.lifecycle import run_state
from soak.night.loop import Runner, Schedule, SessionStart
from soak.night.wiring import EndpointProbe, SessionOptions, read_pid, run_night, unmanaged_base_urls
from soak.record.folder import RunFolder
from soak.record.identity import AttemptId
from soak.record.read import read_rows
from soak.record.schema import CallRow, EventRow, RunInfo, RunLimits, Session, TaskRow
from soak.stack.servers import free_port
from soak.tasks.spec import TaskSpec
from tests.helpers import REPO, wait_until

TASK_IDS = [f"task-{i}" for i in range(6)]


def make_tasks(ids: list[str] = TASK_IDS) -> list[TaskSpec]:
    return [TaskSpec(id=i, title=i, difficulty="easy", suite="test", prompt="p", tests={}, reference="") for i in ids]


class FakeTasks:
    """Scripted attempts: `calls` call rows each (charged to a ledger, as a driver does), `seconds` of work, the outcome
    from `outcome(task_id, n)`."""

    def __init__(self, seconds: float = 0.0, calls: int = 2, outcome=None, seed: int | None = None,
                 hook=None):
        self.seconds, self.calls = seconds, calls
        self.outcome = outcome or (lambda task_id, n: "pass" if n % 3 else "fail")
        self.rng = random.Random(seed) if seed is not None else None
        self.hook = hook
        self.started: list[tuple[int, str, float]] = []
        self.slots: list[tuple[int, int, str]] = []
        """(cycle, repeat, task_id) of each attempt, as started."""

    async def __call__(self, task: TaskSpec, attempt: AttemptContext) -> TaskRow:
        started = time.time()
        self.started.append((attempt.attempt.cycle, task.id, started))
        self.slots.append((attempt.attempt.cycle, attempt.attempt.repeat, task.id))
        n = len(self.started)
        if self.hook:
            self.hook(n)
        ledger = Ledger(max_calls=10**6, max_completion_tokens=10**9, on_call=attempt.on_call, totals=attempt.totals)
        for index in range(self.calls):
            await asyncio.sleep(self.rng.uniform(0, 2 * self.seconds) if self.rng else self.seconds / self.calls)
            ledger.record(CallRow(
                run_id=attempt.run_id, **attempt.attempt.row_fields(), call_index=index, role="coder" if index else
                "orchestrator", endpoint="e", model="m", stream=True, started_at=time.time(), duration_s=0.01,
                completion_tokens=5, error="multi\nline, \"quoted\"",
            ))
        outcome = self.outcome(task.id, n)
        if outcome == "raise":
            raise ValueError("scripted harness bug")
        ended = time.time()
        return TaskRow(
            run_id=attempt.run_id, **attempt.attempt.row_fields(),
            suite=task.suite, started_at=started, ended_at=ended, duration_s=ended - started, outcome=outcome,
            orchestrator_calls=1, coder_calls=self.calls - 1, completion_tokens=5 * self.calls,
        )


class Never:
    """A stack that does not come back."""

    async def wait_until_ready(self, timeout: float) -> bool:
        await asyncio.sleep(min(timeout, 0.05))
        return False


class Always:
    def __init__(self):
        self.asked = 0

    async def wait_until_ready(self, timeout: float) -> bool:
        self.asked += 1
        return True


def new_folder(tmp_path: Path, limits: RunLimits, run_id: str = "run-1", **settings) -> tuple[RunFolder, RunInfo,
                                                                                           SoakConfig]:
    settings.setdefault("concurrency", 2)
    settings.setdefault("grace_seconds", 5)
    config = SoakConfig(endpoints={"default": Endpoint(base_url="http://127.0.0.1:9/v1", model="m")}, **settings)
    folder = RunFolder(tmp_path / run_id)
    folder.path.mkdir(parents=True)
    info = RunInfo(run_id=run_id, created_at=time.time(), config=redact(config.model_dump(mode="json")),
                   limits=limits)
    folder.write_info(info)
    return folder, info, config


def run(folder: RunFolder, info: RunInfo, config: SoakConfig, task_fn, tasks=None, readiness=None):
    """One session in process, like `soak run` but with the injected task function."""
    out = io.StringIO()
    folder.open()
    try:
        runner = Runner(folder, info, config, tasks or make_tasks(), task_fn, SessionStart(readiness or Never()))
        end = asyncio.run(runner.run())
    finally:
        folder.close()
    return end, out


def tasks_of(folder: RunFolder) -> list[TaskRow]:
    return list(read_rows(folder.path / "tasks.csv", TaskRow))


def calls_of(folder: RunFolder) -> list[CallRow]:
    return list(read_rows(folder.path / "calls.csv", CallRow))


def events_of(folder: RunFolder) -> list[str]:
    return [e.kind for e in read_rows(folder.path / "events.csv", EventRow)]


def assert_calls_add_up(folder: RunFolder, orphans_allowed: bool = False) -> None:
    """Every task row's calls are in calls.csv under its attempt key; no call belongs to nobody (unless a crash)."""
    calls = Counter((c.task_id, c.cycle, c.repeat, c.session) for c in calls_of(folder))
    rows = tasks_of(folder)
    keys = [(r.task_id, r.cycle, r.repeat, r.session) for r in rows]
    assert len(keys) == len(set(keys)), "an attempt was recorded twice"
    for row in rows:
        assert calls[(row.task_id, row.cycle, row.repeat, row.session)] == row.orchestrator_calls + row.coder_calls, row
    if not orphans_allowed:
        assert set(calls) <= set(keys)


def test_task_limit_records_one_row_per_attempt_and_every_call(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=15), concurrency=3)
    end, _ = run(folder, info, config, FakeTasks(seconds=0.01, calls=3))
    assert (end.reason, end.exit_code) == ("tasks", 0)
    rows = tasks_of(folder)
    assert len(rows) == 15
    assert len(calls_of(folder)) == 45
    assert_calls_add_up(folder)
    assert events_of(folder)[0] == "run_start" and events_of(folder)[-1] == "run_end"
    saved = folder.read_info()
    assert saved.sessions[0].reason == "tasks" and saved.sessions[0].stopped_at and saved.ended_at
    assert saved.config is not None and saved.config.endpoints["default"].max_tokens == 2048
    assert len(pd.read_csv(folder.path / "calls.csv")) == 45


def test_cycles_are_seeded_shuffles_of_the_whole_suite(tmp_path):
    orders = {}
    for seed in (7, 7, 8):
        folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=3), run_id=f"s{seed}-{len(orders)}",
                                          concurrency=1, seed=seed)
        end, _ = run(folder, info, config, FakeTasks())
        assert end.reason == "cycles"
        rows = tasks_of(folder)
        by_cycle = [[r.task_id for r in rows if r.cycle == c] for c in (1, 2, 3)]
        assert all(sorted(order) == sorted(TASK_IDS) for order in by_cycle)
        assert len(rows) == 3 * len(TASK_IDS)
        orders[folder.run_id] = by_cycle
    first, again, other = orders.values()
    assert first == again
    assert first != other
    assert first[0] != first[1] or first[1] != first[2]


def test_schedule_picks_up_a_cycle_where_it_stopped():
    tasks = make_tasks()
    order = Schedule(tasks, 3, RunLimits(), set()).order(2)
    done = {AttemptId(t, 1) for t in TASK_IDS} | {AttemptId(t, 2) for t in order[:2]} | {AttemptId(order[0], 3)}
    schedule = Schedule(tasks, 3, RunLimits(max_tasks=len(done) + 5), done)
    taken = [schedule.take() for _ in range(6)]
    assert [(slot, task.id) for slot, task in taken[:4]] == [(AttemptId(t, 2), t) for t in order[2:]]
    assert taken[4][0].cycle == 3 and taken[4][0].repeat == 1 and taken[4][1].id != order[0]
    assert taken[5] is None and schedule.end_reason == "tasks"


def test_repeats_run_each_task_k_times_per_cycle_one_pass_apart(tmp_path):
    """`--repeat 3`: every task three times in each cycle, its tries exactly one pass over the suite apart (never back
    to back), each cycle in its own order, every call under its own attempt; a resume picks up the repeats not run."""
    folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=2, repeats=3), concurrency=1)
    fake = FakeTasks(calls=2)
    end, _ = run(folder, info, config, fake)
    assert end.reason == "cycles"
    rows = tasks_of(folder)
    assert len(rows) == 2 * 3 * len(TASK_IDS)
    assert Counter((r.task_id, r.cycle) for r in rows) == {(t, c): 3 for t in TASK_IDS for c in (1, 2)}
    assert {(r.task_id, r.cycle, r.repeat) for r in rows} == {(t, c, k) for t in TASK_IDS for c in (1, 2)
                                                               for k in (1, 2, 3)}
    assert_calls_add_up(folder)
    n = len(TASK_IDS)
    for position, (cycle, repeat, task_id) in enumerate(fake.slots):
        assert fake.slots.index((cycle, 1, task_id)) == position - (repeat - 1) * n
    assert [t for _, _, t in fake.slots[:n]] != [t for _, _, t in fake.slots[3 * n:4 * n]]
    assert {p.name for p in (folder.path / "work" / TASK_IDS[0]).iterdir()} == {"1", "1-2", "1-3", "2", "2-2", "2-3"}

    order = Schedule(make_tasks(), config.seed, RunLimits(), set()).order(1)
    done = {AttemptId(t, 1) for t in TASK_IDS} | {AttemptId(order[0], 1, 2)}
    schedule = Schedule(make_tasks(), config.seed, RunLimits(max_cycles=1, repeats=3), done)
    left = [(slot.cycle, slot.repeat, task.id) for slot, task in iter(schedule.take, None)]
    assert left == [(1, 2, t) for t in order[1:]] + [(1, 3, t) for t in order]


def test_deadline_stops_scheduling_and_grace_cancels_the_stragglers(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(duration_seconds=0.6), concurrency=2, grace_seconds=0.3)
    slow = {"task-0", "task-1", "task-2", "task-3", "task-4", "task-5"}
    fake = FakeTasks(seconds=0.2, calls=2)
    original = fake.__call__

    async def sometimes_endless(task, attempt):  # every attempt after the first: a straggler however slow the host
        if len(fake.started) >= 1 and task.id in slow:
            fake.started.append((attempt.attempt.cycle, task.id, time.time()))
            await asyncio.sleep(30)
        return await original(task, attempt)

    started = time.time()
    end, _ = run(folder, info, config, sometimes_endless)
    took = time.time() - started
    assert (end.reason, end.exit_code) == ("deadline", 0)
    assert took < 3
    rows = tasks_of(folder)
    deadline = folder.read_info().sessions[0].started_at + 0.6
    assert all(r.started_at <= deadline + 0.05 for r in rows)
    assert [r.outcome for r in rows].count("cancelled") >= 1
    cancelled = next(r for r in rows if r.outcome == "cancelled")
    assert "deadline" in cancelled.error_tail
    assert_calls_add_up(folder)


def test_error_budget_pauses_then_ends_the_run(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=200), concurrency=2,
                                      error_budget={"window_tasks": 10, "max_infra_fraction": 0.3,
                                                    "wait_for_stack_seconds": 0.2})
    end, _ = run(folder, info, config, FakeTasks(outcome=lambda t, n: "infra_error"), readiness=Never())
    assert (end.reason, end.exit_code) == ("error_budget", 1)
    kinds = events_of(folder)
    assert kinds.index("pause") < kinds.index("error_budget") < kinds.index("run_end")
    rows = tasks_of(folder)
    assert 4 <= len(rows) <= 6  # 4 infra errors exceed 30 % of 10; lanes in flight finish
    assert folder.read_info().sessions[0].reason == "error_budget"


def test_a_stack_that_comes_back_unpauses_the_run(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=30), concurrency=1,
                                      error_budget={"window_tasks": 5, "max_infra_fraction": 0.2})
    stack = Always()
    end, _ = run(folder, info, config, FakeTasks(outcome=lambda t, n: "infra_error" if n <= 3 else "pass"),
                 readiness=stack)
    assert (end.reason, end.exit_code) == ("tasks", 0)
    assert stack.asked == 1
    kinds = events_of(folder)
    assert kinds.count("pause") == 1 and kinds.count("unpause") == 1
    assert len(tasks_of(folder)) == 30


def test_a_flapping_stack_still_ends_the_run(tmp_path):
    """Ready at once but every task still an infra error: the failing time adds up across pauses."""
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=10_000), concurrency=1,
                                      error_budget={"window_tasks": 4, "max_infra_fraction": 0.25,
                                                    "wait_for_stack_seconds": 0.3})
    end, _ = run(folder, info, config, FakeTasks(seconds=0.01, outcome=lambda t, n: "infra_error"),
                 readiness=Always())
    assert end.reason == "error_budget"
    assert events_of(folder).count("unpause") >= 1


def test_a_server_down_event_from_the_stack_pauses_new_attempts(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=8), concurrency=1)

    class Restarts:
        """Comes back after a while, like StackSupervisor.wait_until_ready after a restart."""

        async def wait_until_ready(self, timeout: float) -> bool:
            await asyncio.sleep(0.3)
            return True

    fake = FakeTasks(seconds=0.01, hook=lambda n: n == 3 and folder.event("down", "process exited", "vllm"))
    end, _ = run(folder, info, config, fake, readiness=Restarts())
    assert end.reason == "tasks"
    events = list(read_rows(folder.path / "events.csv", EventRow))
    kinds = [e.kind for e in events]
    assert kinds.index("down") < kinds.index("pause") < kinds.index("unpause")
    assert "vllm is down" in events[kinds.index("pause")].detail
    paused, unpaused = events[kinds.index("pause")].at, events[kinds.index("unpause")].at
    assert not [s for _, _, s in fake.started if paused < s < unpaused]
    assert len(tasks_of(folder)) == 8


def test_a_harness_bug_is_a_row_and_the_run_goes_on(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=6))
    end, _ = run(folder, info, config, FakeTasks(outcome=lambda t, n: "raise" if n == 2 else "pass"))
    assert end.reason == "tasks"
    rows = tasks_of(folder)
    broken = [r for r in rows if r.outcome == "harness_error"]
    assert len(broken) == 1 and "scripted harness bug" in broken[0].error_tail
    assert broken[0].error_kind == "ValueError"
    assert_calls_add_up(folder)


def test_sigint_cancels_in_flight_attempts_and_a_resume_redoes_them(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=12), concurrency=3)

    def interrupt(n):
        if n == 7:
            os.kill(os.getpid(), signal.SIGINT)

    end, _ = run(folder, info, config, FakeTasks(seconds=0.2, calls=2, hook=interrupt))
    assert (end.reason, end.exit_code) == ("signal", 130)
    rows = tasks_of(folder)
    cancelled = [r for r in rows if r.outcome == "cancelled"]
    assert 1 <= len(cancelled) <= 3
    assert all("signal" in r.error_tail for r in cancelled)
    assert "signal" in events_of(folder)
    assert_calls_add_up(folder)
    info = folder.read_info()
    assert run_state(folder, info) == "stopped"

    end, _ = run(folder, info, config, FakeTasks(seconds=0.01))
    assert end.reason == "tasks"
    rows = tasks_of(folder)
    finished = [(r.cycle, r.task_id) for r in rows if r.outcome != "cancelled"]
    assert len(finished) == 12 == len(set(finished))
    assert {(r.cycle, r.task_id) for r in cancelled} <= set(finished)
    assert "resume" in events_of(folder)
    assert [s.session for s in folder.read_info().sessions] == [0, 1]
    assert_calls_add_up(folder)


def test_resume_after_a_crash_repairs_the_tail_keeps_orphan_calls_and_skips_done_work(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=2), concurrency=1)
    end, _ = run(folder, info, config, FakeTasks())
    # Fake a crash in a second session: half a cycle done, one attempt's calls without its row, a torn row.
    info = folder.read_info()
    info.limits = RunLimits(max_cycles=3)
    info.sessions.append(Session(session=1, pid=1, started_at=time.time() - 10, last_seen_at=time.time() - 5))
    info.ended_at = None
    folder.write_info(info)
    order = Schedule(make_tasks(), config.seed, RunLimits(), set()).order(3)
    folder.open()
    folder.record_task(TaskRow(run_id="run-1", cycle=3, session=1, task_id=order[0], suite="test", started_at=1,
                               ended_at=2, duration_s=1, outcome="pass"))
    folder.record_call(CallRow(run_id="run-1", task_id=order[1], cycle=3, session=1, call_index=0, role="coder",
                               endpoint="e", model="m", stream=True, started_at=1, duration_s=1))
    folder.close()
    with (folder.path / "tasks.csv").open("a") as handle:
        handle.write('1,run-1,3,1,task-x,test,"torn\nrow')
    assert run_state(folder, folder.read_info()) == "crashed"

    fake = FakeTasks()
    end, _ = run(folder, folder.read_info(), config, fake)
    assert end.reason == "cycles"
    assert [(c, t) for c, t, _ in fake.started] == [(3, t) for t in order[1:]]
    rows = tasks_of(folder)
    assert len(rows) == 6 + 6 + 6
    resume = [e for e in read_rows(folder.path / "events.csv", EventRow) if e.kind == "resume"][0]
    assert "1 calls of attempts cut short kept" in resume.detail and "tasks.csv" in resume.detail
    assert_calls_add_up(folder, orphans_allowed=True)
    assert len(pd.read_csv(folder.path / "tasks.csv")) == len(rows)
    assert folder.read_info().sessions[2].session == 2


def test_resume_gets_the_remaining_time_of_the_duration(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(duration_seconds=100), concurrency=1)
    now = time.time()
    info.sessions.append(Session(session=0, pid=1, started_at=now - 1000, last_seen_at=now - 901))
    folder.write_info(info)
    folder.open()
    runner = Runner(folder, info, config, make_tasks(), FakeTasks(), SessionStart(Never()))
    runner.begin()
    folder.close()
    assert runner.deadline_at == pytest.approx(time.time() + 1, abs=0.5)


class Answers(BaseHTTPRequestHandler):
    status = 401

    def do_GET(self):  # noqa: N802 - the http.server API
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_endpoint_probe_waits_for_an_answer():
    port = free_port()
    probe = EndpointProbe([f"http://127.0.0.1:{port}/v1"], interval=0.05)
    assert asyncio.run(probe.wait_until_ready(0.2)) is False
    server = ThreadingHTTPServer(("127.0.0.1", port), Answers)
    threading.Timer(0.2, server.serve_forever).start()
    try:
        assert asyncio.run(probe.wait_until_ready(5)) is True  # 401 still means the server is up
    finally:
        server.shutdown()
        server.server_close()


def test_pause_probes_only_endpoints_no_stack_server_serves():
    config = SoakConfig.model_validate({
        "endpoints": {"local": {"base_url": "http://127.0.0.1:8001/v1", "model": "m"},
                      "remote": {"base_url": "http://10.0.0.2:8000/v1", "model": "m"}},
        "roles": {"orchestrator": "remote", "coder": "local"},
        "stack": {"servers": [{"name": "local", "up": "serve", "base_url": "http://127.0.0.1:8001/v1"}]},
    })
    assert unmanaged_base_urls(config) == ["http://10.0.0.2:8000/v1"]
    assert unmanaged_base_urls(config.model_copy(update={"mode": "direct"})) == []


def test_execute_wires_the_session_and_prints_quiet_lines(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=4))
    out = io.StringIO()
    end = run_night(folder, info, config, make_tasks(),
                    SessionOptions(task_fn=FakeTasks(), console=Console(file=out, width=200)))
    assert end.exit_code == 0
    text = out.getvalue()
    assert text.count(" calls 2 ") == 4 and "completed: the task limit was reached" in text
    assert not (folder.path / "runner.pid").exists()
    assert (folder.path / "samples.csv").read_text().startswith("schema_version,")


# --- against the real loop and soak sim ------------------------------------------------------------

BANK_TEST = "from solution import add\n\n\ndef test_add():\n    assert add(2, {i}) == {expected}\n"


def write_bank(root: Path, count: int = 6) -> str:
    """Tiny self-contained tasks (the sim's coder knows their reference solutions)."""
    for i in range(count):
        folder = root / f"add-{i}"
        folder.mkdir(parents=True)
        (folder / "task.toml").write_text(f'id = "add-{i}"\ntitle = "Add {i}"\ndifficulty = "easy"\n')
        (folder / "prompt.md").write_text("Write `add(a, b)` returning the sum of a and b.\n")
        (folder / "test_solution.py").write_text(BANK_TEST.format(i=i, expected=2 + i))
        (folder / "reference.py").write_text("def add(a, b):\n    return a + b\n")
    return f"dir:{root}"


def reference_judge(task: TaskSpec, source: str, *, keep_dir: Path | None = None, stop=None):
    """Passes exactly the reference solution: the serving side is under test here, not pytest."""
    from soak.sandbox.judge import Verdict

    ok = source.strip() == task.reference.strip()
    return Verdict(result="pass" if ok else "fail", tests_passed=int(ok), tests_total=1,
                   error_kind="" if ok else "AssertionError", error_tail="" if ok else "assert add(2, 0) == 2")


def fast_flaky():
    """The flaky scenario at zero latency, without crashes (in-thread, nothing would restart the sim)."""
    from soak.errors import BadInput
    from soak.sim.server import Scenario, load_scenario

    try:
        base = load_scenario("flaky")
    except BadInput:
        base = Scenario.model_validate({
            "coder": {"p_correct": 0.7, "p_fix": 0.8},
            "faults": [
                {"kind": "http_500", "rate": 0.04}, {"kind": "http_503", "rate": 0.03}, {"kind": "drop", "rate": 0.03},
                {"kind": "truncate", "rate": 0.03}, {"kind": "stall", "rate": 0.02, "seconds": 5},
                {"kind": "name_absorbs_args", "rate": 0.03}, {"kind": "bad_json_args", "rate": 0.03},
                {"kind": "no_usage", "rate": 0.05},
            ],
        })
    faults = [f.model_copy(update={"seconds": min(f.seconds, 2.0)}) for f in base.faults if f.kind != "crash"]
    timing = {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 64}
    return base.model_copy(update={"timing": base.timing.model_validate(timing), "faults": faults})


def sim_config(url: str, suite: str, **settings) -> SoakConfig:
    endpoint = Endpoint(base_url=url, model="soak-sim", retries=1, retry_backoff_seconds=0.01)
    settings.setdefault("budgets", {"task_seconds": 30, "stale_seconds": 0.5, "max_calls": 10})
    settings.setdefault("error_budget", {"max_infra_fraction": 0.9})
    return SoakConfig(endpoints={"sim": endpoint}, roles={"orchestrator": "sim", "coder": "sim"}, suite=suite,
                      **settings)


def folder_for(tmp_path: Path, config: SoakConfig, limits: RunLimits, run_id: str = "sim-run"):
    folder = RunFolder(tmp_path / "data" / run_id)
    folder.path.mkdir(parents=True)
    info = RunInfo(run_id=run_id, created_at=time.time(), config=redact(config.model_dump(mode="json")),
                   limits=limits)
    folder.write_info(info)
    return folder, info


@pytest.mark.slow
def test_flaky_sim_150_attempts_one_row_each_and_every_call_recorded(tmp_path):
    from soak.sim.server import SimServer
    from soak.tasks.suites import load_suites

    suite = write_bank(tmp_path / "bank")
    sim = SimServer(fast_flaky(), seed=11, suite=suite)
    url = sim.start()
    try:
        config = sim_config(url, suite, concurrency=4)
        folder, info = folder_for(tmp_path, config, RunLimits(max_tasks=150))
        end = run_night(folder, info, config, load_suites(suite),
                        SessionOptions(judge=reference_judge, console=Console(file=io.StringIO())))
        served = sim.stats.requests
    finally:
        sim.stop()
    assert end.exit_code == 0
    rows = tasks_of(folder)
    assert len(rows) == 150
    assert len({(r.cycle, r.task_id) for r in rows}) == 150
    assert_calls_add_up(folder)
    calls = calls_of(folder)
    assert len(calls) == served
    outcomes = Counter(r.outcome for r in rows)
    assert outcomes["pass"] and len(outcomes) >= 2, outcomes
    assert any(c.status != "ok" for c in calls) and any(c.integrity not in ("ok", "none") for c in calls)
    assert len(pd.read_csv(folder.path / "calls.csv")) == served


CHILD = """
import sys
from pathlib import Path

sys.path.insert(0, {tests!r})
from tests.night.test_loop import reference_judge

from soak.night.wiring import SessionOptions, run_night
from soak.record.folder import RunFolder
from soak.tasks.suites import load_suites

folder = RunFolder(Path(sys.argv[1]))
info = folder.read_info()
config = info.config
sys.exit(run_night(folder, info, config, load_suites(config.suite),
                   SessionOptions(quiet=True, judge=reference_judge)).exit_code)
"""


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume_loses_and_duplicates_nothing(tmp_path):
    import subprocess
    import sys

    from soak.sim.server import start_subprocess

    suite = write_bank(tmp_path / "bank")
    scenario = fast_flaky().model_copy(update={"timing": fast_flaky().timing.model_copy(
        update={"ttft_seconds": (0.0, 0.02)})})
    sim, url = start_subprocess(scenario, seed=5, suite=suite)
    child = tmp_path / "child.py"
    child.write_text(CHILD.format(tests=str(REPO)))
    config = sim_config(url, suite, concurrency=4)
    folder, _ = folder_for(tmp_path, config, RunLimits(max_tasks=120))
    rng = random.Random(2024)
    tasks_csv = folder.path / "tasks.csv"

    def rows_written() -> int:
        return tasks_csv.read_bytes().count(b"\n") if tasks_csv.exists() else 0

    killed = 0
    try:
        for _ in range(6):
            # Each kill lands once the session has recorded a random number of tasks (0: right at its start) while
            # the other attempts are mid-flight; 6 kills of at most 12 rows each never reach the 120 the run needs.
            sessions, rows, after = len(folder.read_info().sessions), rows_written(), rng.randint(0, 12)
            process = subprocess.Popen([sys.executable, str(child), str(folder.path)], stdout=subprocess.DEVNULL)
            wait_until(lambda: len(folder.read_info().sessions) > sessions, timeout=60, interval=0.005,  # noqa: B023
                       what="the child's session", process=process)
            wait_until(lambda: rows_written() >= rows + after, timeout=60, interval=0.005,  # noqa: B023
                       what=f"{after} more rows before the kill", process=process)
            process.kill()
            process.wait()
            assert folder.read_info().sessions[-1].stopped_at is None, "the session ended before its kill"
            killed += 1
        final = subprocess.run([sys.executable, str(child), str(folder.path)], stdout=subprocess.DEVNULL, timeout=120)
    finally:
        sim.terminate()
        sim.wait()
    assert final.returncode == 0
    info = folder.read_info()
    assert info.sessions[-1].reason == "tasks"
    crashed = [s for s in info.sessions if s.stopped_at is None]
    assert len(crashed) == killed and crashed == info.sessions[:killed]
    rows = tasks_of(folder)
    finished = [(r.cycle, r.task_id) for r in rows if r.outcome != "cancelled"]
    assert len(finished) == 120 == len(set(finished)), "a row was lost or duplicated"
    last = max(cycle for cycle, _ in finished)
    ids = {r.task_id for r in rows}
    for cycle in range(1, last):
        assert {t for c, t in finished if c == cycle} == ids, f"cycle {cycle} has a hole"
    assert_calls_add_up(folder, orphans_allowed=True)
    for name in ("tasks", "calls", "events", "samples"):
        pd.read_csv(folder.path / f"{name}.csv")
    assert events_of(folder).count("resume") == len(info.sessions) - 1


# --- the command line --------------------------------------------------------------------------------

SECRET = "hunter2-0123456789-secret"


class EchoesTheKey(BaseHTTPRequestHandler):
    """Refuses every chat call with an error that quotes the Authorization header back."""

    def do_POST(self):  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = f'{{"error": {{"message": "invalid key: {self.headers.get("authorization")} ({SECRET})"}}}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self):  # noqa: N802
        self.send_response(200 if self.path.endswith("/models") else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def invoke(*args: str):
    from click.testing import CliRunner

    from soak.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_no_api_key_reaches_any_file(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoesTheKey)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOAK_TEST_API_KEY", SECRET)
    suite = write_bank(tmp_path / "bank", 2)
    config = tmp_path / "soak.toml"
    config.write_text(
        f'suite = "{suite}"\n[endpoints.default]\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\n'
        f'model = "m"\napi_key_env = "SOAK_TEST_API_KEY"\nretries = 0\nextra_body = {{api_key = "{SECRET}"}}\n'
    )
    try:
        result = invoke("run", "--config", str(config), "--tasks", "3", "--run-id", "keys", "--quiet")
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    folder = tmp_path / "data" / "keys"
    rows = list(read_rows(folder / "tasks.csv", TaskRow))
    assert [r.outcome for r in rows] == ["infra_error"] * 3
    assert "invalid key" in (folder / "calls.csv").read_text()
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len(files) > 5
    assert not [p for p in files if SECRET.encode() in p.read_bytes()]
    assert SECRET not in result.output
    assert '"api_key_env": "SOAK_TEST_API_KEY"' in (folder / "run.json").read_text()


@pytest.mark.parametrize("args, message", [
    (["--hours", "1", "--tasks", "3"], "one of --hours"),
    (["--minutes", "-1"], "positive"),
    (["--concurrency", "0"], "at least 1"),
    (["--repeat", "0"], "--repeat must be from 1 to 100"),
    (["--base-url", "http://127.0.0.1:9/v1"], "go together"),
    (["--resume", "nope"], "no run 'nope'"),
    (["--run-id", "../escape", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], "run id"),
    (["--suite", "nonsense", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], "unknown suite"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    suite = write_bank(tmp_path / "bank", 1)
    result = invoke("run", *args, *([] if "--suite" in args or "--resume" in args else ["--suite", suite]))
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_resume_refuses_config_flags_and_a_second_start_of_the_same_id(tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    folder, info, config = new_folder(tmp_path / "data", RunLimits(max_tasks=1), run_id="r")
    result = invoke("run", "--resume", "r", "--concurrency", "3")
    assert result.exit_code == 2 and "--concurrency" in result.output
    result = invoke("run", "--resume", "r", "--repeat", "3")
    assert result.exit_code == 2 and "--repeat" in result.output
    result = invoke("run", "--run-id", "r", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--suite",
                    write_bank(tmp_path / "bank", 1))
    assert result.exit_code == 2 and "--resume r" in result.output


def test_resume_with_new_limits_counts_them_from_now(tmp_path, monkeypatch):
    from soak.night.lifecycle import RunOptions, reopen_run

    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    suite = write_bank(tmp_path / "bank", 3)
    folder, info, config = new_folder(tmp_path / "data", RunLimits(max_tasks=3), run_id="r", suite=suite)
    run(folder, info, config, FakeTasks())
    folder, info, config, tasks = reopen_run(RunOptions(resume="r", tasks=2))
    assert info.limits == RunLimits(max_tasks=5)
    run(folder, info, config, FakeTasks(), tasks=tasks)
    assert len(tasks_of(folder)) == 5
    folder, info, config, tasks = reopen_run(RunOptions(resume="r", minutes=1))
    assert info.limits.duration_seconds == pytest.approx(info.active_seconds + 60)
    assert folder.read_info().limits == info.limits  # written for a detached child to read


def test_status_and_runs_read_the_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    assert "no runs" in invoke("runs").output
    assert invoke("status").exit_code == 2
    folder, info, config = new_folder(tmp_path / "data", RunLimits(max_tasks=5), run_id="first")
    run(folder, info, config, FakeTasks(outcome=lambda t, n: "pass" if n % 5 else "timeout"))
    listing = invoke("runs").output
    assert "first" in listing and "finished" in listing and "80%" in listing
    status = invoke("status").output
    assert "run first: finished (tasks)" in status and "5 done" in status and "timeout" in status
    assert "not running" in invoke("stop", "first").output


@pytest.mark.slow
def test_detach_status_stop_from_other_processes(tmp_path):
    import subprocess
    import sys

    from soak.sim.server import Scenario, start_subprocess

    suite = write_bank(tmp_path / "bank", 4)
    sim, url = start_subprocess(Scenario.model_validate({"timing": {"ttft_seconds": [0.2, 0.5]}}), suite=suite)
    config = tmp_path / "soak.toml"
    config.write_text(f'suite = "{suite}"\nconcurrency = 2\n[endpoints.default]\nbase_url = "{url}"\n'
                      f'model = "soak-sim"\napi_key_env = "SOAK_TEST_API_KEY"\n')
    env = {**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data"), "SOAK_TEST_API_KEY": SECRET}
    soak = [sys.executable, "-c", "from soak.cli import main; main()"]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*soak, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    folder = RunFolder(tmp_path / "data" / "night")
    try:
        started = cli("run", "--config", str(config), "--minutes", "30", "--run-id", "night", "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "detached" in started.stdout
        pid = read_pid(folder)
        assert pid and os.getsid(pid) == pid  # its own session: closing the terminal does not reach it
        wait_until(lambda: len(tasks_of(folder)) >= 2, timeout=90, interval=0.2, what="two tasks of the detached run")
        status = cli("status", "night").stdout
        assert "run night: running" in status and "done" in status and "left" in status
        assert "night" in cli("runs").stdout and "running" in cli("runs").stdout
        assert cli("run", "--resume", "night").returncode == 2  # one process per run
        stopped = cli("stop", "night")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
    finally:
        if read_pid(folder):
            os.kill(read_pid(folder), signal.SIGKILL)
        sim.terminate()
        sim.wait()
    info = folder.read_info()
    assert (info.sessions[-1].reason, info.sessions[-1].exit_code) == ("signal", 130)
    assert info.sessions[-1].detached
    assert "stopped" in cli("status", "night").stdout
    rows = tasks_of(folder)
    assert len(rows) >= 2 and all(r.outcome in ("pass", "cancelled") for r in rows)
    assert (folder.path / "runner.log").is_file() and not (folder.path / "runner.pid").exists()
    assert not [p for p in folder.path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


# --- requeue: --resume RUN --retry OUTCOMES --------------------------------------------------------


def test_retry_reruns_those_outcomes_and_the_new_rows_supersede_the_old(tmp_path):
    from soak.night.progress import RunStats
    from soak.record.read import load_run
    from soak.record.summary import problem_table

    folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=2), concurrency=2)
    first = {"task-1": "infra_error", "task-2": "harness_error", "task-3": "fail"}
    end, _ = run(folder, info, config, FakeTasks(outcome=lambda t, n: first.get(t, "pass")))
    assert end.reason == "cycles" and len(tasks_of(folder)) == 12
    (folder.path / "work" / "task-1" / "1" / "kept.txt").write_text("the infra error's evidence")

    retried = FakeTasks()
    runner_tasks = make_tasks()
    folder.open()
    try:
        runner = Runner(folder, folder.read_info(), config, runner_tasks, retried,
                        SessionStart(Never(), retry=("infra_error",)))
        assert runner.schedule.taken == 10
        end = asyncio.run(runner.run())
    finally:
        folder.close()
    # Only the infra errors ran again (one per cycle); harness_error was not asked for, fail never is.
    assert sorted((c, t) for c, t, _ in retried.started) == [(1, "task-1"), (2, "task-1")]
    rows = tasks_of(folder)
    assert len(rows) == 14  # nothing deleted: both rows of each retried attempt stay in tasks.csv
    assert [(r.outcome, r.session) for r in rows if r.task_id == "task-1"][-2:] == [("pass", 1), ("pass", 1)]
    assert sorted(r.outcome for r in rows if r.task_id == "task-1") == ["infra_error", "infra_error", "pass", "pass"]
    assert_calls_add_up(folder)
    # Every aggregate counts the new row alone: the record reader, the problem table, status counts.
    record = load_run(folder.path)
    assert len(record.tasks) == 12 and set(record.tasks.loc[record.tasks["task_id"] == "task-1", "outcome"]) == {
        "pass"}
    assert any("2 rows superseded" in note for note in record.notes)
    table = problem_table(record.tasks)
    assert table.loc["task-1", "attempts"] == 2 and table.loc["task-1", "infra_errors"] == 0
    assert table.loc["task-2", "outcomes"] == "harness_error 2"
    stats = RunStats.from_folder(folder.layout, folder.read_info())
    assert stats.done == 12 and stats.outcomes["infra_error"] == 0 and stats.outcomes["harness_error"] == 2
    # The superseded attempt's work folder is kept beside the new one.
    assert (folder.path / "work" / "task-1" / "1.session-0" / "kept.txt").is_file()
    assert (folder.path / "work" / "task-1" / "1").is_dir()
    resume = [e for e in read_rows(folder.path / "events.csv", EventRow) if e.kind == "resume"][0]
    assert "2 to retry (infra_error)" in resume.detail

    # A later resume without --retry runs nothing again: the retried attempts are done now.
    again = FakeTasks()
    run(folder, folder.read_info(), config, again)
    assert again.started == []


def test_live_stats_replace_a_superseded_outcome():
    from soak.night.progress import RunStats

    stats = RunStats(RunInfo(run_id="r", created_at=0, config={}, limits=RunLimits()))
    row = TaskRow(run_id="r", cycle=1, task_id="t", suite="s", started_at=0, ended_at=1, duration_s=1,
                  outcome="infra_error")
    stats.task(row)
    stats.task(row.model_copy(update={"session": 1, "outcome": "pass"}))
    assert dict(stats.outcomes) == {"pass": 1} and stats.done == 1


@pytest.mark.parametrize("args, message", [
    (["--retry", "infra_error"], "--resume"),
    (["--resume", "r", "--retry", "fail"], "re-roll"),
    (["--resume", "r", "--retry", "bogus"], "unknown outcome"),
])
def test_retry_refuses_what_it_cannot_do(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    new_folder(tmp_path / "data", RunLimits(max_tasks=1), run_id="r")
    suite = [] if "--resume" in args else ["--suite", write_bank(tmp_path / "bank", 1)]
    result = invoke("run", *args, *suite)
    assert result.exit_code == 2 and message in result.output, result.output


def test_retry_on_the_sim_reruns_infra_errors_and_every_aggregate_counts_the_new_row(tmp_path, monkeypatch):
    """A real `soak run` on `soak sim` whose 5xx faults exhaust the retries of the first calls (infra_error), then
    `soak run --resume RUN --retry infra_error`: the CSV keeps both rows, every aggregate counts the new one."""
    from soak.decisions.compare import compare_runs
    from soak.decisions.route import RouteRules, route_runs
    from soak.record.read import load_run
    from soak.record.summary import problem_table
    from soak.sim.server import Scenario, SimServer

    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("soak.agent.loop.judge_solution", reference_judge)  # the serving side is under test
    suite = write_bank(tmp_path / "bank", 2)
    scenario = Scenario.model_validate({
        "timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 64},
        "faults": [{"kind": "http_500", "at_requests": [1, 2]}],
    })
    with SimServer(scenario, suite=suite) as sim:
        config = tmp_path / "soak.toml"
        config.write_text(
            f'suite = "{suite}"\nconcurrency = 1\n[endpoints.default]\nbase_url = "{sim.base_url}"\n'
            'model = "soak-sim"\nretries = 1\nretry_backoff_seconds = 0.01\n'
        )
        result = invoke("run", "--config", str(config), "--run-id", "night", "--quiet")
        assert result.exit_code == 0, result.output
        folder = tmp_path / "data" / "night"
        before = tasks_of(RunFolder(folder))
        assert sorted(r.outcome for r in before) == ["infra_error", "pass"], [(r.outcome, r.error_tail) for r in before]
        failed = next(r for r in before if r.outcome == "infra_error")

        result = invoke("run", "--resume", "night", "--retry", "infra_error", "--quiet")
        assert result.exit_code == 0, result.output
    rows = tasks_of(RunFolder(folder))
    assert len(rows) == 3 and rows[:2] == before  # appended, nothing rewritten or deleted
    assert (rows[2].task_id, rows[2].cycle, rows[2].session, rows[2].outcome) == (failed.task_id, 1, 1, "pass")
    record = load_run(folder)
    assert list(record.tasks["outcome"]) == ["pass", "pass"]
    table = problem_table(record.tasks)
    assert (table["attempts"] == 1).all() and (table["infra_errors"] == 0).all() and (table["pass_rate"] == 1).all()
    status = invoke("status", "night").output
    assert "2 done" in status and "infra_error" not in status
    comparison = compare_runs(str(folder), str(folder))
    assert (comparison.a.passes, comparison.a.attempts) == (2, 2)
    _, routed_table, _ = route_runs([str(folder)], RouteRules())
    assert (routed_table["attempts"] == 1).all() and (routed_table["infra_errors"] == 0).all()


def test_repeat_3_on_the_sim_gives_each_task_three_tries_per_cycle_each_its_own_seed_and_pass_k(tmp_path, monkeypatch):
    """A real `soak run --repeat 3` on `soak sim`: three rows per task in the cycle, one pass over the suite apart in
    start order, each try's calls under it with a seed of its own; the report's pass^k goes to k = 3 and its pages
    and the export name every try apart."""
    from soak.sim.server import Scenario, SimServer

    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOAK_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setattr("soak.agent.loop.judge_solution", reference_judge)  # the schedule is under test, not pytest
    suite = write_bank(tmp_path / "bank", 3)
    scenario = Scenario.model_validate({
        "timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 64},
        "coder": {"p_correct": 0.5, "p_fix": 0.5},
    })
    with SimServer(scenario, suite=suite) as sim:
        config = tmp_path / "soak.toml"
        config.write_text(f'suite = "{suite}"\nconcurrency = 1\n[endpoints.default]\nbase_url = "{sim.base_url}"\n'
                          'model = "soak-sim"\nseed = 5\n')
        result = invoke("run", "--config", str(config), "--run-id", "night", "--repeat", "3", "--quiet")
        assert result.exit_code == 0, result.output
    folder = RunFolder(tmp_path / "data" / "night")
    rows = sorted(tasks_of(folder), key=lambda r: r.started_at)
    assert Counter((r.task_id, r.cycle) for r in rows) == {(f"add-{i}", 1): 3 for i in range(3)}
    assert [r.repeat for r in rows] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [r.task_id for r in rows[:3]] * 3 == [r.task_id for r in rows]
    assert_calls_add_up(folder)
    first_seeds = {(c.task_id, c.repeat): c.seed for c in calls_of(folder) if c.call_index == 0}
    assert len(first_seeds) == 9 and len(set(first_seeds.values())) == 9

    result = invoke("report", "night", "--output", str(tmp_path / "report"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["repeats"]
    assert (summary["tasks"], summary["min_tries"], [k["k"] for k in summary["k"]]) == (3, 3, [1, 2, 3])
    pages = {p.relative_to(tmp_path / "report" / "attempts").as_posix()
             for p in (tmp_path / "report" / "attempts").rglob("*.html")}
    assert pages == {f"night/add-{i}/{name}.html" for i in range(3) for name in ("1", "1-2", "1-3")}
    result = invoke("export", "night", "--out", str(tmp_path / "atif"))
    assert result.exit_code == 0, result.output
    index = json.loads((tmp_path / "atif" / "index.json").read_text())
    assert sorted(t["path"] for t in index["trajectories"]) == sorted(f"add-{i}/{name}.json" for i in range(3)
                                                                      for name in ("1", "1-2", "1-3"))
