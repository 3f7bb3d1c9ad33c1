"""Judge untrusted solutions: run a task's tests against them in a contained, limited, throw-away sandbox.

Every run gets a fresh workspace holding the task's test files and the solution, written fresh; pytest runs there
with `-I`, an empty ini (`-c`), `--noconftest` and only explicitly named test files, so nothing the solution writes
configures pytest. Isolation is the best the host offers, probed once per process and recorded in the verdict:

- `bwrap`: bubblewrap with new pid, network, ipc and uts namespaces, a read-only root, only the workspace writable
  (its test files and `__pycache__` bound read-only), a new session, and death with the harness.
- `unshare` / `unshare-user`: pid, network and mount namespaces (the latter through a user namespace), a shell as the
  namespace's pid 1.
- `session`: a plain new session behind a shell, killed by group and by a per-run environment marker; the harness
  still never is the parent nor in the group of untrusted code, but writes and network are not contained.

Limits: address space, file size, CPU seconds and open files as rlimits of the launcher (inherited), a wall timeout
(SIGTERM, grace, SIGKILL of every process of the run), a workspace size cap, and pytest output kept as head + tail.
The environment is an allowlist; HOME and TMPDIR point into the workspace.

A pass needs pytest's exit 0, the plugin's report (`soak.sandbox_plugin`), unchanged test files, and exactly the
tests of a trusted collection (made with the task's reference, cached per process) passed. The solution runs inside
the pytest process that judges it, so in-process tampering with pytest itself (patched hooks, a forged report)
cannot be fully excluded; the count check against the trusted collection and the isolation are what hold.
"""

import contextlib
import ctypes
import hashlib
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import psutil
from pydantic import BaseModel, ConfigDict, ValidationError

from soak.errors import BadInput
from soak.tasks.spec import TaskSpec

MiB = 1 << 20
EMPTY_INI = Path(__file__).with_name("pytest_empty.ini")
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
RUN_MARKER = "SOAK_SANDBOX_RUN"
REPORT_NAME = ".soak_report.json"
TAIL_LINES = 60
COLLECT_TIMEOUT_SECONDS = 120
ISOLATION_KINDS = ("bwrap", "unshare", "unshare-user", "session")
"""Strongest first."""
Outcome = Literal["pass", "fail", "timeout", "error"]
LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


class Limits(BaseModel):
    """Resource ceilings of one test run."""

    model_config = ConfigDict(extra="forbid")

    address_space_bytes: int = 2048 * MiB
    """RLIMIT_AS of every sandboxed process: a memory bomb meets MemoryError, not the machine's RAM."""
    file_size_bytes: int = 64 * MiB
    """RLIMIT_FSIZE: the largest file a run may write."""
    workspace_bytes: int = 512 * MiB
    """All files of the workspace together, polled while the run goes; past it the run is killed (DiskQuota)."""
    cpu_seconds: int | None = None
    """RLIMIT_CPU per process; None means twice the task's wall timeout plus 10 s."""
    open_files: int = 512
    """RLIMIT_NOFILE."""
    output_bytes: int = 64 * 1024
    """Pytest output kept: the first and last halves; the middle is counted and dropped."""
    grace_seconds: float = 1.0
    """Between SIGTERM and SIGKILL when the wall timeout hits."""


class Verdict(BaseModel):
    """The judgement of one solution against one task's tests."""

    outcome: Outcome
    tests_passed: int = 0
    tests_total: int = 0
    duration_s: float = 0.0
    error_kind: str = ""
    """'' on pass; SyntaxError, ImportError, AssertionError, Timeout, MemoryError, Crash, MissingTests, ..."""
    error_tail: str = ""
    """The first failure's assertion and last frames (<= ~60 lines, workspace paths relative): model feedback."""
    isolation: str = ""
    output: str = ""
    """Head and tail of pytest's output."""


class Report(BaseModel):
    """What `soak.sandbox_plugin` writes; parsed strictly because the solution could have written it."""

    exitstatus: int
    collected: list[str]
    passed: list[str]
    failed: list[str]
    first_failure: dict[str, str] | None
    collection_errors: list[dict[str, str]]


@dataclass
class Run:
    """One sandboxed pytest process, finished."""

    returncode: int | None = None
    timed_out: bool = False
    over_quota: bool = False
    tests_changed: bool = False
    duration_s: float = 0.0
    output: str = ""
    report: Report | None = None
    workspace: str = ""
    running_test: str = ""
    """The test pytest had started last, for runs that never finish."""


class TaskBroken(Exception):
    """The trusted collection (the task's reference) failed, so no count to judge by."""


# --- isolation ---------------------------------------------------------------------------------------------------


