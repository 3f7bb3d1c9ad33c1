"""What a person watching the night sees: running totals, the rich live view, quiet log lines, the summary."""

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from soak.night.loop import REDONE
from soak.record.folder import RowListener
from soak.record.identity import AttemptId
from soak.record.layout import RunLayout
from soak.record.read import read_attempts, read_rows
from soak.record.schema import MANGLED, MODEL_OUTCOMES, CallRow, EventRow, RunInfo, TaskRow
from soak.record.summary import span_text

RATE_WINDOW_SECONDS = 300.0
OUTCOME_STYLE = {"pass": "green", "fail": "red", "infra_error": "magenta", "harness_error": "magenta",
                 "cancelled": "dim"}
STACK_EVENTS = ("down", "restart", "up")
"""The stack's events a log of the night shows (beside the runner's own)."""


@dataclass
class Current:
    """An attempt running now, as the live view shows it."""

    attempt: AttemptId
    started_at: float = 0.0
    """0 = unknown (read from run.json's in_flight)."""
    round: int = 0
    """0 = not told (an external agent's attempt)."""
    role: str = ""
    calls: int = 0

    @property
    def place(self) -> str:
        """The cycle, with the repeat when it is a later one."""
        cycle, repeat = self.attempt.cycle, self.attempt.repeat
        return str(cycle) if repeat == 1 else f"{cycle}-{repeat}"


