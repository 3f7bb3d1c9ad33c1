"""The sim's `[drift]`: TTFT, the coder's pass chances and resident memory change at set times since the server
started. Tests move the server's clock (`SimServer.started`, the Planner's `elapsed`) instead of waiting."""

import random
import shutil
import time
from typing import Any

import httpx2
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from soak.llm.tools import CODER_TOOLS
from soak.paths import builtin_tasks_dir
from soak.sim.reply import REVISION, Planner
from soak.sim.scenario import Drift, Scenario, load_scenario
from soak.sim.server import SimServer
from soak.tasks.suites import load_builtin

TASK = [{"role": "user", "content": "Task id: word-frequency\nWrite `solution.py` for the task."}]
FIX = [{"role": "user", "content": f"Task id: word-frequency\n{REVISION}. Fix `solution.py`; the error was: E"}]
RSS = "process_resident_memory_bytes"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One task the simulated coder knows, so these tests do not move with the task bank."""
    root = tmp_path_factory.mktemp("suite")
    shutil.copytree(builtin_tasks_dir() / "word-frequency", root / "word-frequency")
    return f"dir:{root}"


def scenario(drift: dict[str, Any], **sections: Any) -> Scenario:
    zero = {"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0}}
    return Scenario.model_validate(zero | sections | {"drift": drift})


@pytest.fixture
def serve(suite: str):
    servers: list[SimServer] = []

    def start(scn: Scenario, **kwargs: Any) -> SimServer:
        sim = SimServer(scn, suite=suite, **kwargs)
        sim.start()
        servers.append(sim)
        return sim

    yield start
    for sim in servers:
        sim.stop()


def at(sim: SimServer, seconds: float) -> None:
    """Move the server's night to `seconds` since its start."""
    sim.started = time.monotonic() - seconds


def ask(sim: SimServer, messages: list[dict[str, Any]] = TASK) -> Any:
    client = openai.OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0, timeout=20)
    return client.chat.completions.create(model="m", messages=messages, tools=CODER_TOOLS)


def samples(sim: SimServer) -> dict[str, list[tuple[dict, float]]]:
    text = httpx2.get(sim.base_url.removesuffix("/v1") + "/metrics").text
    found: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


# --- the scenario section ----------------------------------------------------------------------


def test_drift_defaults_change_nothing() -> None:
    drift = Drift()
    assert [drift.ttft(t) for t in (0, 1e6)] == [drift.passing(t) for t in (0, 1e6)] == [1.0, 1.0]
    assert drift.rss(1e6) == 0


def test_drift_factors_hold_from_their_times() -> None:
    drift = Drift(ttft_factor=4, ttft_from_s=120, pass_factor=0.5, pass_from_s=150, rss_bytes=100,
                  rss_growth_bytes_per_s=2, rss_from_s=120)
    assert (drift.ttft(119.9), drift.ttft(120), drift.ttft(500)) == (1.0, 4.0, 4.0)
    assert (drift.passing(149.9), drift.passing(150)) == (1.0, 0.5)
    assert (drift.rss(0), drift.rss(120), drift.rss(130)) == (100, 100, 120)


def test_degrade_and_steady_are_one_stack_with_and_without_drift() -> None:
    degrade, steady = load_scenario("degrade"), load_scenario("steady")
    drift = degrade.drift
    assert (drift.ttft_factor, drift.ttft_from_s, drift.pass_factor, drift.pass_from_s) == (4, 120, 0.5, 150)
    assert (drift.rss_bytes, drift.rss_growth_bytes_per_s, drift.rss_from_s) == (2 * 1024**3, 10_000_000, 120)
    assert max(drift.ttft_from_s, drift.pass_from_s, drift.rss_from_s) < 300  # inside a five-minute night
    assert steady.drift == Drift()
    same = {"name", "description", "drift"}
    assert degrade.model_dump(exclude=same) == steady.model_dump(exclude=same)
    assert degrade.description and steady.description


# --- TTFT --------------------------------------------------------------------------------------


