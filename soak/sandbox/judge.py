"""Judge untrusted solutions: run a task's tests against them in a contained, limited, throw-away sandbox.

Every run gets a fresh workspace holding the task's test files, their helpers and the solution, written fresh;
pytest runs there with `-I`, an empty ini (`-c`), `--noconftest` and only explicitly named test files, so nothing
the solution writes configures pytest. The process is contained by `jail` (the strongest isolation the host
offers, recorded in the verdict; rlimits, wall timeout, workspace size cap, capped output, allowlisted environment);
under bubblewrap the test files, their helpers and `__pycache__` are bound read-only.

The verdict does not trust the judged process. Results come over one end of a socket pair the pytest process
inherits (`soak.sandbox.plugin` streams numbered events as they happen, each under an HMAC keyed by a per-run
secret the plugin takes from the socket before the solution is imported); nothing written in the workspace is read.
The harness cross-checks the stream from outside: only lines the recorder signed, in order; a collection before any
result; one result per test and phase; a session-finished event whose exit status agrees with the results and with
the process's real exit code; every collected test reported; the collection and each test's code the same as a
trusted collection made with the task's reference (cached per process); the test files unchanged. Evidence from
the plugin (registry, hooks or judging machinery changed, an operand that equals anything) or from these checks
makes the outcome `tampered`. A pass needs none of it and exactly the trusted tests passed. What in-process
tampering cannot be excluded is in docs/trust/sandbox.md.
"""
import hashlib
import json
import os
import secrets
import signal
import socket
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from soak.errors import BadInput
from soak.record.layout import TEST_OUTPUT
from soak.sandbox.disk import remove_tree
from soak.sandbox.events import Events, read_events
from soak.sandbox.jail import (
    Contained,
    ResourceLimits,
    Wiring,
    isolation_kind,
    launch,
    wrap,
)
from soak.sandbox.scanning import Scan
from soak.sandbox.visible import JailView, allow_listed, in_jail, module_file, run_module, sized
from soak.tasks.spec import TaskSpec

EMPTY_INI = Path(__file__).with_name("pytest_empty.ini")
PLUGIN = "soak.sandbox.plugin"
TAIL_LINES = 60
SECRET_BYTES = 32
"""The per-run key of the channel's MACs (soak.sandbox.plugin reads exactly this many bytes)."""
COLLECT_TIMEOUT_SECONDS = 120
HEAD_BYTES = 64 * 1024
"""What a round keeps of an entry file over the size limit: its head."""
TestResult = Literal["pass", "fail", "timeout", "error", "tampered"]
"""What the tests found of one solution (the attempt's Outcome is decided from it by soak.agent.attempt)."""


class Verdict(BaseModel):
    """The judgement of one solution against one task's tests."""

    result: TestResult
    """`tampered`: the solution was caught changing how it is judged (evidence in error_tail, error_kind Tampering)."""
    tests_passed: int = 0
    tests_total: int = 0
    failing_tests: list[str] = []
    """The expected tests that did not pass (failed, errored or never ran; all of them when tampered), in collection
    order: tests_total - tests_passed ids."""
    duration_s: float = 0.0
    error_kind: str = ""
    """'' on pass; SyntaxError, ImportError, AssertionError, Timeout, MemoryError, Crash, MissingTests, Tampering..."""
    error_tail: str = ""
    """The first failure's assertion and last frames (<= ~60 lines, workspace paths relative): model feedback."""
    isolation: str = ""
    output: str = ""
    """Head and tail of pytest's output."""
    suspicious: str = ""
    """Reward-hack signatures soak.sandbox.scan found in the source ("; "-joined); never changes the outcome."""


@dataclass
class TestRun(Contained):
    """One sandboxed pytest process, finished, with what its channel and workspace showed."""

    events: Events = field(default_factory=Events)
    tests_changed: bool = False
    workspace: str = ""


@dataclass(frozen=True)
class Trusted:
    """The collection a full pass must cover, made with the task's reference: node ids and their code's prints."""

    nodeids: tuple[str, ...]
    prints: dict[str, str]


class TaskBroken(Exception):
    """The trusted collection (the task's reference) failed, so no count to judge by."""


