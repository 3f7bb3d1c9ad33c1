"""`soak run --metrics-port N`: the night itself as Prometheus metrics, for Grafana or curl."""

import functools
import math
from collections import deque
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from soak.decisions.course import window_width
from soak.record.folder import RowListener
from soak.record.schema import MODEL_OUTCOMES, CallRow, EventRow, SampleRow, TaskRow

PASS_RATE_WINDOW = 50
UNPLANNED_WINDOW_SECONDS = 300.0
"""The window of a night without a planned length (a task count, one pass): five minutes."""


@dataclass
class Window:
    """What started in one window of the night and has finished so far."""

    attempts: int = 0
    passes: int = 0
    failed_calls: int = 0
    ttfts: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        return {"attempts": self.attempts, "pass_rate": self.passes / self.attempts if self.attempts else math.nan,
                "ttft_p95_seconds": float(np.percentile(self.ttfts, 95)) if self.ttfts else math.nan,
                "failed_calls": self.failed_calls}


class RunExporter(RowListener):
    """Fed by the recorder with every row it writes; serves the running totals on /metrics."""

    def __init__(self, run_id: str, started_at: float = 0.0, planned_seconds: float | None = None):
        self.registry = registry = CollectorRegistry()
        self.tasks = Counter("soak_tasks", "Finished task attempts by outcome.", ["outcome"], registry=registry)
        self.task_seconds = Histogram(
            "soak_task_duration_seconds", "Wall time of finished task attempts.",
            buckets=(5, 15, 30, 60, 120, 240, 420, 600, 900), registry=registry,
        )
        self.calls = Counter("soak_calls", "LLM calls by role, status and tool-call verdict.",
                             ["role", "status", "integrity"], registry=registry)
        self.ttft = Histogram("soak_call_ttft_seconds", "Time to first token of LLM calls.", ["role"],
                              buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 180), registry=registry)
        self.pass_rate = Gauge("soak_pass_rate", f"Pass rate over the last {PASS_RATE_WINDOW} model-judged tasks.",
                               registry=registry)
        self.host_memory = Gauge("soak_host_mem_available_bytes", "Last host MemAvailable sample.", registry=registry)
        self.server_up = Gauge("soak_server_up", "1 while a server is healthy, 0 while down.", ["server"],
                               registry=registry)
        self.events = Counter("soak_events", "Run and stack events by kind.", ["kind"], registry=registry)
        Gauge("soak_run_info", "The run this exporter describes.", ["run_id"], registry=registry).labels(run_id).set(1)
        self.recent: deque[bool] = deque(maxlen=PASS_RATE_WINDOW)
        self.server: WSGIServer | None = None
        self.start = started_at
        self.width = window_width(planned_seconds) if planned_seconds else UNPLANNED_WINDOW_SECONDS
        """The report's window for this night's planned length (soak.decisions.course), so the live figures are the
        ones the morning's course will show."""
        self.windows: dict[int, Window] = {}
        self.current = -1
        for name, doc in (
            ("start_seconds", "Start of the current window (the latest any finished attempt or call started in), in "
                              "seconds since the night's start."),
            ("attempts", "Model-judged ordinary attempts that started in the current window and have finished."),
            ("pass_rate", "Pass rate of those attempts."),
            ("ttft_p95_seconds", "TTFT p95 of the successful calls that started in the current window."),
            ("failed_calls", "Calls that started in the current window and failed."),
        ):  # Read when scraped, not on every row.
            Gauge(f"soak_window_{name}", doc, registry=registry).set_function(functools.partial(self.figure, name))

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        self.server, _ = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def task(self, row: TaskRow) -> None:
        self.tasks.labels(row.outcome).inc()
        self.task_seconds.observe(row.duration_s)
        if row.outcome in MODEL_OUTCOMES:
            self.recent.append(row.outcome == "pass")
            self.pass_rate.set(sum(self.recent) / len(self.recent))
            if not row.canary:
                window = self.window(row.started_at)
                window.attempts += 1
                window.passes += row.outcome == "pass"

    def call(self, row: CallRow) -> None:
        self.calls.labels(row.role, row.status, row.integrity).inc()
        if row.ttft_s is not None:
            self.ttft.labels(row.role).observe(row.ttft_s)
        window = self.window(row.started_at)
        if row.status != "ok":
            window.failed_calls += 1
        elif row.ttft_s is not None:
            window.ttfts.append(row.ttft_s)

    def window(self, started_at: float) -> Window:
        """The window a record belongs to (the one it started in); the latest seen becomes the current one, and
        windows before the one preceding it are dropped (late rows of those no longer show)."""
        index = max(0, int((started_at - self.start) // self.width))
        if index > self.current:
            self.current = index
            self.windows = {i: w for i, w in self.windows.items() if i >= index - 1}
        return self.windows.setdefault(index, Window())

    def figure(self, name: str) -> float:
        """One of the current window's figures, for its gauge."""
        if name == "start_seconds":
            return max(0, self.current) * self.width
        return self.windows.get(self.current, Window()).figures()[name]

    def event(self, row: EventRow) -> None:
        self.events.labels(row.kind).inc()
        if row.kind in ("server_ready", "up"):
            self.server_up.labels(row.source).set(1)
        elif row.kind == "down":
            self.server_up.labels(row.source).set(0)

    def sample(self, row: SampleRow) -> None:
        if row.source == "host" and row.metric == "mem_available_bytes" and row.value is not None:
            self.host_memory.set(row.value)
