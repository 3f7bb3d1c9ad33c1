"""The lifetime of a run's processes: whether its launcher has ended, which processes are its own (its launcher's
descendants, its cgroup's members, in a plain session those carrying its marker), and the SIGKILL that leaves none
of them alive once its verdict is in (soak.sandbox.jail launches them)."""

import contextlib
import json
import os
import signal
import subprocess
import time

import psutil

from soak.sandbox.cgroup import RunCgroup

RUN_MARKER = "SOAK_SANDBOX_RUN"
"""The environment variable every process of a run carries, set to the run's token."""


def exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the launcher has ended, without reaping it: while it is a zombie its pid and group id stay ours."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


FIRST_PAUSE, LAST_PAUSE = 0.0005, 0.01
"""Polling for a process's end: what is awaited mostly ends within milliseconds and each poll's delay lies on the
verdict's path, so the pauses start short and double up to the last."""


def wait_exit(proc: subprocess.Popen[bytes], seconds: float) -> None:
    end, pause = time.monotonic() + seconds, FIRST_PAUSE
    while not exited(proc) and time.monotonic() < end:
        time.sleep(pause)
        pause = min(2 * pause, LAST_PAUSE)


def processes(proc: subprocess.Popen[bytes], token: str, kind: str) -> list[psutil.Process]:
    """Every live process of a run: the launcher's descendants, and in a plain session those carrying its marker."""
    found = []
    if proc.returncode is None:
        with contextlib.suppress(psutil.Error):
            found = psutil.Process(proc.pid).children(recursive=True)
    if kind == "session":
        for candidate in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if candidate.pid != os.getpid() and candidate.environ().get(RUN_MARKER) == token:
                    found.append(candidate)
    return found


def run_pids(proc: subprocess.Popen[bytes], token: str, kind: str, group: RunCgroup | None) -> list[int]:
    """The pids of a run's live processes: its cgroup's members, else its launcher's descendants (`processes`)."""
    return group.members() if group is not None else [process.pid for process in processes(proc, token, kind)]


def signal_all(procs: list[psutil.Process], sig: int) -> None:
    for process in procs:
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)


def dead(process: psutil.Process) -> bool:
    """Gone, or a zombie: killed, left for a parent outside the run (the host's init) to reap."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def wait_dead(procs: list[psutil.Process], seconds: float) -> None:
    end, pause = time.monotonic() + seconds, FIRST_PAUSE
    pending = list({process.pid: process for process in procs}.values())
    while pending and time.monotonic() < end:
        pending = [process for process in pending if not dead(process)]
        if pending:
            time.sleep(pause)
            pause = min(2 * pause, LAST_PAUSE)


def namespace_init(status: int | None) -> list[psutil.Process]:
    """The pid namespace's init that bubblewrap reported on its status pipe (closed here). bubblewrap's launcher
    exits as soon as the command does, while its init is still taking the namespace down: once the init is gone,
    so is every process of the run."""
    if status is None:
        return []
    os.set_blocking(status, False)
    with os.fdopen(status, "rb") as pipe:
        text = (pipe.read() or b"").decode(errors="replace")
    for line in text.splitlines():
        with contextlib.suppress(ValueError, psutil.Error):
            pid = json.loads(line).get("child-pid")
            if isinstance(pid, int):
                return [psutil.Process(pid)]
    return []


def finish(proc: subprocess.Popen[bytes], token: str, kind: str, seen: list[psutil.Process]) -> None:
    """SIGKILL whatever is left of a run and wait for it: no process of a run outlives its verdict."""
    # In a pid namespace a launcher that ended on its own leaves nothing behind once the namespace's init is gone
    # (`seen` holds bubblewrap's): the kernel ends the namespace first.
    procs = seen + processes(proc, token, kind) if kind == "session" or not exited(proc) else seen
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    signal_all(procs, signal.SIGKILL)
    proc.kill()
    if proc.wait() < 0 and kind != "session":
        # A launcher killed by a signal may go before its namespace does; sweep what carries the run's marker.
        strays = processes(proc, token, "session")
        signal_all(strays, signal.SIGKILL)
        procs += strays
    wait_dead(procs, 2)