def wrap(kind: str, ws: Path, readonly: list[Path], cmd: list[str]) -> list[str]:
    """The launcher command line of an isolation kind around the sandboxed command."""
    if kind == "bwrap":
        ro = [arg for path in readonly for arg in ("--ro-bind", str(path), str(path))]
        return ["bwrap", "--ro-bind", "/", "/", "--bind", str(ws), str(ws), *ro, "--proc", "/proc", "--dev", "/dev",
                "--unshare-all", "--die-with-parent", "--new-session", "--chdir", str(ws), "--", *cmd]
    # A shell in between: a solution that kills its parent hits the shell, never the harness; under unshare the shell
    # is the namespace's pid 1 (so pytest keeps ordinary SIGTERM and SIGXCPU) in a session of its own (so killing its
    # process group cannot reach `unshare` outside).
    shell = ["/bin/sh", "-c", '"$@"; exit $?', "sh", *cmd]
    if kind in ("unshare", "unshare-user"):
        user = ["--map-root-user"] if kind == "unshare-user" else []
        ns = ["--pid", "--fork", "--kill-child", "--net", "--mount", "--mount-proc"]
        return ["unshare", *user, *ns, "--", "setsid", *shell]
    return shell


def works(kind: str) -> bool:
    """Whether an isolation kind can start the sandbox's Python on this host."""
    if kind != "session" and shutil.which(kind.split("-")[0]) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="soak-probe-") as tmp:
        cmd = wrap(kind, Path(tmp).resolve(), [], [sys.executable, "-I", "-c", "pass"])
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(cmd, capture_output=True, timeout=30, cwd=tmp).returncode == 0
    return False


@cache
def isolation_kind() -> str:
    """The strongest isolation that works on this host, probed once per process."""
    return next((kind for kind in ISOLATION_KINDS[:-1] if works(kind)), "session")