def run_tests(
    task: TaskSpec, source: str, limits: ResourceLimits, kind: str, collect_only: bool = False,
    stop: threading.Event | None = None,
) -> TestRun:
    """One run of the task's tests against `source` in a fresh workspace, removed afterwards."""
    for name in task.tests:
        if Path(name).name != name or name == task.entry or not name.endswith(".py"):
            raise BadInput(f"task {task.id}: test file '{name}' must be a plain .py file name, not the entry")
    for name in task.support:
        if Path(name).name != name or name in (task.entry, *task.tests, "home", "tmp", "__pycache__"):
            raise BadInput(f"task {task.id}: helper file '{name}' must be a plain file name, not a test or the entry")
    fixed = {**task.support, **task.tests}  # Written fresh before every run, bound read-only, checked after it.
    ws = Path(tempfile.mkdtemp(prefix="soak-judge-")).resolve()
    harness_end, child_end = socket.socketpair()
    try:
        for sub in ("home", "tmp", "__pycache__"):
            (ws / sub).mkdir()
        for name, text in fixed.items():
            (ws / name).write_text(text)
        (ws / task.entry).write_text(source)
        secret = secrets.token_bytes(SECRET_BYTES)
        harness_end.sendall(secret)  # Waits in the socket for the plugin, which reads it before the solution runs.
        fd = child_end.detach()
        # In an allow-listed root the plugin and the ini are the only files of soak the jail holds.
        ini = in_jail(EMPTY_INI) if allow_listed(kind) else EMPTY_INI
        cmd = [sys.executable, "-I", "-B", *run_module(kind, "pytest"), "-c", str(ini), "--rootdir", str(ws),
               "--noconftest", "-p", "no:cacheprovider", "-p", PLUGIN, f"--soak-channel={fd}", "-q", "--tb=short",
               "--color=no", *(["--collect-only"] if collect_only else []), *task.tests]
        readonly = (*(ws / name for name in fixed), ws / "__pycache__")
        harness = (module_file(PLUGIN), EMPTY_INI)
        # A collection is trusted and short; a tight task timeout must not fail it on a busy machine.
        timeout = max(task.test_timeout_seconds, COLLECT_TIMEOUT_SECONDS) if collect_only else task.test_timeout_seconds
        # In a jail the workspace is a tmpfs of its own size holding read-only copies: what the run writes, unlinked
        # files too, counts against it and goes with the run. A plain session writes the host's folder, polled.
        jailed = allow_listed(kind)
        view = JailView((*readonly, ws / task.entry) if jailed else readonly, harness=harness,
                        disk=sized(ws, limits.workspace_bytes, [ws / "home", ws / "tmp"]) if jailed else ())
        contained = launch(wrap(kind, ws, cmd, view), ws, limits, timeout, kind,
                           Wiring(stop=stop, channel=harness_end, pass_fds=(fd,), writable=() if jailed else (ws,)))
        run = TestRun(**vars(contained), workspace=str(ws))
        run.events = read_events(run.channel, secret)
        if run.channel_overflow:
            run.events.evidence.append("result channel: flooded past its cap")
        run.tests_changed = any(
            not (ws / name).is_file() or (ws / name).read_text(errors="replace") != text
            for name, text in fixed.items()
        )
        return run
    finally:
        harness_end.close()
        child_end.close()
        remove_tree(ws)


# --- judging -----------------------------------------------------------------------------------------------------

_expected: dict[tuple[str, str], Trusted] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


class Stopped(Exception):
    """The caller's stop event ended a run before it could judge."""


def task_key(task: TaskSpec) -> tuple[str, str]:
    material = json.dumps([task.entry, sorted(task.tests.items()), sorted(task.support.items()), task.reference])
    return task.id, hashlib.sha256(material.encode()).hexdigest()


def clean_collection(run: TestRun) -> Trusted | None:
    """The collection of a trusted run, or None when it is no good to count by."""
    events = run.events
    finished = events.exitstatus in (0, 1) and run.returncode in (0, 1)
    if run.timed_out or run.stopped or events.evidence or not finished or events.collection_errors:
        return None
    if not events.collected:
        return None
    return Trusted(tuple(events.collected), dict(events.prints))


def relative(text: str, workspace: str) -> str:
    return text.replace(workspace + os.sep, "").replace(workspace, ".") if workspace else text


def tail(text: str, lines: int = TAIL_LINES, width: int = 300) -> str:
    return "\n".join(line[:width] for line in text.strip("\n").splitlines()[-lines:])


