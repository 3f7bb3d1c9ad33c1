"""Deadlines that hold, the live view, the end-of-run message and the rehearsal (`soak run --rehearse`)."""

import asyncio
import io
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from soak.agent.attempt import AttemptContext, Ledger
from soak.config import Endpoint, SoakConfig, redact
from soak.night.loop import END_RESERVE_SECONDS, Runner, SessionStart, deadline_slack, grace_for
from soak.night.plan import RunOptions, plan_new_run
from soak.night.progress import Current, RunStats
from soak.record.folder import RunFolder
from soak.record.read import read_rows
from soak.record.schema import CallRow, RunInfo, RunLimits, TaskRow
from soak.tasks.spec import TaskSpec
from tests.helpers import EXERCISM_SUITE

SUITE = EXERCISM_SUITE



def tasks_of(run: Path) -> list[TaskRow]:
    return list(read_rows(run / "tasks.csv", TaskRow))


# --- the grace rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "grace"), [(60, 40), (120, 40), (600, 40), (1200, 40), (3600, 160),
                                               (8 * 3600, 300), (100 * 3600, 300)])
def test_grace_scales_with_the_run_and_fits_its_slack(length, grace):
    assert grace_for(length) == grace
    assert grace_for(length) + END_RESERVE_SECONDS <= deadline_slack(length)
    assert deadline_slack(length) == max(60, 0.05 * length)


def test_a_configured_grace_is_kept():
    assert grace_for(600, 300) == 300 and grace_for(8 * 3600, 5) == 5 and SoakConfig().grace_seconds is None


def new_folder(tmp_path: Path, limits: RunLimits, **settings) -> tuple[RunFolder, RunInfo, SoakConfig]:
    config = SoakConfig(endpoints={"default": Endpoint(base_url="http://127.0.0.1:9/v1", model="m")}, **settings)
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir(parents=True)
    info = RunInfo(run_id="run", created_at=time.time(), config=redact(config.model_dump(mode="json")), limits=limits)
    folder.write_info(info)
    return folder, info, config


def make_tasks(n: int = 4) -> list[TaskSpec]:
    return [TaskSpec(id=f"t{i}", title="t", difficulty="easy", suite="test", prompt="p", tests={}, reference="")
            for i in range(n)]


class Never:
    async def wait_until_ready(self, timeout: float) -> bool:
        return False


def test_start_up_counts_toward_the_deadline(tmp_path):
    """The session starts when `soak run` does, not once its stack is up: starting a server eats the night."""
    folder, info, config = new_folder(tmp_path, RunLimits(duration_seconds=600))
    began = time.time() - 30
    runner = Runner(folder, info, config, make_tasks(), None, SessionStart(Never(), started_at=began))
    folder.open()
    try:
        runner.begin()
    finally:
        folder.close()
    assert runner.deadline_at == pytest.approx(began + 600)
    assert folder.read_info().sessions[0].started_at == pytest.approx(began)
    assert runner.grace == 40


# --- the live view -----------------------------------------------------------------------------


def test_the_live_view_shows_each_attempt_round_role_and_elapsed_time(tmp_path):
    """The attempts in flight come from the runner: round and role as the loop tells them (AttemptContext.on_step),
    calls as the attempt's ledger records them (into AttemptContext.totals and on to AttemptContext.on_call)."""
    folder, info, config = new_folder(tmp_path, RunLimits(max_tasks=2), concurrency=2)
    stepped = asyncio.Event()
    release = asyncio.Event()
    told = Counter()

    async def task_fn(task: TaskSpec, attempt: AttemptContext) -> TaskRow:
        ledger = Ledger(max_calls=10, max_completion_tokens=10**6, on_call=attempt.on_call, totals=attempt.totals)
        ledger.record(CallRow(run_id=attempt.run_id, **attempt.attempt.row_fields(), call_index=0, role="orchestrator",
                              endpoint="e", model="m", stream=True, started_at=time.time(), duration_s=0.1))
        attempt.on_step(2, "coder")
        told[task.id] += 1
        if len(told) == 2:
            stepped.set()
        await release.wait()
        now = time.time()
        return TaskRow(run_id=attempt.run_id, **attempt.attempt.row_fields(),
                       suite="test", started_at=now, ended_at=now, duration_s=0.0, outcome="pass", rounds=2)

    async def night() -> str:
        stats = RunStats(info)
        folder.listeners.append(stats)
        runner = Runner(folder, info, config, make_tasks(2), task_fn, SessionStart(Never()))
        stats.in_flight = lambda: [
            Current(f.context.attempt, f.started_at, f.round, f.role, f.context.totals.calls)
            for f in runner.in_flight.values()
        ]
        job = asyncio.create_task(runner.run())
        await asyncio.wait_for(stepped.wait(), 10)
        console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
        console.print(stats.render())
        release.set()
        await job
        return console.file.getvalue()

    folder.open()
    try:
        view = asyncio.run(night())
    finally:
        folder.close()
    rows = [line.split() for line in view.splitlines()]
    current = [row for row in rows if row and row[0] in ("t0", "t1")]
    assert {row[0] for row in current} == {"t0", "t1"}
    for row in current:  # task, cycle, round, role, calls, elapsed
        assert row[1:5] == ["1", "2", "coder", "1"] and row[6] == "s"
    assert any(row[:5] == ["task", "cycle", "round", "role", "calls"] for row in rows)
    assert "0 done" in view and "in flight" in view


# --- the end of a run --------------------------------------------------------------------------


