"""The sim's batch, as the capacity scenario needs it: each request running beside others is slower, and a request
that finds the KV cache full of running prompts is preempted (counted, and its prefill paid again)."""

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from soak.sim.scenario import Scenario
from soak.sim.server import SimServer
from tests.helpers import wait_until
from tests.sim.test_server import metric_samples

LABELS = (("engine", "0"), ("model_name", "soak-sim"))


@pytest.fixture
def sim():
    servers: list[SimServer] = []

    def start(**fields: Any) -> SimServer:
        server = SimServer(Scenario.model_validate(fields))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def ask(server: SimServer, words: int = 10) -> float:
    """One plain chat request; its time to the first streamed byte, measured here."""
    client = openai.OpenAI(base_url=server.base_url, api_key="sim", max_retries=0, timeout=20)
    start = time.monotonic()
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * words}],
                                            stream=True, max_tokens=4)
    first = None
    for _ in stream:
        first = first or time.monotonic() - start
    assert first is not None
    return first


def test_a_request_beside_a_running_one_is_slowed_by_its_share(sim):
    stall = {"kind": "stall", "at_requests": [1], "seconds": 3.0, "where": "first_byte"}
    server = sim(timing={"ttft_seconds": 0.3, "decode_tokens_per_second": 0, "slowdown_per_running": 1.0},
                 faults=[stall])
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(ask, server)
        wait_until(lambda: metric_samples(server)[("vllm:num_requests_running", LABELS)] == 1, timeout=5,
                   what="the stalled request running")
        beside = ask(server)
        assert held.result() >= 3.0
    alone = ask(server)
    assert 0.6 <= beside < 1.5 and 0.3 <= alone < 0.6


def test_a_prompt_that_overfills_the_kv_cache_is_preempted_and_prefills_twice(sim):
    server = sim(timing={"ttft_seconds": 0, "decode_tokens_per_second": 0, "prefill_tokens_per_second": 1000},
                 cache={"block_tokens": 16, "capacity_blocks": 20, "enabled": False})
    small, large = ask(server, 100), ask(server, 400)
    assert server.stats.preemptions == 1
    assert metric_samples(server)[("vllm:num_preemptions_total", LABELS)] == 1
    assert small < 0.3 and large >= 0.8  # about 400 prompt tokens at 1000/s, twice

