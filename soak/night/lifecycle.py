"""Runs as folders and processes: a new or resumed run from the flags, detaching, stopping, status and listing."""

import os
import platform
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, ValidationError
from rich.console import Console

from soak.config import SoakConfig, load_config, redact, with_cli_endpoint
from soak.errors import BadInput
from soak.files import describe_validation_error
from soak.night.loop import TaskFn
from soak.night.progress import RunStats, runs_table, status_view
from soak.night.wiring import read_pid, run_night
from soak.paths import data_dir
from soak.record.folder import RunFolder
from soak.record.read import read_rows, resolve_run_dir, run_folders
from soak.record.schema import RunInfo, RunLimits, TaskRow
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import load_suites

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
LOG_FILE = "runner.log"


class RunOptions(BaseModel):
    """`soak run` flags; None means "not given" (soak.toml or the run's own config decides)."""

    config_path: Path | None = None
    hours: float | None = None
    minutes: float | None = None
    tasks: int | None = None
    suite: str | None = None
    concurrency: int | None = None
    seed: int | None = None
    run_id: str | None = None
    mode: str | None = None
    agent: str | None = None
    """`--agent NAME_OR_COMMAND`: mode "agent" with this agent."""
    base_url: str | None = None
    model: str | None = None
    routing: Path | None = None
    metrics_port: int | None = None
    quiet: bool = False
    resume: str | None = None
    detach: bool = False
    detached: bool = False
    """Set in the child a detached run starts."""

    def limits(self) -> RunLimits | None:
        given = [x for x in (self.hours, self.minutes, self.tasks) if x is not None]
        if len(given) > 1:
            raise BadInput("give one of --hours, --minutes and --tasks")
        if any(x <= 0 for x in given):
            raise BadInput("--hours, --minutes and --tasks must be positive")
        if self.tasks is not None:
            return RunLimits(max_tasks=self.tasks)
        if given:
            return RunLimits(duration_seconds=self.hours * 3600 if self.hours is not None else self.minutes * 60)
        return None


# --- a new run, a resumed run ----------------------------------------------------------------------


def resolve_config(opts: RunOptions) -> SoakConfig:
    """soak.toml, then the flags on top."""
    config = with_cli_endpoint(load_config(opts.config_path), opts.base_url, opts.model)
    overrides = {k: v for k, v in {"suite": opts.suite, "concurrency": opts.concurrency, "seed": opts.seed,
                                   "mode": opts.mode}.items() if v is not None}
    if opts.agent:
        overrides |= {"mode": "agent", "agent": {**config.agent.model_dump(), "name": opts.agent}}
    try:
        config = SoakConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as error:
        raise BadInput(describe_validation_error("flags", error)) from None
    if config.concurrency < 1:
        raise BadInput("--concurrency must be at least 1")
    if config.mode == "agent":
        from soak.agent.external import ExternalAgent

        ExternalAgent(config)  # an unknown or uninstalled agent is bad input before any folder exists
    return config


def embed_default_stack(config: SoakConfig) -> tuple[SoakConfig, dict[str, Any]]:
    """No endpoint configured: the embedded llama.cpp server with the bundled model serves both roles."""
    from soak.stack.servers import embedded_default

    server, endpoint, stack_info = embedded_default()
    stack = config.stack.model_copy(update={"servers": [server, *config.stack.servers]})
    update = {"endpoints": {"embedded": endpoint}, "roles": {"orchestrator": "embedded", "coder": "embedded"},
              "stack": stack}
    return SoakConfig.model_validate({**config.model_dump(), **update}), {**stack_info, "embedded": True}


