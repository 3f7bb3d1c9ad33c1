"""The overnight loop: cycles in seeded order, lanes, deadline and grace, error budget, signals, resume."""

import asyncio
import os
import random
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from soak.agent.attempt import AttemptContext, Ending, Finished, task_row
from soak.agent.limits import AttemptLimits
from soak.config import ErrorBudget, SoakConfig
from soak.decisions.routing import applied
from soak.errors import is_disk_full
from soak.night.room import DISK_FULL, Room, unless_full
from soak.record.folder import RowListener, RunFolder
from soak.record.identity import AttemptId
from soak.record.read import read_attempts, read_rows
from soak.record.schema import CallRow, EventRow, Outcome, RunInfo, RunLimits, Session, TaskRow
from soak.sandbox.disk import remove_tree
from soak.tasks.spec import TaskSpec

EXIT_CODES = {"deadline": 0, "tasks": 0, "cycles": 0, "error_budget": 1, "disk_full": 1, "signal": 130}
HEARTBEAT_SECONDS = 5.0
MAX_GRACE_SECONDS = 300.0
END_RESERVE_SECONDS = 20.0
"""Kept out of the grace for what follows it: cancelling the attempts (each kills its tests, an agent's tree),
recording them, stopping the stack (a server gets 10 s of SIGTERM, then SIGKILL)."""


def deadline_slack(length: float) -> float:
    """How late a night of `length` seconds may end: 5 % of it, at least 60 s."""
    return max(60.0, 0.05 * length)


def grace_for(length: float, configured: float | None = None) -> float:
    """Seconds the attempts in flight at the deadline get to finish: `grace_seconds` when set, else
    min(300, slack - 20 s), so grace and shutdown fit the slack (a 10-minute night: 40 s; 8 hours: 300 s)."""
    if configured is not None:
        return max(0.0, configured)
    return min(MAX_GRACE_SECONDS, max(0.0, deadline_slack(length) - END_RESERVE_SECONDS))


TaskFn = Callable[[TaskSpec, AttemptContext], Coroutine[Any, Any, TaskRow]]
"""Runs one attempt and returns its row; raises CancelledError when cancelled. The agent loop is the real one."""


REDONE: frozenset[str] = frozenset({"cancelled", "node_lost"})
"""Outcomes a resume runs again unasked: the attempt never finished, through no fault of the stack or the model."""


def finished_attempts(attempts: Iterable[TaskRow], retry: Iterable[str] = ()) -> set[AttemptId]:
    """The slots (AttemptId.slot) of the attempts a session does not run again: those whose row that counts
    (soak.record.read.latest_attempts) is neither REDONE nor of an outcome to `retry`."""
    again = {*REDONE, *retry}
    return {r.attempt.slot for r in attempts if r.outcome not in again}


class Readiness(Protocol):
    """What a pause waits on: the stack supervisor (soak.stack), an endpoint probe, or both."""

    async def wait_until_ready(self, timeout: float) -> bool: ...


class Schedule:
    """Cycles through the suite, skipping attempts already finished. A cycle (from 1) is `repeats` passes over the
    suite in the cycle's own seeded order, so a task's tries are one pass apart: spread evenly over the cycle, each
    sampling another hour of the night, never back to back."""

    def __init__(self, tasks: list[TaskSpec], seed: int, limits: RunLimits, done: set[AttemptId]):
        self.tasks = {task.id: task for task in tasks}
        self.seed, self.limits, self.done = seed, limits, done
        self.taken = len(done)
        last = max((slot.cycle for slot in done), default=0)
        incomplete = [c for c in range(1, last + 1) if any(slot not in done for slot in self.slots(c))]
        self.cycle = (incomplete[0] if incomplete else last + 1) - 1
        self.queue: deque[AttemptId] = deque()

    def order(self, cycle: int) -> list[str]:
        ids = sorted(self.tasks)
        random.Random(f"{self.seed}/{cycle}").shuffle(ids)
        return ids

    def slots(self, cycle: int) -> list[AttemptId]:
        """The cycle's attempts (their slots) in the order they run."""
        order = self.order(cycle)
        return [AttemptId(t, cycle, repeat) for repeat in range(1, self.limits.repeats + 1) for t in order]

    def take(self) -> tuple[AttemptId, TaskSpec] | None:
        """The next attempt's slot and its task, or None when the task or cycle limit is reached."""
        if not self.tasks or (self.limits.max_tasks is not None and self.taken >= self.limits.max_tasks):
            return None
        while not self.queue:
            self.cycle += 1
            if self.limits.max_cycles is not None and self.cycle > self.limits.max_cycles:
                return None
            self.queue.extend(slot for slot in self.slots(self.cycle) if slot not in self.done)
        self.taken += 1
        slot = self.queue.popleft()
        return slot, self.tasks[slot.task_id]

    @property
    def end_reason(self) -> str:
        return "tasks" if self.limits.max_tasks is not None and self.taken >= self.limits.max_tasks else "cycles"


