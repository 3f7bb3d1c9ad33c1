import asyncio
import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from soak.config import Server, Stack
from soak.errors import BadInput
from soak.files import read_process, write_process
from soak.stack.servers import StackSupervisor, free_port, gpu_fraction_warning
from tests.helpers import until


def static_server(tmp_path, name="web") -> Server:
    """A real HTTP server whose /health is a file: killing it is a real outage."""
    root = tmp_path / name
    root.mkdir(parents=True)
    (root / "health").write_text("ok")
    port = free_port()
    up = f"cd {root} && exec {sys.executable} -m http.server {port} --bind 127.0.0.1"
    return Server(name=name, up=up, base_url=f"http://127.0.0.1:{port}/v1", start_timeout_seconds=20)


def run_stack(servers, tmp_path, body, **stack_options):
    events = []
    stack = Stack(servers=servers, health_interval_seconds=0.2, failures_before_down=2, **stack_options)
    supervisor = StackSupervisor(stack, tmp_path / "logs", lambda kind, source, detail: events.append((kind, source)))

    async def main():
        await supervisor.start()
        watcher = asyncio.create_task(supervisor.watch())
        try:
            await body(supervisor)
        finally:
            watcher.cancel()
            supervisor.stop()

    asyncio.run(main())
    return supervisor, events


def test_dead_server_is_restarted_and_events_recorded(tmp_path):
    first_pids = []

    async def body(supervisor):
        first_pids.append(supervisor.pids()["web"])
        os.killpg(first_pids[0], signal.SIGKILL)
        await until(lambda: not supervisor.ready.is_set(), timeout=10, interval=0.1,
                    what="the supervisor to notice the kill")
        assert await supervisor.wait_until_ready(20)
        assert supervisor.pids()["web"] != first_pids[0]

    supervisor, events = run_stack([static_server(tmp_path)], tmp_path, body)
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["server_start", "server_ready"]
    assert "down" in kinds and "restart" in kinds and "up" in kinds
    assert kinds.index("down") < kinds.index("restart") < kinds.index("up")
    assert kinds[-1] == "server_stop"
    assert not psutil.pid_exists(first_pids[0]) or psutil.Process(first_pids[0]).status() == psutil.STATUS_ZOMBIE
    assert (tmp_path / "logs" / "web.log").exists()


def test_servers_start_in_order_and_stop_without_orphans(tmp_path):
    servers = [static_server(tmp_path, "a"), static_server(tmp_path, "b")]
    pids = {}

    async def body(supervisor):
        pids.update(supervisor.pids())

    _, events = run_stack(servers, tmp_path, body)
    assert [e for e in events if e[0] == "server_ready"] == [("server_ready", "a"), ("server_ready", "b")]
    for pid in pids.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_already_running_server_is_only_watched(tmp_path):
    spec = static_server(tmp_path)
    outer = StackSupervisor(Stack(servers=[spec]), tmp_path / "outer", lambda *e: None)

    async def main():
        await outer.start()
        try:
            watched = Server(name="web", base_url=spec.base_url)  # no `up`: soak must not manage it
            _, events = await asyncio.to_thread(run_stack, [watched], tmp_path, lambda s: asyncio.sleep(0))
            return events
        finally:
            outer.stop()

    events = asyncio.run(main())
    assert events == [("server_ready", "web")]