def load_routing_dict(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    from soak.decisions.route import load_routing

    return load_routing(path).model_dump(exclude_none=True)


def select_tasks(config: SoakConfig, routing: dict[str, Any]) -> list[TaskSpec]:
    """The suite minus the tasks the routing file skips; every escalation must name a defined endpoint."""
    routes = routing.get("tasks", {})
    for task_id, route in routes.items():
        if route.get("action") == "escalate" and route.get("endpoint") not in config.endpoints:
            raise BadInput(f"routing: {task_id} escalates to endpoint '{route.get('endpoint')}', not in the config")
    tasks = [t for t in load_suites(config.suite) if routes.get(t.id, {}).get("action") != "skip"]
    if not tasks:
        raise BadInput(f"the routing file skips every task of suite {config.suite}")
    return tasks


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("soak", "openai", "pydantic", "httpx2", "rich"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def host() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total}


def new_run(opts: RunOptions) -> tuple[RunFolder, RunInfo, SoakConfig, list[TaskSpec]]:
    """Resolve everything that can be wrong before anything is written, then create the run folder."""
    limits = opts.limits() or RunLimits(max_cycles=1)
    config = resolve_config(opts)
    stack_info: dict[str, Any] = {}
    if not config.endpoints:
        config, stack_info = embed_default_stack(config)
    for role in ("coder",) if config.mode == "direct" else ("orchestrator", "coder"):
        config.endpoint_for(role)
    run_id = opts.run_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    if not RUN_ID.match(run_id):
        raise BadInput(f"run id '{run_id}': use letters, digits, '-', '_' and '.' (up to 100)")
    folder = RunFolder(data_dir() / run_id)
    if folder.path.exists():
        raise BadInput(f"run {run_id} already exists in {folder.path.parent}; continue it with --resume {run_id}")
    routing = load_routing_dict(opts.routing)
    tasks = select_tasks(config, routing)
    info = RunInfo(
        run_id=run_id, created_at=time.time(), config=redact(config.model_dump(mode="json")),
        limits=limits, routing=routing, stack=stack_info, versions=versions(),
        host=host(),
    )
    folder.path.mkdir(parents=True)
    folder.write_info(info)
    return folder, info, config, tasks


RESUME_FLAGS = ("config_path", "suite", "concurrency", "seed", "run_id", "mode", "base_url", "model", "routing")


def reopen_run(opts: RunOptions) -> tuple[RunFolder, RunInfo, SoakConfig, list[TaskSpec]]:
    """The run's own config; new limits (--hours/--minutes/--tasks) count from now."""
    given = [f"--{name.replace('_', '-')}" for name in RESUME_FLAGS if getattr(opts, name) is not None]
    if given:
        raise BadInput(f"--resume continues a run with its own config; drop {', '.join(given)}")
    folder = find_run(opts.resume)
    info = folder.read_info()
    if run_state(folder, info) == "running":
        raise BadInput(f"run {info.run_id} is running (pid {read_pid(folder)}); stop it first: soak stop {info.run_id}")
    try:
        config = SoakConfig.model_validate(info.config)
    except ValidationError as error:
        raise BadInput(describe_validation_error(str(folder.info_path), error)) from None
    if info.stack.get("embedded"):
        # The embedded server takes a fresh free port each session: the recorded one may be taken by now.
        others = [s for s in config.stack.servers if s.name != "embedded"]
        bare = config.model_copy(update={"endpoints": {}, "stack": config.stack.model_copy(update={"servers": others})})
        config, _ = embed_default_stack(bare)
    limits = opts.limits()
    tasks = select_tasks(config, info.routing)
    if limits is not None:
        done = sum(row.outcome != "cancelled" for row in read_rows(folder.path / "tasks.csv", TaskRow))
        info.limits = RunLimits(
            duration_seconds=None if limits.duration_seconds is None else info.active_seconds + limits.duration_seconds,
            max_tasks=None if limits.max_tasks is None else done + limits.max_tasks,
        )
        folder.write_info(info)
    return folder, info, config, tasks


def find_run(run_id: str | None) -> RunFolder:
    """A run by id, or the newest one (the same one `soak report` picks: soak.record.read.run_folders)."""
    if run_id is None:
        return RunFolder(resolve_run_dir(None))
    folder = RunFolder(data_dir() / run_id)
    if not RUN_ID.match(run_id) or not folder.info_path.is_file():
        known = ", ".join(f.run_id for f, _ in all_runs()[-5:]) or "none"
        raise BadInput(f"no run '{run_id}' in {data_dir()} (latest: {known}; list them with `soak runs`)")
    return folder


def all_runs() -> list[tuple[RunFolder, RunInfo]]:
    """Every run folder with a readable run.json, oldest first (soak.record.read.run_folders' order)."""
    found = []
    for path in run_folders():
        try:
            found.append((RunFolder(path), RunFolder(path).read_info()))
        except BadInput:
            continue
    return found


def run_command(opts: RunOptions, task_fn: TaskFn | None = None, console: Console | None = None) -> int:
    """`soak run`: start, resume or detach; returns the exit code."""
    folder, info, config, tasks = reopen_run(opts) if opts.resume else new_run(opts)
    if opts.detach:
        return detach(folder, opts, console or Console())
    end = run_night(folder, info, config, tasks, task_fn=task_fn, quiet=opts.quiet, metrics_port=opts.metrics_port,
                  detached=opts.detached, console=console)
    return end.exit_code


# --- detach, stop, status ----------------------------------------------------------------------------


def run_state(folder: RunFolder, info: RunInfo) -> str:
    """running | finished | stopped (signal, error budget) | crashed | prepared (never started)."""
    if read_pid(folder):
        return "running"
    if not info.sessions:
        return "prepared"
    last = info.sessions[-1]
    if last.stopped_at is None:
        return "crashed"
    return "finished" if last.reason in ("deadline", "tasks", "cycles") else "stopped"


def detach(folder: RunFolder, opts: RunOptions, console: Console) -> int:
    """Start the run as `soak run --resume` in a new session, output to runner.log, and return once it runs."""
    argv = [sys.executable, "-c", "from soak.cli import main; main()", "run", "--resume", folder.run_id,
            "--quiet", "--detached"]
    if opts.metrics_port is not None:
        argv += ["--metrics-port", str(opts.metrics_port)]
    env = {**os.environ, "SOAK_DATA_DIR": str(data_dir().resolve())}
    with open(folder.path / LOG_FILE, "ab") as log:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True, close_fds=True)
    deadline = time.monotonic() + 30
    while read_pid(folder) != child.pid:
        if child.poll() is not None or time.monotonic() > deadline:
            tail = (folder.path / LOG_FILE).read_text(errors="replace").strip().splitlines()[-5:]
            console.print(f"the detached run did not start (exit {child.poll()}):", *tail, sep="\n", markup=False)
            return 1
        time.sleep(0.05)
    console.print(f"run {folder.run_id} detached, pid {child.pid}; log: {folder.path / LOG_FILE}\n"
                  f"watch: soak status {folder.run_id}   stop: soak stop {folder.run_id}", markup=False)
    return 0