class RunStats(RowListener):
    """Running totals of a run (all sessions), fed row by row: a RowListener of the run folder."""

    def __init__(self, info: RunInfo):
        self.info = info
        self.outcomes: Counter[str] = Counter()
        self.latest: dict[AttemptId, str] = {}
        """An attempt's slot -> the outcome that counts for it."""
        self.calls = 0
        self.mangled_calls = 0
        """Calls whose tool call was judged neither ok nor none (mangled name, bad JSON, path escape...)."""
        self.revised: dict[AttemptId, bool] = {}
        """The slots of the attempts that went past round 1 -> whether the revision passed."""
        self.restarts = 0
        self.recent_calls: deque[float] = deque()
        self.in_flight: Callable[[], list[Current]] = lambda: [Current(AttemptId.named(k)) for k in self.info.in_flight]
        """The attempts running now; the runner plugs in its own (round, role, calls and start time)."""
        self.grace: float | None = None
        """Seconds the attempts in flight at the deadline get (the runner's), for the view after the deadline."""
        self.cycle = 0
        self.state = "running"

    @classmethod
    def from_folder(cls, layout: RunLayout, info: RunInfo, with_calls: bool = True) -> "RunStats":
        """Totals so far from the CSVs (all sessions); `soak runs` skips the larger calls.csv."""
        stats = cls(info)
        for task in read_attempts(layout.tasks):
            stats.task(task)
        for call in read_rows(layout.calls, CallRow) if with_calls else ():
            stats.call(call)
        stats.restarts = sum(e.kind == "restart" for e in read_rows(layout.events, EventRow))
        return stats

    @property
    def deadline_at(self) -> float | None:
        """Wall-clock end of the current session: its start plus what the earlier ones left of the duration."""
        duration_seconds, sessions = self.info.limits.duration_seconds, self.info.sessions
        if duration_seconds is None or not sessions:
            return None
        return sessions[-1].started_at + max(0.0, duration_seconds - sum(s.active_seconds for s in sessions[:-1]))

    def task(self, row: TaskRow) -> None:
        """One attempt's row; a later row of the same attempt, a retry's, supersedes the earlier one
        (soak.record.read.latest_attempts)."""
        key = row.attempt.slot
        if (earlier := self.latest.get(key)) is not None:
            self.outcomes[earlier] -= 1
            if not self.outcomes[earlier]:
                del self.outcomes[earlier]
        self.latest[key] = row.outcome
        self.outcomes[row.outcome] += 1
        self.cycle = max(self.cycle, row.cycle)
        if row.rounds > 1:
            self.revised[key] = row.outcome == "pass"
        else:
            self.revised.pop(key, None)

    def call(self, row: CallRow) -> None:
        self.calls += 1
        self.mangled_calls += row.integrity in MANGLED
        self.recent_calls.append(row.started_at)
        while self.recent_calls and self.recent_calls[0] < row.started_at - RATE_WINDOW_SECONDS:
            self.recent_calls.popleft()

    def event(self, row: EventRow) -> None:
        if row.kind == "pause":
            self.state = "paused"
        elif row.kind == "unpause":
            self.state = "running"
        elif row.kind in ("signal", "error_budget"):
            self.state = "stopping"
        elif row.kind == "restart":
            self.restarts += 1

    @property
    def done(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome not in REDONE)

    @property
    def judged(self) -> int:
        return sum(self.outcomes[o] for o in MODEL_OUTCOMES)

    @property
    def pass_rate(self) -> float | None:
        return self.outcomes["pass"] / self.judged if self.judged else None

    def calls_per_minute(self, now: float | None = None) -> float:
        """Calls started in the last five minutes (or since the run started, if sooner), per minute."""
        now = min(now or time.time(), self.info.ended_at or time.time())
        start = max(now - RATE_WINDOW_SECONDS, self.info.sessions[-1].started_at if self.info.sessions else now)
        recent = sum(1 for t in self.recent_calls if t >= start)
        return recent / max(now - start, 1.0) * 60

    def left(self) -> str:
        parts = []
        if self.deadline_at is not None and time.time() >= self.deadline_at and self.info.ended_at is None:
            grace = "" if self.grace is None else f" (grace {span_text(self.grace)}, then cancelled, redone on resume)"
            parts.append(f"deadline passed: no new attempt, those in flight finish{grace}")
        elif self.deadline_at is not None:
            parts.append(f"{span_text(max(0.0, self.deadline_at - time.time()))} left")
        limits = self.info.limits
        if limits.max_tasks is not None:
            parts.append(f"{max(0, limits.max_tasks - self.done)} of {limits.max_tasks} tasks left")
        if limits.max_cycles is not None:
            parts.append(f"cycle {self.cycle} of {limits.max_cycles}")
        return ", ".join(parts)

    def headline(self) -> str:
        rate = "-" if self.pass_rate is None else f"{self.pass_rate:.0%}"
        return (
            f"{self.done} done · {self.outcomes['pass']} passed · {self.judged - self.outcomes['pass']} failed"
            f" · pass rate {rate} · {self.calls} calls ({self.calls_per_minute():.1f}/min)"
        )

    def signs(self) -> str:
        """What the night has shown beyond pass and fail: revisions, mangled tool calls, over-iteration, restarts."""
        fixed = sum(self.revised.values())
        return (
            f"{len(self.revised)} revised ({fixed} passed on revision) · {self.mangled_calls} mangled tool calls"
            f" · {self.outcomes['call_cap']} over-iterating (call cap) · {self.restarts} server restarts"
        )

    def current_table(self, now: float) -> Table | Text:
        """The attempts running now: task, cycle, round, role of the call running, calls so far, elapsed."""
        current = sorted(self.in_flight(), key=lambda c: (c.started_at or now, c.attempt.task_id))
        if not current:
            return Text("in flight: none", style="dim")
        table = Table(box=None, pad_edge=False, title="in flight", title_justify="left", title_style="dim")
        for column in ("task", "cycle", "round", "role", "calls", "elapsed"):
            table.add_column(column, justify="left" if column in ("task", "role") else "right")
        for c in current:
            table.add_row(c.attempt.task_id, c.place, str(c.round or "-"), c.role or "-", str(c.calls),
                          span_text(now - c.started_at) if c.started_at else "-")
        return table

    def table(self) -> Table:
        """Counts by outcome, model-judged first."""
        table = Table(box=None, show_header=True, pad_edge=False)
        table.add_column("outcome")
        table.add_column("tasks", justify="right")
        for outcome, count in sorted(self.outcomes.items(), key=lambda kv: (kv[0] not in MODEL_OUTCOMES, -kv[1])):
            table.add_row(Text(outcome, style=OUTCOME_STYLE.get(outcome, "yellow")), str(count))
        return table

    def render(self) -> Group:
        now = time.time()
        cycle = "" if self.info.limits.max_cycles is not None else f" · cycle {self.cycle}"
        title = Text(f"soak run {self.info.run_id} · {self.state}{cycle} · {self.left()}", style="bold")
        return Group(title, Text(self.headline()), Text(self.signs()), self.table(), self.current_table(now))


