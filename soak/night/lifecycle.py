"""A run as a folder and a process: create or resume it from its plan (soak.night.plan), detach it, stop it, find
it, list the runs and show a run's status."""

import os
import signal
import subprocess
import sys
import time

import psutil
from rich.console import Console
from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from soak.config import SoakConfig
from soak.errors import BadInput
from soak.night.loop import TaskFn
from soak.night.plan import RUN_ID, RunOptions, plan_new_run, plan_resume, refuse_resume_flags
from soak.night.progress import RunStats, runs_table, status_view
from soak.night.wiring import SessionOptions, read_pid, run_night
from soak.paths import data_dir
from soak.record.folder import RunFolder
from soak.record.read import resolve_run_dir, run_folders
from soak.record.schema import RunInfo
from soak.tasks.spec import TaskSpec

# --- a new run, a resumed run ----------------------------------------------------------------------


def new_run(opts: RunOptions) -> tuple[RunFolder, RunInfo, SoakConfig, list[TaskSpec]]:
    """Plan the run (everything that can be wrong is found before anything is written), then create its folder."""
    info, config, tasks = plan_new_run(opts)
    return create_run(info), info, config, tasks


def create_run(info: RunInfo) -> RunFolder:
    """The new run's folder with its run.json; an existing run is never overwritten."""
    folder = RunFolder(data_dir() / info.run_id)
    if folder.path.exists():
        raise BadInput(f"run {info.run_id} already exists in {folder.path.parent}; "
                       f"continue it with --resume {info.run_id}")
    folder.path.mkdir(parents=True)
    folder.write_info(info)
    return folder


def reopen_run(opts: RunOptions) -> tuple[RunFolder, RunInfo, SoakConfig, list[TaskSpec]]:
    """The run's own config; new limits (--hours/--minutes/--tasks) count from now."""
    refuse_resume_flags(opts)
    folder = find_run(opts.resume)
    recorded = folder.read_info()
    if run_state(folder, recorded) == "running":
        raise BadInput(f"run {recorded.run_id} is running (pid {read_pid(folder)}); "
                       f"stop it first: soak stop {recorded.run_id}")
    folder.check_columns()
    info, config, tasks = plan_resume(opts, recorded, folder.layout)
    if info != recorded:
        folder.write_info(info)
    return folder, info, config, tasks


def find_run(run_id: str | None) -> RunFolder:
    """A run by id, or the newest one (the same one `soak report` picks: soak.record.read.run_folders)."""
    if run_id is None:
        return RunFolder(resolve_run_dir(None))
    folder = RunFolder(data_dir() / run_id)
    if not RUN_ID.match(run_id) or not folder.layout.info.is_file():
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
    """`soak run`: start, resume or detach; returns the exit code. A rehearsal renders its report at the end."""
    started_at = time.time()
    if opts.retry and not opts.resume:
        raise BadInput("--retry re-runs attempts of a run: give it with --resume RUN_ID")
    if opts.rehearse and opts.resume:
        raise BadInput("--rehearse starts a new run; a rehearsal is continued with --resume RUN_ID alone")
    folder, info, config, tasks = reopen_run(opts) if opts.resume else new_run(opts)
    console = console or Console()
    if opts.detach:
        return detach(folder, opts, console)
    end = run_night(folder, info, config, tasks, SessionOptions(
        task_fn=task_fn, quiet=opts.quiet, metrics_port=opts.metrics_port, detached=opts.detached, console=console,
        retry=opts.retry, started_at=started_at))
    if opts.rehearse and end.reason in ("deadline", "tasks", "cycles"):
        from soak.report.render import default_output, render_report

        html = render_report([folder.path], default_output([folder.path]))
        console.print(f"rehearsal report: {html}   (open it in a browser; a real night: soak run --hours 8, "
                      f"then soak report)", markup=False, soft_wrap=True)
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
    if opts.retry:
        argv += ["--retry", ",".join(opts.retry)]
    env = {**os.environ, "SOAK_DATA_DIR": str(data_dir().resolve())}
    with open(folder.layout.log, "ab") as log:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True, close_fds=True)

    @retry(stop=stop_after_delay(30), wait=wait_fixed(0.05), retry=retry_if_result(lambda s: s == "starting"),
           retry_error_callback=lambda _: "starting")
    def started() -> str:
        """running once the child has written its pid file; exited, or still starting after 30 s, is a failure."""
        if read_pid(folder) == child.pid:
            return "running"
        return "exited" if child.poll() is not None else "starting"

    if started() != "running":
        tail = folder.layout.log.read_text(errors="replace").strip().splitlines()[-5:]
        console.print(f"the detached run did not start (exit {child.poll()}):", *tail, sep="\n", markup=False)
        return 1
    console.print(f"run {folder.run_id} detached, pid {child.pid}; log: {folder.layout.log}\n"
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
    console.print(status_view(RunStats.from_folder(folder.layout, info), run_state(folder, info), folder.path))


def print_runs(console: Console) -> None:
    runs = all_runs()
    if not runs:
        console.print(f"no runs in {data_dir()}", markup=False)
        return
    console.print(runs_table([
        (RunStats.from_folder(folder.layout, info, with_calls=False), run_state(folder, info)) for folder, info in runs
    ]))