def cross_check(run: TestRun, expected: Trusted) -> list[str]:
    """Tampering the harness sees from outside: the channel against itself, the real exit code and the trusted
    collection."""
    events, code = run.events, run.returncode
    evidence = list(events.evidence)
    if run.tests_changed:
        evidence.append("the solution changed the test files")
    if events.exitstatus is None:
        if code == 0 and not (run.timed_out or run.stopped or run.over_quota or run.out_of_memory):
            evidence.append("the process exited 0 without finishing the session (no session-finished event)")
        return evidence
    if code == 0 and events.exitstatus != 0:
        evidence.append(f"the process exited 0 after the session finished with exit status {events.exitstatus}")
    if events.exitstatus == 0:
        if events.failed() or events.collection_errors:
            evidence.append("exit status 0 despite failed results")
        unreported = [node for node in events.collected or () if not any((node, w) in events.reports
                                                                       for w in ("setup", "call", "teardown"))]
        if unreported:
            evidence.append(f"exit status 0 with {len(unreported)} collected tests without a result: "
                            + ", ".join(unreported[:5]))
    if not run.tests_changed:
        for node in expected.nodeids:
            if node in events.prints and expected.prints.get(node) and events.prints[node] != expected.prints[node]:
                evidence.append(f"the code of {node} is not the test file's")
    return evidence


def judge_run(run: TestRun, expected: Trusted) -> Verdict:
    """Turn a finished run into a verdict; anything short of every expected test passing is not a pass."""
    events, total = run.events, len(expected.nodeids)
    evidence = cross_check(run, expected)
    passing = events.passed()
    passed = len(passing & set(expected.nodeids)) if not evidence else 0
    failing = [node for node in expected.nodeids if evidence or node not in passing]

    def failed(kind: str, text: str, result: TestResult = "fail") -> Verdict:
        body = tail(relative(text, run.workspace), TAIL_LINES - 1)
        return Verdict(result=result, tests_passed=passed, tests_total=total, failing_tests=failing, error_kind=kind,
                       error_tail=f"{body}\n{passed} of {total} tests passed")

    output_tail = relative(tail(run.output, 25), run.workspace)
    during = f" (while running {events.running_test})" if events.running_test else " (while collecting the tests)"
    if evidence:
        shown = list(dict.fromkeys(evidence))
        return failed("Tampering", "Tampering: the solution changed how it is judged\n"
                      + "\n".join(f"- {line}" for line in shown[:20]), "tampered")
    if run.stopped:
        return failed("Timeout", f"Timeout: the attempt's budget ended while the tests ran{during}", "timeout")
    if run.timed_out:
        return failed("Timeout", f"Timeout: the tests did not finish in time{during}\n{output_tail}", "timeout")
    if run.over_quota:
        return failed("DiskQuota", f"DiskQuota: the run wrote more files than its workspace may hold\n{output_tail}")
    if run.out_of_memory:
        return failed("MemoryError", "MemoryError: the run's memory (anonymous, memfd, shm and tmpfs pages) passed "
                      f"its limit and the kernel killed it{during}\n{output_tail}")
    if events.exitstatus is None:
        code = run.returncode or 0
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return failed("CPULimit", f"CPULimit: a process used up its CPU seconds\n{output_tail}")
        kind = "MemoryError" if "MemoryError" in run.output[-4096:] else "Crash"
        return failed(kind, f"{kind}: the test process ended (exit code {code}) before pytest finished{during}\n"
                      + output_tail)
    if events.collection_errors:
        first = events.collection_errors[0]
        return failed(first["kind"], f"ERROR collecting {first['nodeid']}\n{first['tail']}")
    if events.first_failure:
        first = events.first_failure
        return failed(first["kind"] or "Failed", f"FAILED {first['nodeid']}\n{first['tail']}")
    if total == 0:
        return failed("NoTests", "NoTests: the task's tests did not collect")
    if passed < total:
        missing = sorted(set(expected.nodeids) - events.passed())
        return failed("MissingTests", f"MissingTests: {total - passed} tests did not pass or did not run: "
                      + ", ".join(missing[:10]))
    if events.exitstatus != 0 or run.returncode != 0:
        return failed("Crash", f"Crash: pytest exit status {events.exitstatus}, process exit code {run.returncode}\n"
                      + output_tail)
    return Verdict(result="pass", tests_passed=passed, tests_total=total)