def scrubbed_env(ws: Path, token: str) -> dict[str, str]:
    """An allowlisted environment: no keys or tokens ever reach the solution."""
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    env = {name: value for name, value in env.items() if not any(m in name.upper() for m in SECRET_MARKERS)}
    env.update(HOME=str(ws / "home"), TMPDIR=str(ws / "tmp"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env[RUN_MARKER] = token
    return env


def rlimit_setter(limits: Limits, cpu_seconds: int):
    """A preexec function setting the rlimits on the launcher; every sandboxed process inherits them."""
    wanted = [
        (resource.RLIMIT_AS, limits.address_space_bytes),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_NOFILE, limits.open_files),
    ]

    def apply() -> None:
        # The launcher dies with the harness (bwrap and unshare then take the whole namespace down with them).
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for which, value in wanted:
            _, hard = resource.getrlimit(which)
            # CPU: SIGXCPU at the soft limit, SIGKILL a few seconds later for processes that catch it.
            ceiling = value + 5 if which == resource.RLIMIT_CPU else value
            if hard != resource.RLIM_INFINITY:
                value, ceiling = min(value, hard), min(ceiling, hard)
            resource.setrlimit(which, (value, ceiling))

    return apply


# --- running -----------------------------------------------------------------------------------------------------


class CappedOutput:
    """Keeps the head and the tail of a stream; the middle is only counted."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes of output omitted ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode(errors="replace")


def workspace_too_big(ws: Path, limit: int, max_entries: int = 20_000) -> bool:
    """Whether the workspace's files exceed the byte limit (or hold absurdly many entries)."""
    total = entries = 0
    for root, dirs, files in os.walk(ws):
        entries += len(dirs) + len(files)
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
        if total > limit or entries > max_entries:
            return True
    return False


def exited(proc: subprocess.Popen) -> bool:
    """Whether the launcher has ended, without reaping it: while it is a zombie its pid and group id stay ours."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def wait_exit(proc: subprocess.Popen, seconds: float) -> None:
    end = time.monotonic() + seconds
    while not exited(proc) and time.monotonic() < end:
        time.sleep(0.01)


def processes(proc: subprocess.Popen, token: str, kind: str) -> list[psutil.Process]:
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


def signal_all(procs: list[psutil.Process], sig: int) -> None:
    for process in procs:
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)


def finish(proc: subprocess.Popen, token: str, kind: str, seen: list[psutil.Process]) -> None:
    """SIGKILL whatever is left of a run and wait for it: no process of a run outlives its verdict."""
    # In a pid namespace a launcher that ended on its own leaves nothing behind: the kernel ends the namespace first.
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
    psutil.wait_procs(procs, timeout=2)


def launch(cmd: list[str], ws: Path, limits: Limits, timeout_s: float, kind: str) -> Run:
    """Run the sandbox command, pump its output through a cap, enforce the wall clock and the workspace size."""
    token = uuid.uuid4().hex
    cpu = limits.cpu_seconds or int(2 * timeout_s) + 10
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ws, env=scrubbed_env(ws, token), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=rlimit_setter(limits, cpu),
    )
    run, out = Run(), CappedOutput(limits.output_bytes)
    deadline, next_quota, drain_until = started + timeout_s, started + 0.25, None
    stdout = proc.stdout
    assert stdout is not None
    os.set_blocking(stdout.fileno(), False)
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                run.timed_out = True
                break
            if now >= next_quota:
                next_quota = now + 0.25
                if workspace_too_big(ws, limits.workspace_bytes):
                    run.over_quota = True
                    break
            if selector.select(timeout=min(0.1, deadline - now)):
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    break
                out.add(chunk)
            # Left-over descendants (plain session) may hold the pipe open after the launcher is gone.
            if drain_until is None and exited(proc):
                drain_until = now + 0.2
            if drain_until is not None and now >= drain_until:
                break
    if not (run.timed_out or run.over_quota):
        wait_exit(proc, deadline - time.monotonic())
        run.timed_out = not exited(proc)
    seen = processes(proc, token, kind) if kind == "session" or not exited(proc) else []
    if run.timed_out or run.over_quota:
        signal_all(seen, signal.SIGTERM)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        wait_exit(proc, limits.grace_seconds)
    finish(proc, token, kind, seen)
    stdout.close()
    run.returncode, run.duration_s, run.output = proc.returncode, time.monotonic() - started, out.text()
    return run


def remove_tree(path: Path) -> None:
    """Delete a workspace even where the solution made parts of it unwritable."""

    def retry(func, target, _exc) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)

    shutil.rmtree(path, onerror=retry)


def execute(task: TaskSpec, source: str, limits: Limits, kind: str, collect_only: bool = False) -> Run:
    """One run of the task's tests against `source` in a fresh workspace, removed afterwards."""
    for name in task.tests:
        if Path(name).name != name or name == task.entry or not name.endswith(".py"):
            raise BadInput(f"task {task.id}: test file '{name}' must be a plain .py file name, not the entry")
    ws = Path(tempfile.mkdtemp(prefix="soak-judge-")).resolve()
    try:
        for sub in ("home", "tmp", "__pycache__"):
            (ws / sub).mkdir()
        for name, text in task.tests.items():
            (ws / name).write_text(text)
        (ws / task.entry).write_text(source)
        report = ws / REPORT_NAME
        cmd = [sys.executable, "-I", "-B", "-m", "pytest", "-c", str(EMPTY_INI), "--rootdir", str(ws), "--noconftest",
               "-p", "no:cacheprovider", "-p", "soak.sandbox_plugin", f"--soak-report={report}", "-q", "--tb=short",
               "--color=no", *(["--collect-only"] if collect_only else []), *task.tests]
        readonly = [ws / name for name in task.tests] + [ws / "__pycache__"]
        # A collection is trusted and short; a tight task timeout must not fail it on a busy machine.
        timeout = max(task.test_timeout_seconds, COLLECT_TIMEOUT_SECONDS) if collect_only else task.test_timeout_seconds
        run = launch(wrap(kind, ws, readonly, cmd), ws, limits, timeout, kind)
        run.workspace = str(ws)
        run.tests_changed = any(
            not (ws / name).is_file() or (ws / name).read_text(errors="replace") != text
            for name, text in task.tests.items()
        )
        with contextlib.suppress(OSError, ValueError, ValidationError):
            if report.is_file() and report.stat().st_size < 16 * MiB:
                run.report = Report.model_validate(json.loads(report.read_text()))
        with contextlib.suppress(OSError, ValueError):
            run.running_test = report.with_suffix(".current").read_text(errors="replace")[:300]
        return run
    finally:
        remove_tree(ws)


# --- judging -----------------------------------------------------------------------------------------------------

_expected: dict[tuple[str, str], tuple[str, ...]] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def task_key(task: TaskSpec) -> tuple[str, str]:
    material = json.dumps([task.entry, sorted(task.tests.items()), task.reference])
    return task.id, hashlib.sha256(material.encode()).hexdigest()


def clean_collection(run: Run) -> tuple[str, ...] | None:
    """The collected node ids of a trusted run, or None when it is no good to count by."""
    report = run.report
    if run.timed_out or report is None or report.collection_errors or not report.collected:
        return None
    return tuple(report.collected)


def relative(text: str, workspace: str) -> str:
    return text.replace(workspace + os.sep, "").replace(workspace, ".") if workspace else text


def tail(text: str, lines: int = TAIL_LINES, width: int = 300) -> str:
    return "\n".join(line[:width] for line in text.strip("\n").splitlines()[-lines:])


def verdict_of(run: Run, expected: tuple[str, ...]) -> Verdict:
    """Turn a finished run into a verdict; anything short of every expected test passing is not a pass."""
    report, total = run.report, len(expected)
    passed = len(set(report.passed) & set(expected)) if report and not run.tests_changed else 0

    def failed(kind: str, text: str, outcome: Outcome = "fail") -> Verdict:
        body = tail(relative(text, run.workspace), TAIL_LINES - 1)
        return Verdict(outcome=outcome, tests_passed=passed, tests_total=total, error_kind=kind,
                       error_tail=f"{body}\n{passed} of {total} tests passed")

    output_tail = relative(tail(run.output, 25), run.workspace)
    during = f" (while running {run.running_test})" if run.running_test else " (while collecting the tests)"
    if run.timed_out:
        return failed("Timeout", f"Timeout: the tests did not finish in time{during}\n{output_tail}", "timeout")
    if run.over_quota:
        return failed("DiskQuota", f"DiskQuota: the run wrote more files than its workspace may hold\n{output_tail}")
    if run.tests_changed:
        return failed("Tampering", "Tampering: the solution changed the test files")
    if report is None:
        code = run.returncode or 0
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return failed("CPULimit", f"CPULimit: a process used up its CPU seconds\n{output_tail}")
        kind = "MemoryError" if "MemoryError" in run.output[-4096:] else "Crash"
        return failed(kind, f"{kind}: the test process ended (exit code {code}) before pytest finished{during}\n"
                      + output_tail)
    if report.collection_errors:
        first = report.collection_errors[0]
        return failed(first["kind"], f"ERROR collecting {first['nodeid']}\n{first['tail']}")
    if report.first_failure:
        first = report.first_failure
        return failed(first["kind"], f"FAILED {first['nodeid']}\n{first['tail']}")
    if total == 0:
        return failed("NoTests", "NoTests: the task's tests did not collect")
    if passed < total:
        missing = sorted(set(expected) - set(report.passed))
        return failed("MissingTests", f"MissingTests: {total - passed} tests did not pass or did not run: "
                      + ", ".join(missing[:10]))
    if report.exitstatus != 0 or run.returncode != 0:
        return failed("Crash", f"Crash: pytest exit status {report.exitstatus}, process exit code {run.returncode}\n"
                      + output_tail)
    return Verdict(outcome="pass", tests_passed=passed, tests_total=total)


def expected_tests(task: TaskSpec, limits: Limits, kind: str) -> tuple[str, ...]:
    """The node ids a full pass must cover, from a collection with the task's reference (cached per process)."""
    key = task_key(task)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _expected:
            run = execute(task, task.reference, limits, kind, collect_only=True)
            collected = clean_collection(run)
            if collected is None:
                raise TaskBroken(tail(relative(run.output, run.workspace), TAIL_LINES - 1))
            _expected[key] = collected
        return _expected[key]


def judge(task: TaskSpec, source: str, *, keep_dir: Path | None = None, limits: Limits | None = None) -> Verdict:
    """Run the task's tests against `source` in the sandbox and judge the result."""
    limits = limits or Limits()
    kind = isolation_kind()
    key = task_key(task)
    if source == task.reference and key not in _expected:
        # The reference's own run is trusted: its collection spares a separate one.
        run = execute(task, source, limits, kind)
        collected = clean_collection(run)
        if collected is not None:
            _expected.setdefault(key, collected)
        verdict = verdict_of(run, _expected.get(key, ()))
    else:
        try:
            expected = expected_tests(task, limits, kind)
        except TaskBroken as broken:
            verdict = Verdict(outcome="error", error_kind="TaskError", isolation=kind,
                              error_tail=f"TaskError: the task's reference does not collect cleanly\n{broken}")
            return keep(verdict, task, source, keep_dir)
        run = execute(task, source, limits, kind)
        verdict = verdict_of(run, expected)
    verdict.duration_s, verdict.isolation, verdict.output = round(run.duration_s, 3), kind, run.output
    return keep(verdict, task, source, keep_dir)


def keep(verdict: Verdict, task: TaskSpec, source: str, keep_dir: Path | None) -> Verdict:
    """Copy the judged solution and the test output next to the caller's records."""
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        (keep_dir / task.entry).write_text(source)
        (keep_dir / "test_output.txt").write_text(verdict.output or verdict.error_tail)
    return verdict


__all__ = ["Limits", "Verdict", "isolation_kind", "judge"]