def test_server_that_never_comes_up_is_bad_input(tmp_path):
    port = free_port()
    broken = Server(name="broken", up=f"echo boom; exit 3 # {port}", base_url=f"http://127.0.0.1:{port}/v1",
                    start_timeout_seconds=5)
    with pytest.raises(BadInput, match="broken exited with code 3 before it was healthy: boom"):
        run_stack([broken], tmp_path, lambda s: asyncio.sleep(0))
    unmanaged = Server(name="gone", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(BadInput, match="has no `up` command"):
        run_stack([unmanaged], tmp_path, lambda s: asyncio.sleep(0))


def test_gpu_fraction_warning():
    servers = [Server(name=n, up=f"vllm serve m --gpu-memory-utilization {f}", base_url="http://x/v1")
               for n, f in (("a", 0.5), ("b", 0.45))]
    assert "0.95" in gpu_fraction_warning(servers)
    assert gpu_fraction_warning(servers[:1]) == ""


@pytest.mark.slow
def test_busy_server_is_left_alone_until_silent_past_the_hung_limit(tmp_path):
    """A stopped process still accepts connections but never answers: busy first, hung later."""

    async def freeze(supervisor):
        os.kill(supervisor.pids()["web"], signal.SIGSTOP)
        await asyncio.sleep(1.5)

    _, patient = run_stack([static_server(tmp_path / "a")], tmp_path / "a", freeze, health_timeout_seconds=0.3,
                           hung_after_seconds=60)
    assert [kind for kind, _ in patient if kind in ("health_fail", "down", "restart")] == []

    async def freeze_until_restarted(supervisor):
        frozen = supervisor.pids()["web"]
        os.kill(frozen, signal.SIGSTOP)
        # The restart stops the frozen server synchronously (SIGTERM, up to 5 s, then SIGKILL), holding the loop.
        await until(lambda: supervisor.pids().get("web") not in (None, frozen) and supervisor.ready.is_set(),
                    timeout=30, interval=0.1, what="the hung server restarted")

    _, strict = run_stack([static_server(tmp_path / "b")], tmp_path / "b", freeze_until_restarted,
                          health_timeout_seconds=0.3, hung_after_seconds=1)
    kinds = [kind for kind, _ in strict]
    assert kinds.index("health_fail") < kinds.index("down") < kinds.index("restart") < kinds.index("up")


def session_of(spec: Server, logs, events: list, **options) -> StackSupervisor:
    stack = Stack(servers=[spec], health_interval_seconds=0.2, failures_before_down=2, **options)
    return StackSupervisor(stack, logs, lambda kind, source, detail: events.append((kind, detail)))


async def killed_and_healed(supervisor: StackSupervisor) -> int:
    """Kill the server's process group; wait for the supervisor to notice and bring it back; the new pid."""
    os.killpg(supervisor.pids()["web"], signal.SIGKILL)
    await until(lambda: not supervisor.ready.is_set(), timeout=10, interval=0.05, what="the kill noticed")
    assert await supervisor.wait_until_ready(30)
    return supervisor.pids()["web"]


def test_a_resumed_run_takes_back_the_server_it_started_and_heals_it_within_the_same_budget(tmp_path):
    """soak killed: the server it started lives on in its own session. The next session of the run (the same run
    folder) takes it back, restarts it when it dies as the first session did, and counts the first's restarts."""
    spec, logs = static_server(tmp_path), tmp_path / "logs"
    first_events, second_events = [], []

    async def main():
        first = session_of(spec, logs, first_events, max_restarts_per_hour=2)
        await first.start()
        watcher = asyncio.create_task(first.watch())
        healed = await killed_and_healed(first)
        watcher.cancel()  # the first session dies here, without stopping its server
        second = session_of(spec, logs, second_events, max_restarts_per_hour=2)
        await second.start()
        assert second.pids() == {"web": healed}
        watcher = asyncio.create_task(second.watch())
        try:
            again = await killed_and_healed(second)
            assert again != healed and psutil.Process(again).status() != psutil.STATUS_ZOMBIE
            os.killpg(again, signal.SIGKILL)  # a third death in the hour: past the budget of two
            await until(lambda: ("note", "not restarted: 2 restarts in the last hour") in second_events,
                        timeout=10, interval=0.05, what="the budget spent")
        finally:
            watcher.cancel()
            second.stop()
        return healed, again

    healed, again = asyncio.run(main())
    assert second_events[0] == ("server_ready", f"pid {healed}, started by an earlier session of this run: taken "
                                                "back, restarted on failure")
    restarts = [detail for kind, detail in second_events if kind == "restart"]
    assert restarts == [f"attempt 2 this hour, pid {again}"]
    assert [kind for kind, _ in first_events].count("restart") == 1
    assert not psutil.pid_exists(healed) or psutil.Process(healed).status() == psutil.STATUS_ZOMBIE


def test_a_port_held_by_another_process_is_watched_then_the_server_restarted_from_up(tmp_path):
    """The server this run started is gone and something else answers on its port: watched, said in one line; once
    that process dies, the run's own `up` brings the server back."""
    spec, logs = static_server(tmp_path), tmp_path / "logs"
    events = []

    async def main():
        first = session_of(spec, logs, [])
        await first.start()
        first.stop()  # the pid file stays behind as a killed session leaves it
        (logs / "web.pid").write_text(json.dumps({"pid": 999_999_999, "create_time": 0, "restarts": []}))
        other = session_of(Server(name="other", up=spec.up, base_url=spec.base_url), tmp_path / "other", [])
        await other.start()
        second = session_of(spec, logs, events)
        await second.start()
        assert second.pids() == {}
        watcher = asyncio.create_task(second.watch())
        try:
            other.stop()
            await until(lambda: "up" in [kind for kind, _ in events], timeout=30, interval=0.05,
                        what="the server restarted from up")
            return second.pids()["web"]
        finally:
            watcher.cancel()
            second.stop()

    pid = asyncio.run(main())
    kind, detail = events[0]
    assert kind == "server_ready" and "something else answers" in detail and "stop that process" in detail
    assert [kind for kind, _ in events if kind in ("down", "restart", "up")] == ["down", "restart", "up"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_pid_file_still_names_its_process_after_the_wall_clock_moved(tmp_path):
    """psutil's create_time moves with the boot time the kernel derives from the wall clock (a whole second, which
    NTP shifts), so a server's pid file read an hour later must still name it: by its start after boot."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        path = tmp_path / "sim.pid"
        write_process(path, sleeper.pid, restarts=[])
        recorded = json.loads(path.read_text())
        path.write_text(json.dumps({**recorded, "create_time": recorded["create_time"] - 3}))
        assert read_process(path)[0].pid == sleeper.pid
        path.write_text(json.dumps({**recorded, "since_boot": recorded["since_boot"] - 5}))
        assert read_process(path)[0] is None, "another process started five seconds apart is not this one"
    finally:
        sleeper.kill()
        sleeper.wait()
