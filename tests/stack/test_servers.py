import asyncio
import os
import signal
import sys

import psutil
import pytest

from soak.config import Server, Stack
from soak.errors import BadInput
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
