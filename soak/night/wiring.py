"""One session of a run: the stack, telemetry, exporter and task function around the Runner, and its pid file."""

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import httpx2
from rich.console import Console

from soak.config import SoakConfig
from soak.errors import BadInput
from soak.files import read_process, write_process
from soak.night.attempts import local_attempts
from soak.night.loop import Readiness, RunEnd, Runner, SessionStart, TaskFn
from soak.night.progress import Current, QuietLines, RunStats, live_view, next_steps, summary
from soak.record.folder import RunFolder
from soak.record.schema import RunInfo
from soak.tasks.spec import TaskSpec


class EndpointProbe:
    """With no stack to ask, an endpoint that answers GET <base_url>/models (any status below 500) is back."""

    def __init__(self, base_urls: list[str], interval: float):
        self.urls = [url.rstrip("/") + "/models" for url in dict.fromkeys(base_urls)]
        self.interval = interval

    async def answers(self, client: httpx2.AsyncClient, url: str) -> bool:
        try:
            return (await client.get(url)).status_code < 500
        except httpx2.HTTPError:
            return False

    async def wait_until_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        async with httpx2.AsyncClient(timeout=5.0) as client:
            while True:
                if all([await self.answers(client, url) for url in self.urls]):
                    return True
                if time.monotonic() + self.interval > deadline:
                    return False
                await asyncio.sleep(self.interval)


@dataclass
class SessionOptions:
    """How one session runs, beyond its folder, config and tasks."""

    task_fn: TaskFn | None = None
    """Replaces the whole attempt (default: soak's delegation loop, or the external agent of mode "agent")."""
    judge: Callable[..., Any] | None = None
    """Replaces only the sandbox that judges a solution."""
    retry: tuple[str, ...] = ()
    """The outcomes whose attempts this session runs again."""
    quiet: bool = False
    """Plain progress lines instead of the live view."""
    detached: bool = False
    metrics_port: int | None = None
    console: Console = field(default_factory=Console)
    started_at: float = field(default_factory=time.time)
    """When the session began: the time it takes to start the stack counts as running time, so the deadline holds."""
    stack_up: Callable[[], Awaitable[None]] | None = None
    """Awaited once the stack is up, before the first attempt (a sweep's gates probe the idle servers there)."""


def unmanaged_base_urls(config: SoakConfig) -> list[str]:
    """The base URLs a pause must probe itself: those of the roles in use that no stack server serves (a stack
    server is the supervisor's to judge, and a busy llama-cpp-python would hold the /models probe)."""
    from soak.stack.servers import root_url

    roles = ["coder"] if config.mode == "direct" else ["orchestrator", "coder"]
    managed = {root_url(server.base_url) for server in config.stack.servers}
    urls = dict.fromkeys(config.endpoint_for(role).base_url for role in roles)
    return [url for url in urls if root_url(url) not in managed]


class AllReady:
    """Each check in turn, within one shared timeout."""

    def __init__(self, checks: list[Readiness]):
        self.checks = checks

    async def wait_until_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for check in self.checks:
            if not await check.wait_until_ready(max(0.0, deadline - time.monotonic())):
                return False
        return True