def unused(path: Path) -> Path:
    """`path`, or the first of `path.1`, `path.2`, ... that does not exist."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


class InfraWindow:
    """The error budget: infra errors among the last N finished attempts, and how long the stack has been failing."""

    def __init__(self, config: ErrorBudget):
        self.window: deque[bool] = deque(maxlen=config.window_tasks)
        self.limit = config.max_infra_fraction * config.window_tasks
        self.failing_since: float | None = None
        """Monotonic time of the first pause since an attempt last got through to the model."""

    def add(self, outcome: str) -> bool:
        """Record an outcome; True when the budget is exceeded."""
        if outcome in REDONE:
            return False
        self.window.append(outcome == "infra_error")
        if outcome != "infra_error":
            self.failing_since = None
        return sum(self.window) > self.limit


@dataclass
class RunEnd:
    reason: str
    """deadline | tasks | cycles | error_budget | disk_full | signal"""
    detail: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason]


@dataclass
class InFlight:
    """An attempt running now; its identity is its context's."""

    started_at: float
    job: asyncio.Task[TaskRow]
    context: AttemptContext
    round: int = 0
    """The round the attempt is in (0: not told, e.g. an external agent)."""
    role: str = ""
    """The role of the call running now (from on_step), else of the last recorded call."""


@dataclass(frozen=True)
class SessionStart:
    """How this session was started, beside the run folder it carries on."""

    readiness: Readiness
    """What a pause waits on (made in `wiring`: the stack supervisor and/or an endpoint probe)."""
    detached: bool = False
    retry: Iterable[str] = ()
    """Outcomes whose attempts this session runs again (`--retry`)."""
    started_at: float | None = None
    """When the session began (before its stack started, so start-up counts as running time); default: now."""