class QuietLines(RowListener):
    """One line per finished attempt, for logs (`--quiet`, a detached run, output that is not a terminal)."""

    def __init__(self, stats: RunStats, console: Console):
        self.stats, self.console = stats, console

    def task(self, row: TaskRow) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(row.ended_at))
        calls = row.orchestrator_calls + row.coder_calls + row.agent_calls
        tests = f"{row.tests_passed}/{row.tests_total}" if row.tests_total else "-"
        repeat = f" repeat {row.repeat}" if row.repeat > 1 else ""
        self.console.print(
            f"{stamp} cycle {row.cycle}{repeat} {row.task_id} {row.outcome} {row.duration_s:.1f}s calls {calls}"
            f" tests {tests} | {self.stats.headline()}", markup=False, highlight=False, soft_wrap=True,
        )

    def event(self, row: EventRow) -> None:
        if (row.source == "runner" and row.kind not in ("run_end",)) or row.kind in STACK_EVENTS:
            self.console.print(f"{row.kind}: {row.detail}", markup=False, highlight=False, soft_wrap=True)


def live_view(stats: RunStats, console: Console) -> Live:
    """The rich view, redrawn twice a second from the running totals."""

    class Renderable:
        def __rich__(self) -> Group:
            return stats.render()

    return Live(Renderable(), console=console, refresh_per_second=2, transient=True)


def next_steps(stats: RunStats, folder: Path, reason: str) -> list[str]:
    """What to type next: the report and where its HTML goes; how to continue a run that was cut short."""
    from soak.report.render import default_output

    run_id = stats.info.run_id
    lines = [f"run folder: {folder}",
             f"next: soak report {run_id}   (the report goes to {default_output([folder]) / 'index.html'})"]
    redo = f", {stats.outcomes['cancelled']} cancelled attempts run again" if stats.outcomes["cancelled"] else ""
    if reason in ("signal", "error_budget", "disk_full"):
        lines.append(f"continue it: soak run --resume {run_id}   (finished attempts are kept{redo})")
    elif reason == "deadline" and redo:
        lines.append(f"continue it: soak run --resume {run_id} --hours N   (finished attempts are kept{redo})")
    return lines


def summary(stats: RunStats, reason: str, detail: str) -> Group:
    """The end of a run: why it ended, its figures; `next_steps` follow it, printed unwrapped."""
    ended = {
        "deadline": "completed: the deadline passed",
        "tasks": "completed: the task limit was reached",
        "cycles": "completed: every task ran",
        "error_budget": "stopped by the error budget",
        "disk_full": "stopped: no room on disk",
        "signal": "stopped by a signal",
    }[reason]
    active = stats.info.active_seconds
    lines: list[RenderableType] = [
        Text(f"run {stats.info.run_id} {ended}" + (f" ({detail})" if detail else ""), style="bold"),
        Text(stats.headline()),
        stats.table(),
        Text(stats.signs()),
        Text(f"{span_text(active)} running over {len(stats.info.sessions)} session(s)"),
    ]
    return Group(*lines)


def when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "-"


def status_view(stats: RunStats, state: str, folder: Path) -> Group:
    """`soak status`: the live view's figures, from the files."""
    info = stats.info
    last = info.sessions[-1] if info.sessions else None
    lines: list[RenderableType] = [
        Text(f"run {info.run_id}: {state}" + (f" ({last.reason})" if last and last.reason else ""), style="bold"),
        Text(f"started {when(info.started_at)}, {span_text(info.active_seconds)} running over "
             f"{len(info.sessions)} session(s); last heartbeat {when(last.last_seen_at if last else None)}"),
    ]
    if state == "running" and stats.left():
        lines.append(Text(stats.left()))
    lines += [Text(stats.headline()), stats.table()]
    if state == "running":
        lines.append(Text(f"in flight: {', '.join(sorted(info.in_flight)) or 'none'}", style="dim"))
    lines.append(Text(f"record: {folder}", style="dim"))
    return Group(*lines)


def runs_table(runs: list[tuple[RunStats, str]]) -> Table:
    """`soak runs`: one line per run, oldest first."""
    table = Table(box=None, pad_edge=False)
    for column in ("run", "started", "state", "tasks", "pass rate", "running"):
        table.add_column(column, justify="right" if column in ("tasks", "pass rate", "running") else "left")
    for stats, state in runs:
        rate = "-" if stats.pass_rate is None else f"{stats.pass_rate:.0%}"
        table.add_row(stats.info.run_id, when(stats.info.started_at), state, str(stats.done), rate,
                      span_text(stats.info.active_seconds))
    return table
