"""`soak run --metrics-port N`: the night itself as Prometheus metrics, for Grafana or curl."""

from collections import deque
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from soak.record.folder import RowListener
from soak.record.schema import MODEL_OUTCOMES, CallRow, EventRow, SampleRow, TaskRow

PASS_RATE_WINDOW = 50


class RunExporter(RowListener):
    """Fed by the recorder with every row it writes; serves the running totals on /metrics."""

    def __init__(self, run_id: str):
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

    def call(self, row: CallRow) -> None:
        self.calls.labels(row.role, row.status, row.integrity).inc()
        if row.ttft_s is not None:
            self.ttft.labels(row.role).observe(row.ttft_s)

    def event(self, row: EventRow) -> None:
        self.events.labels(row.kind).inc()
        if row.kind in ("server_ready", "up"):
            self.server_up.labels(row.source).set(1)
        elif row.kind == "down":
            self.server_up.labels(row.source).set(0)

    def sample(self, row: SampleRow) -> None:
        if row.source == "host" and row.metric == "mem_available_bytes" and row.value is not None:
            self.host_memory.set(row.value)
