"""Pytest plugin loaded inside the sandbox: a JSON report of what ran, so the harness never judges by exit codes alone.

The harness loads it with `-p soak.sandbox.plugin --soak-report PATH`. It records the collected node ids, which tests
passed or failed, the first failure's exception type and traceback text, and collection errors; and, in a file next
to the report, the test running right now.
"""

import errno
import json
import re
from pathlib import Path

import pytest

TAIL_LINES = 200
"""Lines of each traceback kept in the report; the harness trims further."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak-report", default=None, help="Write soak's JSON test report to this file.")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("soak_report")
    if path:
        config.pluginmanager.register(ResultRecorder(Path(path)), "soak-recorder")


def error_kind(error: BaseException) -> str:
    """The exception's type name, unwrapped from pytest's collection wrapper and folded into the kinds that matter."""
    if isinstance(error, pytest.Collector.CollectError) and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, SyntaxError):
        return "SyntaxError"
    if isinstance(error, ImportError):
        return "ImportError"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "FileTooLarge"
    return type(error).__name__


INTERNAL_FRAME = re.compile(r"^(<frozen importlib\.|\S*/(_pytest|pluggy|importlib)/\S*:\d+: in )")
"""A `--tb=short` frame line inside pytest or the import machinery: noise in feedback to a model."""


def without_internal_frames(text: str) -> list[str]:
    kept, skipping = [], False
    for line in text.splitlines():
        if INTERNAL_FRAME.match(line):
            skipping = True
        elif line.startswith("Hint: make sure your test modules"):
            continue
        elif not skipping or not line.startswith(" "):
            skipping = False
            kept.append(line)
    return kept


def _entry(nodeid: str, kind: str, text: str) -> dict[str, str]:
    return {"nodeid": nodeid, "kind": kind, "tail": "\n".join(without_internal_frames(text)[-TAIL_LINES:])}


class ResultRecorder:
    """Collects outcomes as pytest reports them and writes the report when the session ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.collected: list[str] = []
        self.passed: set[str] = set()
        self.failed: set[str] = set()
        self.first_failure: dict[str, str] | None = None
        self.collection_errors: list[dict[str, str]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if report.failed:
            call = report.__dict__.get("call")
            kind = error_kind(call.excinfo.value) if call is not None and call.excinfo else "CollectionError"
            self.collection_errors.append(_entry(report.nodeid or str(collector.path), kind, report.longreprtext))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if report.failed:
            self.failed.add(item.nodeid)
            if self.first_failure is None:
                kind = error_kind(call.excinfo.value) if call.excinfo else "Failed"
                self.first_failure = _entry(item.nodeid, kind, report.longreprtext)
        elif report.when == "call" and report.passed:
            self.passed.add(item.nodeid)
        return report

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        # Named in the verdict when the run times out or dies in the middle of a test.
        self.path.with_suffix(".current").write_text(nodeid)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        report = {
            "exitstatus": int(exitstatus),
            "collected": self.collected,
            "passed": sorted(self.passed - self.failed),
            "failed": sorted(self.failed),
            "first_failure": self.first_failure,
            "collection_errors": self.collection_errors,
        }
        self.path.write_text(json.dumps(report))