class Runner(RowListener):
    """One session of a run: schedules attempts into lanes until a limit, a signal or the error budget stops it."""

    def __init__(self, folder: RunFolder, info: RunInfo, config: SoakConfig, tasks: list[TaskSpec], task_fn: TaskFn,
                 start: SessionStart):
        self.folder, self.info, self.config, self.task_fn = folder, info, config, task_fn
        self.readiness = start.readiness
        self.session = len(info.sessions)
        self.routing = info.routing
        """The routing file: its label goes into the attempt's context, its cap or extension into the task (an
        escalation is the delegation loop's, soak.night.attempts)."""
        self.retry = frozenset(start.retry)
        """Outcomes whose attempts this session runs again; the new row supersedes the old one."""
        attempts = read_attempts(folder.layout.tasks)
        self.retried = {r.attempt.slot: r.session for r in attempts if r.outcome in self.retry}
        """An attempt's slot -> session of the row a retry supersedes (its work folder is kept under that name)."""
        self.schedule = Schedule(tasks, config.seed, info.limits, finished_attempts(attempts, self.retry))
        self.budget = InfraWindow(config.error_budget)
        self.go = asyncio.Event()
        self.go.set()
        self.room = Room(folder, config.error_budget.wait_for_stack_seconds, self.go.clear, self.go_on,
                         lambda why: self.stop("disk_full", why, cancel=True), lambda: not self.scheduling)
        self.in_flight: dict[str, InFlight] = {}
        self.end: RunEnd | None = None
        self.recovery: asyncio.Task[None] | None = None
        self.deadline_at: float | None = None
        """Wall-clock time at which no new attempt starts; None without a duration limit."""
        duration = info.limits.duration_seconds
        self.length = None if duration is None else max(0.0, duration - info.active_seconds)
        """This session's share of the duration (what the earlier sessions left), from its start; None: no limit."""
        self.grace = 0.0 if self.length is None else grace_for(self.length, config.grace_seconds)
        """Seconds the attempts in flight at the deadline get before they are cancelled (grace_for)."""
        self.started_at, self.detached = start.started_at, start.detached

    # --- session bookkeeping ---------------------------------------------------------------------

    def begin(self) -> None:
        now = min(self.started_at or time.time(), time.time())
        if self.length is not None:
            self.deadline_at = now + self.length
        self.info.sessions.append(
            Session(session=self.session, pid=os.getpid(), started_at=now, last_seen_at=now, detached=self.detached)
        )
        self.info.started_at = self.info.started_at or now
        self.info.ended_at = None
        self.folder.write_info(self.info)
        if self.session == 0:
            self.folder.event("run_start", f"{len(self.schedule.tasks)} tasks, concurrency {self.config.concurrency}")
        else:
            self.folder.event("resume", self.resume_detail())

    def resume_detail(self) -> str:
        tries = {row.attempt for row in read_rows(self.folder.layout.tasks, TaskRow)}
        orphans = sum(call.attempt not in tries for call in read_rows(self.folder.layout.calls, CallRow))
        repaired = {log.path.name: log.repaired_bytes for log in self.folder.logs if log.repaired_bytes}
        left = "" if self.deadline_at is None else f", {max(0.0, self.deadline_at - time.time()):.0f} s left"
        retried = f", {len(self.retried)} to retry ({', '.join(sorted(self.retry))})" if self.retry else ""
        return (
            f"session {self.session}: {self.schedule.taken} attempts already finished{retried}{left}; "
            f"{orphans} calls of attempts cut short kept; torn rows cut: {repaired or 'none'}"
        )

    def heartbeat(self) -> None:
        self.info.sessions[-1].last_seen_at = time.time()
        self.info.in_flight = list(self.in_flight)
        unless_full(lambda: self.folder.write_info(self.info))

    def finish_session(self, end: RunEnd) -> None:
        now = time.time()
        self.folder.event("run_end", f"{end.reason}: {end.detail}".rstrip(": "))
        current = self.info.sessions[-1]
        current.last_seen_at = current.stopped_at = self.info.ended_at = now
        current.reason, current.exit_code = end.reason, end.exit_code
        self.info.in_flight = []
        unless_full(lambda: self.folder.write_info(self.info))

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> RunEnd:
        """Run until a limit, a signal or the error budget; every started attempt leaves a row."""
        self.begin()
        self.folder.listeners.append(self)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.on_signal, sig)
        helpers = [asyncio.create_task(self.beat()), asyncio.create_task(self.watch_deadline())]
        try:
            await asyncio.gather(*(self.lane() for _ in range(max(1, self.config.concurrency))))
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            for helper in [*helpers, *([self.recovery] if self.recovery else [])]:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self.folder.listeners.remove(self)
        assert self.end is not None
        self.finish_session(self.end)
        return self.end

    @property
    def scheduling(self) -> bool:
        """Attempts may still start: the night runs on, or only ran out of attempts to schedule (a deadline, a signal or
        the error budget stops them)."""
        return self.end is None or self.end.reason in ("tasks", "cycles")

    def stop(self, reason: str, detail: str = "", cancel: bool = False) -> None:
        """No new attempt starts; with `cancel`, the ones in flight are cancelled and recorded as such."""
        if self.end is None:
            self.end = RunEnd(reason, detail)
        self.go.set()
        if cancel:
            for flight in self.in_flight.values():
                flight.job.cancel()

    def on_signal(self, sig: signal.Signals) -> None:
        self.folder.event("signal", f"{sig.name}: stop scheduling, cancel {len(self.in_flight)} attempts in flight")
        self.stop("signal", sig.name, cancel=True)

    async def beat(self) -> None:
        while True:
            self.heartbeat()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def watch_deadline(self) -> None:
        if self.deadline_at is None:
            return
        await asyncio.sleep(max(0.0, self.deadline_at - time.time()))
        self.stop("deadline", f"{len(self.in_flight)} attempts in flight then, grace {self.grace:g} s")
        await asyncio.sleep(self.grace)
        for flight in self.in_flight.values():
            flight.job.cancel()

    async def lane(self) -> None:
        while True:
            await self.go.wait()
            if self.end is not None:
                return
            item = self.schedule.take()
            if item is None:
                self.stop(self.schedule.end_reason)
                return
            await self.attempt(*item)

    async def attempt(self, slot: AttemptId, task: TaskSpec) -> None:
        workdir = self.folder.layout.attempt(slot).path
        superseded = self.retried.pop(slot, None)
        if superseded is not None and workdir.exists():  # a retry keeps the superseded attempt's folder beside it
            workdir.rename(unused(workdir.with_name(f"{workdir.name}.session-{superseded}")))
        if workdir.exists():  # a redo after a crash or a cancel starts clean, however deep a tree the attempt left
            await asyncio.to_thread(remove_tree, workdir)  # seconds for a deep tree: the other lanes go on meanwhile
            if not self.scheduling:  # the night stopped meanwhile: no new attempt starts, a resume redoes this one
                return
        workdir.mkdir(parents=True, exist_ok=True)
        task, _, _, label = applied(self.routing, task)
        attempt = replace(slot, session=self.session)
        row = await self.run_try(task, attempt, workdir, label)
        if row.outcome == "node_lost" and self.scheduling:  # the cluster's fault: once more, on another node
            self.lost(row, "retried on another node")
            self.record(row)
            row = await self.run_try(task, attempt, workdir, label)
        if row.outcome == "node_lost":
            self.lost(row, "redone on resume")
        while row.error_kind == DISK_FULL and await self.room.wait(row.error_tail):  # cut short by a full disk: again
            await self.room.recorded(self.record, row)
            await asyncio.to_thread(remove_tree, workdir)
            workdir.mkdir(parents=True, exist_ok=True)
            row = await self.run_try(task, attempt, workdir, label)
        await self.room.recorded(self.record, row)

    def lost(self, row: TaskRow, then: str) -> None:
        """A try lost with its cluster node: an event naming the node as its source (the report counts per node)."""
        self.folder.event("node_lost", f"{row.attempt.name} lost with its node "
                          f"({row.error_kind}): {then}", row.node or "?")

    async def run_try(self, task: TaskSpec, attempt: AttemptId, workdir: Path, label: str) -> TaskRow:
        """One try of an attempt, in flight while it runs; its row, whatever ended it."""
        key = attempt.name

        def on_call(row: CallRow) -> None:
            flight.role = flight.role if flight.round else row.role
            self.folder.record_call(row)

        def on_step(round_: int, role: str) -> None:
            flight.round, flight.role = round_, role

        context = AttemptContext(self.folder.run_id, attempt, workdir, label, on_call, on_step,
                                 self.folder.record_round)
        job = asyncio.create_task(self.task_fn(task, context))
        flight = self.in_flight[key] = InFlight(time.time(), job, context)
        try:
            return await job
        except asyncio.CancelledError:
            row = self.unfinished_row(task, flight, "cancelled", f"stopped by {self.end.reason if self.end else '?'}")
            lane = asyncio.current_task()
            if lane is not None and lane.cancelling():  # the lane itself was cancelled: record, then let it go
                self.record(row)
                raise
            return row
        except Exception as error:  # noqa: BLE001 - our bug in one attempt is a row, the night goes on
            if is_disk_full(error):  # not a bug: the attempt runs again once there is room
                return self.unfinished_row(task, flight, "cancelled", str(error), kind=DISK_FULL)
            tail = "".join(traceback.format_exception(error)[-30:])
            return self.unfinished_row(task, flight, "harness_error", tail, kind=type(error).__name__)
        finally:
            del self.in_flight[key]

    def unfinished_row(self, task: TaskSpec, flight: InFlight, outcome: Outcome, detail: str,
                       kind: str = "") -> TaskRow:
        """The row of an attempt that returned none: its identity and calls as its context holds them."""
        ending = Ending(outcome, kind or outcome, detail)
        finished = Finished(flight.started_at, time.time() - flight.started_at, ending)
        return task_row(task, flight.context, finished, AttemptLimits.of(task, self.config.budgets))

    def record(self, row: TaskRow) -> None:
        self.folder.record_task(row)
        if self.budget.add(row.outcome):
            self.pause(f"{sum(self.budget.window)} infra errors in the last {len(self.budget.window)} attempts")

    def go_on(self) -> None:
        """Attempts start again once neither the stack nor room on disk is awaited."""
        if self.recovery is None and self.room.waiting is None:
            self.go.set()

    def pause(self, why: str) -> None:
        if self.recovery is None and self.end is None:
            self.recovery = asyncio.create_task(self.recover(why))

    # The run folder's listener: the stack supervisor reports a dead server as a `down` event.
    def event(self, row: EventRow) -> None:
        if row.kind == "down":
            self.pause(f"{row.source} is down ({row.detail})")

    async def recover(self, why: str) -> None:
        """Pause new attempts until the stack is back; a stack failing for too long ends the run."""
        budget = self.config.error_budget
        self.go.clear()
        now = time.monotonic()
        self.budget.failing_since = self.budget.failing_since or now
        left = budget.wait_for_stack_seconds - (now - self.budget.failing_since)
        self.folder.event("pause", f"{why}; waiting up to {max(0.0, left):.0f} s for the stack")
        if left > 0 and await self.readiness.wait_until_ready(left):
            self.budget.window.clear()
            self.folder.event("unpause", "the stack answers again")
            self.recovery = None
            self.go_on()
            return
        reason = f"the stack was not back within {budget.wait_for_stack_seconds:g} s of failing"
        self.folder.event("error_budget", reason)
        self.recovery = None
        self.stop("error_budget", reason, cancel=True)
