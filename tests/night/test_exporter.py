import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from soak.night.exporter import RunExporter
from soak.record.schema import CallRow, EventRow, SampleRow, TaskRow
from soak.stack.servers import free_port


def task(outcome: str) -> TaskRow:
    return TaskRow(run_id="r", cycle=0, task_id="t", suite="builtin", started_at=0, ended_at=1, duration_s=42,
                   outcome=outcome)


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = httpx2.get(f"http://127.0.0.1:{port}/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_exporter_serves_what_the_run_recorded():
    exporter, port = RunExporter("night-1"), free_port()
    exporter.serve(port)
    try:
        for outcome in ("pass", "pass", "fail", "infra_error"):
            exporter.task(task(outcome))
        exporter.call(CallRow(run_id="r", task_id="t", cycle=0, call_index=0, role="coder", endpoint="e", model="m",
                              stream=True, started_at=0, duration_s=1, ttft_s=0.3, integrity="mangled_name"))
        exporter.event(EventRow(run_id="r", at=0, kind="server_ready", source="vllm"))
        exporter.event(EventRow(run_id="r", at=1, kind="down", source="vllm"))
        exporter.sample(SampleRow(run_id="r", at=0, source="host", metric="mem_available_bytes", value=1e9))
        metrics = scrape(port)
    finally:
        exporter.close()
    assert metrics[("soak_tasks_total", (("outcome", "pass"),))] == 2
    assert metrics[("soak_tasks_total", (("outcome", "infra_error"),))] == 1
    assert metrics[("soak_pass_rate", ())] == 2 / 3  # infra errors count against the stack, not the model
    assert metrics[("soak_calls_total", (("integrity", "mangled_name"), ("role", "coder"), ("status", "ok")))] == 1
    assert metrics[("soak_server_up", (("server", "vllm"),))] == 0
    assert metrics[("soak_host_mem_available_bytes", ())] == 1e9
    assert metrics[("soak_run_info", (("run_id", "night-1"),))] == 1


def test_exporter_serves_the_current_window_of_the_night_as_the_report_cuts_it():
    """An hour's night: 5-minute windows, as the report's course cuts it. The current window is the latest any record
    started in; its figures count only what started there (canaries apart), a late row of an earlier window does
    not move them."""
    exporter, port = RunExporter("night-1", started_at=1000.0, planned_seconds=3600), free_port()
    exporter.serve(port)

    def attempt(at: float, outcome: str, canary: str = "") -> TaskRow:
        return TaskRow(run_id="r", cycle=0, task_id="t", suite="builtin", started_at=1000 + at, ended_at=1000 + at + 5,
                       duration_s=5, outcome=outcome, canary=canary)

    def call(at: float, ttft: float | None, status: str = "ok") -> CallRow:
        return CallRow(run_id="r", task_id="t", cycle=0, call_index=0, role="coder", endpoint="e", model="m",
                       stream=True, started_at=1000 + at, duration_s=1, ttft_s=ttft, status=status)

    try:
        exporter.task(attempt(10, "pass"))
        for row in (attempt(310, "pass"), attempt(320, "fail"), attempt(330, "pass", canary="one-off"),
                    attempt(20, "fail")):
            exporter.task(row)
        for n in range(20):
            exporter.call(call(310 + n, 0.1 * (n + 1)))
        exporter.call(call(340, None, status="http_5xx"))
        exporter.call(call(30, 9.0))
        metrics = scrape(port)
    finally:
        exporter.close()
    assert metrics[("soak_window_start_seconds", ())] == 300
    assert metrics[("soak_window_attempts", ())] == 2 and metrics[("soak_window_pass_rate", ())] == 0.5
    assert metrics[("soak_window_ttft_p95_seconds", ())] == pytest.approx(1.905)  # numpy's p95 of 0.1 .. 2.0
    assert metrics[("soak_window_failed_calls", ())] == 1