def run_night(folder: RunFolder, info: RunInfo, config: SoakConfig, tasks: list[TaskSpec],
              options: SessionOptions | None = None) -> RunEnd:
    """Run one session in the foreground, with the pid file in place while it runs."""
    options = options or SessionOptions()
    folder.open()
    write_pid(folder)
    try:
        with sigterm_interrupts():
            return asyncio.run(session(folder, info, config, tasks, options))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before the runner took over the signals (starting the stack)
        return RunEnd("signal", "interrupted while starting")
    finally:
        folder.layout.pid.unlink(missing_ok=True)
        folder.close()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (`soak stop`, a service manager) interrupts like Ctrl-C while the stack starts or stops, so the
    servers soak started are stopped too instead of outliving the run (the runner handles signals in between)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def session(folder: RunFolder, info: RunInfo, config: SoakConfig, tasks: list[TaskSpec],
                  options: SessionOptions) -> RunEnd:
    from soak.stack.energy import ExporterSource
    from soak.stack.servers import StackSupervisor, metrics_url, root_url
    from soak.stack.telemetry import Monitor, ServerMetricsSource, default_samplers

    stats = RunStats.from_folder(folder.layout, info)
    folder.listeners.append(stats)
    console, task_fn, metrics_port = options.console, options.task_fn, options.metrics_port
    lines = options.quiet or not console.is_terminal
    if lines:
        folder.listeners.append(QuietLines(stats, console))
    async with AsyncExitStack() as cleanup:
        if metrics_port is not None:
            from soak.night.exporter import RunExporter

            exporter = RunExporter(info.run_id, info.started_at or 0.0, info.limits.duration_seconds)
            try:
                exporter.serve(metrics_port)
            except OSError as error:
                raise BadInput(f"--metrics-port {metrics_port}: {error.strerror or error}") from None
            cleanup.callback(exporter.close)
            folder.listeners.append(exporter)
        unmanaged = unmanaged_base_urls(config)
        probe = EndpointProbe(unmanaged, config.error_budget.probe_interval_seconds)
        readiness: Readiness = probe
        supervisor = None
        background: list[asyncio.Task[None]] = []
        cleanup.push_async_callback(cancel_all, background)
        if config.stack.servers:
            supervisor = StackSupervisor(config.stack, folder.layout.server_logs,
                                         lambda kind, source, detail: folder.event(kind, detail, source))
            cleanup.callback(supervisor.stop)
            await supervisor.start()
            background.append(asyncio.create_task(supervisor.watch()))
            readiness = AllReady([supervisor, probe]) if unmanaged else supervisor
        if options.stack_up is not None:
            await options.stack_up()
        metered = [(s.name, metrics_url(s)) for s in config.stack.servers] or [
            (name, root_url(e.base_url) + "/metrics") for name, e in config.endpoints.items()
        ]
        sources = [ServerMetricsSource(name, url, lambda text: folder.event("note", text, "monitor"))
                   for name, url in dict(metered).items() if url]
        exporters = {url: ExporterSource(name, url) for name, e in config.endpoints.items()
                     if (url := e.energy_metrics_url)}
        samplers = default_samplers(supervisor.pids if supervisor else dict, sources, list(exporters.values()))
        monitor = Monitor(info.run_id, samplers, folder.record_sample, config.sampling.interval_seconds)
        background.append(asyncio.create_task(monitor.run()))
        if task_fn is None and config.cluster.address:
            from soak.night.cluster import ClusterTasks, connect

            ray = await asyncio.to_thread(connect, config.cluster.address)
            cleanup.callback(ray.shutdown)
            task_fn = ClusterTasks(config, info.routing)
            folder.event("note", f"attempts run on the Ray cluster at {config.cluster.address}: "
                         f"{len([n for n in ray.nodes() if n['Alive']])} nodes", "cluster")
        if task_fn is None:
            task_fn = await local_attempts(config, info.routing, options.judge, cleanup)
        runner = Runner(folder, info, config, tasks, task_fn,
                        SessionStart(readiness, options.detached, options.retry, options.started_at))
        stats.in_flight = lambda: [
            Current(f.context.attempt, f.started_at, f.round, f.role, f.context.totals.calls)
            for f in list(runner.in_flight.values())
        ]
        stats.grace = None if runner.length is None else runner.grace
        with nullcontext() if lines else live_view(stats, console):
            end = await runner.run()
    console.print(summary(stats, end.reason, end.detail))
    for line in next_steps(stats, folder.path, end.reason):  # whole lines: a path broken in two cannot be pasted
        console.print(line, style="bold" if line.startswith("next") else "", soft_wrap=True)
    return end


async def cancel_all(jobs: list[asyncio.Task[None]]) -> None:
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


def write_pid(folder: RunFolder) -> None:
    write_process(folder.layout.pid, os.getpid())


def read_pid(folder: RunFolder) -> int | None:
    """The pid of the process running this run, if it is alive (and is the same process, not a reused pid)."""
    process, _ = read_process(folder.layout.pid)
    return process.pid if process else None
