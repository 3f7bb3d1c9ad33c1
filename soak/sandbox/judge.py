"""Judge untrusted solutions: run a task's tests against them in a contained, limited, throw-away sandbox.

Every run gets a fresh workspace holding the task's test files and the solution, written fresh; pytest runs there
with `-I`, an empty ini (`-c`), `--noconftest` and only explicitly named test files, so nothing the solution writes
configures pytest. The process is contained by soak.jail (the strongest isolation the host offers, recorded in the
verdict; rlimits, wall timeout, workspace size cap, capped output, allowlisted environment); under bubblewrap the
test files and `__pycache__` are bound read-only.

A pass needs pytest's exit 0, the plugin's report (`soak.sandbox.plugin`), unchanged test files, and exactly the
tests of a trusted collection (made with the task's reference, cached per process) passed. The solution runs inside
the pytest process that judges it, so in-process tampering with pytest itself (patched hooks, a forged report)
cannot be fully excluded; the count check against the trusted collection and the isolation are what hold.
"""
import contextlib
import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from soak.errors import BadInput
from soak.sandbox.jail import Contained, MiB, ResourceLimits, isolation_kind, launch, remove_tree, wrap
from soak.tasks.spec import TaskSpec

EMPTY_INI = Path(__file__).with_name("pytest_empty.ini")
REPORT_NAME = ".soak_report.json"
TAIL_LINES = 60
COLLECT_TIMEOUT_SECONDS = 120
Outcome = Literal["pass", "fail", "timeout", "error"]


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
    """What `soak.sandbox.plugin` writes; parsed strictly because the solution could have written it."""

    exitstatus: int
    collected: list[str]
    passed: list[str]
    failed: list[str]
    first_failure: dict[str, str] | None
    collection_errors: list[dict[str, str]]


@dataclass
class TestRun(Contained):
    """One sandboxed pytest process, finished, with what its workspace showed."""

    report: Report | None = None
    tests_changed: bool = False
    workspace: str = ""
    running_test: str = ""
    """The test pytest had started last, for runs that never finish."""


class TaskBroken(Exception):
    """The trusted collection (the task's reference) failed, so no count to judge by."""


def run_tests(task: TaskSpec, source: str, limits: ResourceLimits, kind: str, collect_only: bool = False) -> TestRun:
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
               "-p", "no:cacheprovider", "-p", "soak.sandbox.plugin", f"--soak-report={report}", "-q", "--tb=short",
               "--color=no", *(["--collect-only"] if collect_only else []), *task.tests]
        readonly = [ws / name for name in task.tests] + [ws / "__pycache__"]
        # A collection is trusted and short; a tight task timeout must not fail it on a busy machine.
        timeout = max(task.test_timeout_seconds, COLLECT_TIMEOUT_SECONDS) if collect_only else task.test_timeout_seconds
        run = TestRun(**vars(launch(wrap(kind, ws, readonly, cmd), ws, limits, timeout, kind)), workspace=str(ws))
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


def clean_collection(run: TestRun) -> tuple[str, ...] | None:
    """The collected node ids of a trusted run, or None when it is no good to count by."""
    report = run.report
    if run.timed_out or report is None or report.collection_errors or not report.collected:
        return None
    return tuple(report.collected)


def relative(text: str, workspace: str) -> str:
    return text.replace(workspace + os.sep, "").replace(workspace, ".") if workspace else text


def tail(text: str, lines: int = TAIL_LINES, width: int = 300) -> str:
    return "\n".join(line[:width] for line in text.strip("\n").splitlines()[-lines:])


def judge_run(run: TestRun, expected: tuple[str, ...]) -> Verdict:
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


def expected_tests(task: TaskSpec, limits: ResourceLimits, kind: str) -> tuple[str, ...]:
    """The node ids a full pass must cover, from a collection with the task's reference (cached per process)."""
    key = task_key(task)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _expected:
            run = run_tests(task, task.reference, limits, kind, collect_only=True)
            collected = clean_collection(run)
            if collected is None:
                raise TaskBroken(tail(relative(run.output, run.workspace), TAIL_LINES - 1))
            _expected[key] = collected
        return _expected[key]


def judge(
    task: TaskSpec, source: str, *, keep_dir: Path | None = None, limits: ResourceLimits | None = None
) -> Verdict:
    """Run the task's tests against `source` in the sandbox and judge the result."""
    limits = limits or ResourceLimits()
    kind = isolation_kind()
    key = task_key(task)
    if source == task.reference and key not in _expected:
        # The reference's own run is trusted: its collection spares a separate one.
        run = run_tests(task, source, limits, kind)
        collected = clean_collection(run)
        if collected is not None:
            _expected.setdefault(key, collected)
        verdict = judge_run(run, _expected.get(key, ()))
    else:
        try:
            expected = expected_tests(task, limits, kind)
        except TaskBroken as broken:
            verdict = Verdict(outcome="error", error_kind="TaskError", isolation=kind,
                              error_tail=f"TaskError: the task's reference does not collect cleanly\n{broken}")
            return keep(verdict, task, source, keep_dir)
        run = run_tests(task, source, limits, kind)
        verdict = judge_run(run, expected)
    verdict.duration_s, verdict.isolation, verdict.output = round(run.duration_s, 3), kind, run.output
    return keep(verdict, task, source, keep_dir)


def keep(verdict: Verdict, task: TaskSpec, source: str, keep_dir: Path | None) -> Verdict:
    """Copy the judged solution and the test output next to the caller's records."""
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        (keep_dir / task.entry).write_text(source)
        (keep_dir / "test_output.txt").write_text(verdict.output or verdict.error_tail)
    return verdict


__all__ = ["ResourceLimits", "Verdict", "isolation_kind", "judge"]
