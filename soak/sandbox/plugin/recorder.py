"""The recorder: pytest hooks that send each event over the channel and compare the frozen state at every step.

It freezes at session start (the solution not yet imported), adds the test code after the collection, and
compares after the collection, after every test (the registry and the test code) and at session end. Failures
carry their exception kind and a traceback tail without pytest's own frames: that is the feedback a model gets.
"""

import errno
import os
import re
import types
from collections.abc import Generator

import pytest

from soak.sandbox.plugin.channel import Channel
from soak.sandbox.plugin.freezing import (
    Frozen,
    changes,
    code_print,
    freeze_modules,
    freeze_namespace,
    freeze_registry,
    item_code,
    item_function,
    judging_modules,
    module_problems,
    test_modules,
)

TAIL_LINES = 200
"""Lines of each traceback kept in an event; the harness trims further."""


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


def short_tail(text: str) -> str:
    return "\n".join(without_internal_frames(text)[-TAIL_LINES:])


class ResultRecorder:
    """Streams events as pytest reports them and checks the frozen state at every step."""

    def __init__(self, config: pytest.Config, channel: Channel) -> None:
        self.config = config
        self.channel = channel
        self.base: Frozen | None = None
        self.tests = Frozen()
        self.modules: list[types.ModuleType] = []
        self.registry = Frozen()
        self.items: list[pytest.Item] = []
        self.reported: set[str] = set()
        self.collected = False
        # Bound now: a solution that rebinds the freezing functions does not redirect the recorder's own calls.
        self._freeze_modules, self._freeze_registry, self._changes = freeze_modules, freeze_registry, changes

    def tampered(self, evidence: list[str]) -> None:
        fresh = [line for line in evidence if line not in self.reported]
        if fresh:
            self.reported.update(fresh)
            self.channel.send("tampered", evidence=fresh)

    def snapshot(self) -> Frozen:
        return self._freeze_registry(self._freeze_modules(Frozen(), self.modules), self.config.pluginmanager)

    def test_snapshot(self, items: list[pytest.Item]) -> Frozen:
        frozen = Frozen()
        classes: set[int] = set()
        for module in test_modules(items):
            freeze_namespace(frozen, ("test module", module.__name__), vars(module), module.__name__, classes, True)
        for item in items:
            frozen.group(("test", item.nodeid))
            frozen.add("function", item_function(item))
            frozen.add("__code__", item_code(item))
        return frozen

    def check(self, items: list[pytest.Item] | None = None, full: bool = True) -> None:
        """Compare with the frozen state; not `full` (after each test): the registry and the test modules only, the
        judging machinery is compared after the collection and at the end."""
        if self.base is None:
            return
        now = self.snapshot() if full else self._freeze_registry(Frozen(), self.config.pluginmanager)
        evidence = self._changes(self.base if full else self.registry, now)
        if self.tests.names:
            evidence += self._changes(self.tests, self.test_snapshot(items or []))
        for module in test_modules(items or []):
            evidence += module_problems(module)
        if evidence:
            self.tampered(evidence)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.modules = judging_modules()
        self.base = self.snapshot()
        self.registry = self._freeze_registry(Frozen(), self.config.pluginmanager)
        self.channel.send("start", pid=os.getpid())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector,
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if report.failed:
            call = report.__dict__.get("call")
            kind = error_kind(call.excinfo.value) if call is not None and call.excinfo else "CollectionError"
            self.channel.send("collect_error", nodeid=report.nodeid or str(collector.path), kind=kind,
                              tail=short_tail(report.longreprtext))
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = list(session.items)
        self.items = items
        self.check(items)
        self.tests = self.test_snapshot(items)
        prints = {item.nodeid: code_print(code) if (code := item_code(item)) else "" for item in items}
        self.collected = True
        self.channel.send("collected", items=[item.nodeid for item in items], prints=prints)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.channel.send("begin", nodeid=nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None],
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        kind = tail = ""
        if report.failed:
            kind = error_kind(call.excinfo.value) if call.excinfo else "Failed"
            tail = short_tail(report.longreprtext)
        if report.when == "teardown":
            self.check(self.items, full=False)
        self.channel.send("report", nodeid=item.nodeid, when=report.when, outcome=report.outcome, kind=kind, tail=tail)
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.check(self.items)
        self.channel.send("finish", exitstatus=int(exitstatus))