def test_the_end_of_a_run_names_its_folder_and_the_report_command(data_dir, soak):
    from soak.sim.scenario import load_scenario
    from soak.sim.server import SimServer

    with SimServer(load_scenario("zero"), suite=SUITE) as sim:
        url = sim.start()
        result = soak("run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE, "--tasks", "2",
                      "--run-id", "first")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich may wrap long lines
    assert f"run folder: {data_dir / 'first'}" in text
    assert "next: soak report first" in text and str(data_dir.parent / "reports" / "first") in text


# --- the rehearsal -----------------------------------------------------------------------------


def test_the_rehearsal_plans_soak_sim_as_a_supervised_server_for_both_roles(data_dir, soak):
    info, config, tasks = plan_new_run(RunOptions(rehearse=True, run_id="r"))
    (server,) = config.stack.servers
    assert "-m soak.cli sim" in server.up and "--scenario rehearsal" in server.up
    assert f"--state {(data_dir / 'r' / 'sim-state.json').resolve()}" in server.up
    assert config.roles.orchestrator == config.roles.coder == "sim"
    assert config.endpoints["sim"].base_url == server.base_url
    assert config.endpoints["sim"].energy_metrics_url == server.base_url.removesuffix("/v1") + "/dcgm/metrics"
    assert info.stack.model_dump() == {"rehearsal": True} and info.limits.max_cycles == 1 and len(tasks) >= 20
    refused = soak("run", "--rehearse", "--base-url", "http://x/v1", "--model", "m")
    assert refused.exit_code == 2 and "--rehearse" in refused.output


@pytest.mark.slow
def test_the_rehearsal_shows_a_whole_night_then_its_report(data_dir, soak):
    started = time.monotonic()
    result = soak("run", "--rehearse", "--quiet", "--run-id", "rehearsal")
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    run = data_dir / "rehearsal"
    tasks = pd.read_csv(run / "tasks.csv")
    assert (tasks["outcome"] == "pass").sum() >= len(tasks) // 2
    revised = tasks[tasks["rounds"] >= 2]
    assert (revised["outcome"] == "pass").any()  # a revision fed the real error fixed a failure
    assert set(tasks.loc[tasks["task_id"] == "word-frequency", "outcome"]) == {"call_cap"}  # over-iteration
    calls = pd.read_csv(run / "calls.csv")
    assert calls["integrity"].isin(["mangled_name", "bad_json"]).any()
    kinds = list(pd.read_csv(run / "events.csv")["kind"])
    assert kinds.index("down") < kinds.index("restart") < kinds.index("up")
    samples = pd.read_csv(run / "samples.csv")
    assert (samples["source"] == "energy:sim").any()  # the sim's exporter, read beside the server's /metrics
    html = data_dir.parent / "reports" / "rehearsal"
    assert html.exists() and "rehearsal report:" in result.output
    assert "kJ per solved task" in (html / "index.html").read_text()
    assert took < 240, took  # about two minutes on 2 cores


# --- a deadline on a slow server ---------------------------------------------------------------


@pytest.mark.slow
def test_a_two_minute_night_of_long_attempts_ends_within_a_minute_of_its_deadline(tmp_path, data_dir, soak):
    """Calls decode at 0.7 tokens/s, so an attempt takes over 3 minutes: at the deadline the ones in flight get their
    grace (40 s for 2 minutes), then are cancelled, one row each; a resume on a fast server redoes them."""
    from soak.sim.scenario import Scenario, Timing, load_scenario
    from soak.sim.server import SimServer
    from soak.stack.servers import free_port

    port = free_port()
    slow = SimServer(Scenario(timing=Timing(ttft_seconds=0, decode_tokens_per_second=0.7, tokens_per_chunk=1)),
                     suite=SUITE)
    with slow:
        url = slow.start(port=port)
        started = time.monotonic()
        first = soak("run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE, "--minutes", "2",
                     "--quiet", "--run-id", "long")
        took = time.monotonic() - started
    assert first.exit_code == 0, first.output
    assert 120 <= took <= 180, took
    run = data_dir / "long"
    info = RunFolder(run).read_info()
    assert info.sessions[0].reason == "deadline" and info.sessions[0].active_seconds <= 180
    rows = tasks_of(run)
    assert len({(r.task_id, r.cycle, r.session) for r in rows}) == len(rows)  # every attempt one row
    cancelled = {(r.task_id, r.cycle) for r in rows if r.outcome == "cancelled"}
    assert cancelled and all("deadline" in r.error_tail for r in rows if r.outcome == "cancelled")
    calls = {(c.task_id, c.cycle, c.session) for c in read_rows(run / "calls.csv", CallRow)}
    assert calls <= {(r.task_id, r.cycle, r.session) for r in rows}  # no call belongs to no attempt

    done = {(r.task_id, r.cycle) for r in rows if r.outcome != "cancelled"}
    left = len(load_suites_ids()) - sum(cycle == 1 for _, cycle in done)
    with SimServer(load_scenario("zero"), suite=SUITE) as fast:
        fast.start(port=port)
        again = soak("run", "--resume", "long", "--tasks", str(left), "--quiet")
    assert again.exit_code == 0, again.output
    redone = {(r.task_id, r.cycle): r.outcome for r in tasks_of(run) if r.session == 1}
    assert all(redone.get(key) not in (None, "cancelled") for key in cancelled), redone


def load_suites_ids() -> list[str]:
    from soak.tasks.suites import load_suites

    return [task.id for task in load_suites(SUITE)]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