def test_ttft_is_scaled_from_its_time_before_the_prefill_cost(serve) -> None:
    timing = {"ttft_seconds": 0.05, "decode_tokens_per_second": 0, "prefill_tokens_per_second": 100_000}
    sim = serve(scenario({"ttft_factor": 4, "ttft_from_s": 100}, timing=timing), engine="llama-server")

    def prompt_ms(messages: list[dict[str, Any]]) -> tuple[float, float]:
        timings = ask(sim, messages).model_extra["timings"]
        return timings["prompt_ms"], timings["prompt_n"] / 100_000 * 1000

    at(sim, 10)
    planned, prefill = prompt_ms(TASK)
    assert planned == pytest.approx(50 + prefill)
    at(sim, 100)
    planned, prefill = prompt_ms(FIX)
    assert prefill > 0 and planned == pytest.approx(200 + prefill)
    record = sim.stats.records[-1]
    assert record.first_byte is not None and record.first_byte - record.received >= 0.2


def test_server_clock_starts_with_the_server_and_can_be_set(suite: str) -> None:
    sim = SimServer(scenario({}), suite=suite)
    assert sim.started is None and sim.elapsed() == 0
    sim.started = time.monotonic() - 1000
    with sim:
        assert sim.elapsed() >= 1000  # start() keeps a clock set before it
    fresh = SimServer(scenario({}), suite=suite)
    before = time.monotonic()
    with fresh:
        assert fresh.started is not None and fresh.started >= before


# --- the coder's pass chances ------------------------------------------------------------------


def test_first_writes_turn_broken_after_pass_from_s(serve) -> None:
    drift = {"pass_factor": 0.0, "pass_from_s": 100}
    sim = serve(scenario(drift, coder={"p_correct": 1.0, "p_fix": 1.0}))
    at(sim, 50)
    for _ in range(5):
        ask(sim)
    at(sim, 100)
    for _ in range(5):
        ask(sim)
        ask(sim, FIX)
    writes = [r for r in sim.stats.records if r.kind == "write"]
    assert [r.correct for r in writes] == [True] * 5 + [False] * 10


def test_pass_factor_scales_p_correct_and_p_fix() -> None:
    task = next(t for t in load_builtin() if t.id == "word-frequency")
    clock = [0.0]
    sections = {"coder": {"p_correct": 0.8, "p_fix": 0.6}, "drift": {"pass_factor": 0.5, "pass_from_s": 150}}
    planner = Planner(Scenario.model_validate(sections), [task], seed=0, engine="vllm", elapsed=lambda: clock[0])
    rng = random.Random(7)

    def rate(messages: list[dict[str, Any]]) -> float:
        body = {"messages": messages, "tools": CODER_TOOLS}
        return sum(bool(planner.plan(body, rng, [], 100_000).correct) for _ in range(2000)) / 2000

    assert rate(TASK) == pytest.approx(0.8, abs=0.04) and rate(FIX) == pytest.approx(0.6, abs=0.04)
    clock[0] = 150
    assert rate(TASK) == pytest.approx(0.4, abs=0.04) and rate(FIX) == pytest.approx(0.3, abs=0.04)


# --- resident memory on /metrics -------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm", "llama-server"])
def test_metrics_serve_growing_resident_memory(serve, engine: str) -> None:
    drift = {"rss_bytes": 2_000_000, "rss_growth_bytes_per_s": 1000, "rss_from_s": 50}
    sim = serve(scenario(drift), engine=engine)
    at(sim, 10)
    assert samples(sim)[RSS] == [({}, 2_000_000)]
    at(sim, 150)
    [(labels, value)] = samples(sim)[RSS]
    grown = sim.elapsed() - 50  # the clock runs on while the scrape is served
    assert labels == {} and 2_100_000 <= value <= 2_000_000 + 1000 * grown


@pytest.mark.parametrize("engine", ["vllm", "llama-server"])
def test_metrics_serve_no_resident_memory_without_rss_bytes(serve, engine: str) -> None:
    sim = serve(scenario({"ttft_factor": 2}), engine=engine)
    at(sim, 1000)
    found = samples(sim)
    assert found and RSS not in found