def stop_run(run_id: str, timeout: float, console: Console) -> int:
    """SIGTERM the run's process (via its pid file) and wait for it to record its cancelled attempts and exit."""
    folder = find_run(run_id)
    pid = read_pid(folder)
    if pid is None:
        console.print(f"run {folder.run_id} is not running ({run_state(folder, folder.read_info())})", markup=False)
        return 0
    process = psutil.Process(pid)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except psutil.TimeoutExpired:
        console.print(f"run {folder.run_id} (pid {pid}) still running after {timeout:g} s", markup=False)
        return 1
    info = folder.read_info()
    console.print(f"run {folder.run_id} stopped: {run_state(folder, info)}", markup=False)
    return 0


def show_status(run_id: str | None, console: Console) -> None:
    """Progress of a running or finished run, read from its files (safe while another process writes them)."""
    folder = find_run(run_id)
    info = folder.read_info()
    console.print(status_view(RunStats.from_folder(folder.path, info), run_state(folder, info), folder.path))


def print_runs(console: Console) -> None:
    runs = all_runs()
    if not runs:
        console.print(f"no runs in {data_dir()}", markup=False)
        return
    console.print(runs_table([
        (RunStats.from_folder(folder.path, info, with_calls=False), run_state(folder, info)) for folder, info in runs
    ]))
