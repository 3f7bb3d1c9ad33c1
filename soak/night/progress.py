"""What a person watching the night sees: running totals, the rich live view, quiet log lines, the summary."""

import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from soak.record.folder import RowListener
from soak.record.read import read_attempts, read_rows
from soak.record.schema import MODEL_OUTCOMES, CallRow, EventRow, RunInfo, TaskRow
from soak.record.summary import span_text

RATE_WINDOW_SECONDS = 300.0
OUTCOME_STYLE = {"pass": "green", "fail": "red", "infra_error": "magenta", "harness_error": "magenta",
                 "cancelled": "dim"}


class RunStats(RowListener):
    """Running totals of a run (all sessions), fed row by row: a RowListener of the run folder."""

    def __init__(self, info: RunInfo):
        self.info = info
        self.outcomes: Counter[str] = Counter()
        self.latest: dict[tuple[str, int], str] = {}
        """(task_id, cycle) -> the outcome that counts for that attempt."""
        self.calls = 0
        self.recent_calls: deque[float] = deque()
        self.in_flight: Callable[[], dict[str, float]] = lambda: dict.fromkeys(self.info.in_flight, 0.0)
        """`task/cycle` -> start time of the attempts running now; the runner plugs in its own (0 = unknown)."""
        self.cycle = 0
        self.state = "running"

    @classmethod
    def from_folder(cls, path: Path, info: RunInfo, with_calls: bool = True) -> "RunStats":
        """Totals so far from the CSVs (all sessions); `soak runs` skips the larger calls.csv."""
        stats = cls(info)
        for row in read_attempts(path / "tasks.csv"):
            stats.task(row)
        for row in read_rows(path / "calls.csv", CallRow) if with_calls else ():
            stats.call(row)
        return stats

    @property
    def deadline_at(self) -> float | None:
        """Wall-clock end of the current session: its start plus what the earlier ones left of the duration."""
        duration_seconds, sessions = self.info.limits.duration_seconds, self.info.sessions
        if duration_seconds is None or not sessions:
            return None
        return sessions[-1].started_at + max(0.0, duration_seconds - sum(s.active_seconds for s in sessions[:-1]))

    def task(self, row: TaskRow) -> None:
        """One attempt's row; a later row of the same (task_id, cycle), a retry's, supersedes the earlier one
        (soak.record.read.latest_attempts)."""
        key = (row.task_id, row.cycle)
        if (earlier := self.latest.get(key)) is not None:
            self.outcomes[earlier] -= 1
            if not self.outcomes[earlier]:
                del self.outcomes[earlier]
        self.latest[key] = row.outcome
        self.outcomes[row.outcome] += 1
        self.cycle = max(self.cycle, row.cycle)

    def call(self, row: CallRow) -> None:
        self.calls += 1
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

    @property
    def done(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome != "cancelled")

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
        if self.deadline_at is not None:
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
        title = Text(f"soak run {self.info.run_id} · {self.state} · cycle {self.cycle} · {self.left()}", style="bold")
        current = ", ".join(
            f"{key} {now - started:.0f}s" if started else key for key, started in sorted(self.in_flight().items())
        )
        return Group(title, Text(self.headline()), self.table(), Text(f"in flight: {current or 'none'}", style="dim"))


class QuietLines(RowListener):
    """One line per finished attempt, for logs (`--quiet`, a detached run, output that is not a terminal)."""

    def __init__(self, stats: RunStats, console: Console):
        self.stats, self.console = stats, console

    def task(self, row: TaskRow) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(row.ended_at))
        calls = row.orchestrator_calls + row.coder_calls + row.agent_calls
        tests = f"{row.tests_passed}/{row.tests_total}" if row.tests_total else "-"
        self.console.print(
            f"{stamp} cycle {row.cycle} {row.task_id} {row.outcome} {row.duration_s:.1f}s calls {calls}"
            f" tests {tests} | {self.stats.headline()}", markup=False, highlight=False, soft_wrap=True,
        )

    def event(self, row: EventRow) -> None:
        if row.source == "runner" and row.kind not in ("run_end",):
            self.console.print(f"{row.kind}: {row.detail}", markup=False, highlight=False, soft_wrap=True)


def live_view(stats: RunStats, console: Console) -> Live:
    """The rich view, redrawn twice a second from the running totals."""

    class Renderable:
        def __rich__(self) -> Group:
            return stats.render()

    return Live(Renderable(), console=console, refresh_per_second=2, transient=True)


def summary(stats: RunStats, folder: Path, reason: str, detail: str) -> Group:
    ended = {
        "deadline": "completed: the deadline passed",
        "tasks": "completed: the task limit was reached",
        "cycles": "completed: every task ran",
        "error_budget": "stopped by the error budget",
        "signal": "stopped by a signal",
    }[reason]
    active = stats.info.active_seconds
    lines = [
        Text(f"run {stats.info.run_id} {ended}" + (f" ({detail})" if detail else ""), style="bold"),
        Text(stats.headline()),
        stats.table(),
        Text(f"{span_text(active)} running over {len(stats.info.sessions)} session(s); record in {folder}"),
    ]
    return Group(*lines)


def when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "-"


def status_view(stats: RunStats, state: str, folder: Path) -> Group:
    """`soak status`: the live view's figures, from the files."""
    info = stats.info
    last = info.sessions[-1] if info.sessions else None
    lines = [
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