def expected_tests(
    task: TaskSpec, limits: ResourceLimits, kind: str, stop: threading.Event | None = None
) -> Trusted:
    """The tests a full pass must cover, from a collection with the task's reference (cached per process)."""
    key = task_key(task)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _expected:
            run = run_tests(task, task.reference, limits, kind, collect_only=True, stop=stop)
            if run.stopped:
                raise Stopped
            collected = clean_collection(run)
            if collected is None:
                evidence = "\n".join(run.events.evidence)
                raise TaskBroken(tail(relative(evidence + "\n" + run.output, run.workspace), TAIL_LINES - 1))
            _expected[key] = collected
        return _expected[key]


def judge(
    task: TaskSpec, source: str, *, keep_dir: Path | None = None, limits: ResourceLimits | None = None,
    kind: str | None = None, stop: threading.Event | None = None,
) -> Verdict:
    """Run the task's tests against `source` in the sandbox and judge the result.

    `kind` forces an isolation kind (default: the strongest this host offers); a set `stop` kills the test process
    and every child at once (the attempt's wall budget ended) and makes the verdict a timeout."""
    limits = limits or ResourceLimits()
    kind = kind or isolation_kind()
    key = task_key(task)
    with Scan(source) as scanning:
        try:
            if source == task.reference and key not in _expected:
                # The reference's own run is trusted: its collection spares a separate one.
                run = run_tests(task, source, limits, kind, stop=stop)
                collected = clean_collection(run)
                if collected is not None:
                    _expected.setdefault(key, collected)
                verdict = judge_run(run, _expected.get(key, Trusted((), {})))
            else:
                expected = expected_tests(task, limits, kind, stop)
                run = run_tests(task, source, limits, kind, stop=stop)
                verdict = judge_run(run, expected)
            verdict.duration_s, verdict.output = round(run.duration_s, 3), run.output
        except TaskBroken as broken:
            verdict = Verdict(result="error", error_kind="TaskError",
                              error_tail=f"TaskError: the task's reference does not collect cleanly\n{broken}")
        except Stopped:
            verdict = Verdict(result="timeout", error_kind="Timeout",
                              error_tail="Timeout: the attempt's budget ended while the tests were collected")
        verdict.isolation, verdict.suspicious = kind, scanning.reasons(stop)
    return keep(verdict, task, source, keep_dir)


def keep(verdict: Verdict, task: TaskSpec, source: str, keep_dir: Path | None) -> Verdict:
    """Copy the judged solution (of one over the size limit, its head) and the test output next to the caller's
    records."""
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        (keep_dir / task.entry).write_text(source)
        (keep_dir / TEST_OUTPUT).write_text(verdict.output or verdict.error_tail)
    return verdict


@dataclass(frozen=True)
class TooLarge:
    """An entry file over the size limit (ResourceLimits.entry_bytes), seen without being read whole: its size, its
    head and which file it was (device, inode, modification time: a round that left it untouched is a no-op)."""

    size: int
    limit: int
    stamp: tuple[int, int, int]
    head: bytes = field(compare=False, repr=False)

    def verdict(self, entry: str) -> Verdict:
        return Verdict(result="fail", error_kind="TooLarge",
                       error_tail=f"TooLarge: {entry} is {self.size:,} bytes, over the limit of {self.limit:,} bytes "
                                  "on a judged file: it was not run and no test ran")


def entry_source(path: Path, limit: int) -> str | TooLarge | None:
    """The text of an entry file to judge; TooLarge past `limit` bytes (its size checked before anything is read,
    then only its head); None when there is none. A symlink is not followed: written in a jail, it may name what
    only the harness can read (the task's reference); nor is anything but a regular file read (a pipe would block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        data = file.read(limit + 1 if info.st_size <= limit else HEAD_BYTES)
        if info.st_size > limit or len(data) > limit:  # also a file that grew since
            stamp = (info.st_dev, info.st_ino, info.st_mtime_ns)
            return TooLarge(max(info.st_size, len(data)), limit, stamp, data[:HEAD_BYTES])
    return data.decode(errors="replace")


def too_large(task: TaskSpec, found: TooLarge, keep_dir: Path | None) -> Verdict:
    """The verdict on an entry file over the size limit, nothing run; its head is what the round keeps."""
    return keep(found.verdict(task.entry), task, found.head.decode(errors="replace"), keep_dir)


__all__ = ["ResourceLimits", "Verdict", "isolation_kind", "judge"]
