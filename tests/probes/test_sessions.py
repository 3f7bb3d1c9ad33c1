"""The sessions gate against the simulator, whose prefix cache evicts least recently used blocks beyond its
capacity: a known capacity sets a known cliff, and the sim's own record of each request is the ground truth."""

import asyncio
import json
from collections import Counter

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.config import Endpoint, Gates
from soak.llm.client import ChatEndpoint
from soak.probes.probe import GateResult, Probe
from soak.probes.sessions import gate_sessions
from soak.record.sweeps import GateRecord
from soak.sim.scenario import Cache, Scenario, Timing, load_scenario
from soak.sim.server import SimServer
from tests.helpers import EXERCISM_SUITE, SMALL_SESSIONS


def gate(*args: str):
    return CliRunner().invoke(main, ["gate", *args])


def sessions_gate(url: str, tmp_path, *extra: str) -> tuple[object, GateRecord]:
    config = tmp_path / "soak.toml"
    config.write_text(SMALL_SESSIONS)
    out = tmp_path / "gates.json"
    result = gate("sessions", "--config", str(config), "--base-url", url, "--model", "m", "-o", str(out), *extra)
    assert result.exit_code in (0, 1), result.output
    (record,) = json.loads(out.read_text())["gates"]
    return result, GateRecord.model_validate(record)


@pytest.mark.parametrize(("capacity", "cliff"), [(60, 2), (110, 4)])
def test_the_probe_finds_the_cliff_the_cache_capacity_sets(fast_sim, tmp_path, capacity, cliff):
    server, url = fast_sim(cache=Cache(capacity_blocks=capacity))
    result, record = sessions_gate(url, tmp_path)
    assert record.measured == cliff, result.output
    assert record.passed == (cliff >= 4) and result.exit_code == (0 if cliff >= 4 else 1)
    assert f"falls off at {cliff * 2}" in record.detail
    assert [level.sessions for level in record.levels] == [n for n in (1, 2, 4, 8) if n <= cliff * 2]
    for level in record.levels:
        later = [t for t in level.turns if t.turn > 1]
        assert len(level.turns) == 3 * level.sessions and level.source == "usage"
        rates = [t.cross_turn_hits / t.history_tokens for t in later]
        if level.sessions <= cliff:
            # Warm: every later turn got all its history's whole blocks back (the last partial block is recomputed).
            assert level.warm and min(rates) > 0.9 and level.full_price_turns == 0
        else:
            # Round-robin past the capacity: once the sessions outgrow it, a session's blocks are the oldest when its
            # turn comes, so at least a round's worth of turns re-prefill their whole history.
            assert not level.warm and level.coldest_session == 0 and level.full_price_turns >= level.sessions
        assert level.shared_hit_rate > 0.9  # the shared system prompt stays cached at every level
    # The sim's own record of every request it served is the ground truth of what each turn found cached.
    served = Counter((r.prompt_tokens, r.cached_tokens) for r in server.stats.records)
    probed = Counter((t.prompt_tokens, t.cached_tokens) for level in record.levels for t in level.turns)
    assert not probed - served
    assert sum(served.values()) == sum(probed.values()) + len(record.levels) + 1  # + system prompts + calibration
    # Printed per level, with the cliff where the table says NO.
    table = result.output.splitlines()[1:]
    assert "cross-turn hit" in table[0] and table[-1].split()[0] == str(cliff * 2) and table[-1].endswith("NO")


def test_without_per_request_counts_the_metrics_counters_find_the_same_cliff(fast_sim, tmp_path):
    _, url = fast_sim(cache=Cache(capacity_blocks=110, prompt_tokens_details=False))
    _, record = sessions_gate(url, tmp_path)
    assert record.measured == 4
    warm, cold = record.levels[-2], record.levels[-1]
    assert warm.source == cold.source == "metrics" and all(t.cached_tokens is None for t in warm.turns)
    assert warm.cross_turn_hit_rate > 0.9 and cold.cross_turn_hit_rate < 0.1
    assert warm.full_price_turns is None and warm.coldest_session is None  # per turn, the counters cannot tell


def test_without_a_prefix_cache_not_even_one_session_stays_warm(fast_sim, tmp_path):
    _, url = fast_sim(cache=Cache(enabled=False))
    result, record = sessions_gate(url, tmp_path)
    assert result.exit_code == 1 and "FAIL  sessions       0 sessions" in result.output
    (level,) = record.levels
    assert level.cross_turn_hit_rate == 0 and level.shared_hit_rate == 0 and level.full_price_turns == 2
    assert "falls off at 1: cross-turn hit 0%, 2 turn(s) re-prefilled their history" in record.detail


def test_a_slow_first_token_makes_a_level_cold_even_with_every_token_cached(tmp_path):
    """The sim waits at least ttft_seconds before each first token, so TTFT p95 cannot be under it."""
    server = SimServer(Scenario(timing=Timing(ttft_seconds=0.3, decode_tokens_per_second=0)), suite=EXERCISM_SUITE)
    url = server.start()
    gates = Gates.model_validate({**Gates().model_dump(), "sessions_ramp": [1, 2], "session_turns": 2,
                                  "session_system_tokens": 50, "session_start_tokens": 50, "session_turn_tokens": 50,
                                  "session_think_seconds": 0, "session_max_ttft_p95_seconds": 0.25})

    async def probe() -> GateResult:
        chat = ChatEndpoint("sim", Endpoint(base_url=url, model="m"), 60)
        try:
            return await gate_sessions(Probe(chat, url.removesuffix("/v1") + "/metrics"), gates)
        finally:
            await chat.close()

    try:
        result = asyncio.run(probe())
    finally:
        server.stop()
    (level,) = result.levels
    assert level.cross_turn_hit_rate > 0.5 and level.ttft_p95_s >= 0.3 and not level.warm
    assert result.measured == 0 and "TTFT p95 0.3" in result.detail


def test_the_sessions_are_not_held_back_by_the_endpoints_own_call_limit(tmp_path):
    """One call at a time is this endpoint's setting; the gate measures the server's queue, so its four sessions go
    out together (each holds the sim for at least its 0.2 s TTFT, so they overlap there)."""
    server = SimServer(Scenario(timing=Timing(ttft_seconds=0.2, decode_tokens_per_second=0)), suite=EXERCISM_SUITE)
    url = server.start()
    (tmp_path / "soak.toml").write_text(f'[endpoints.default]\nbase_url = "{url}"\nmodel = "m"\n'
                                        "max_concurrent_calls = 1\n" + SMALL_SESSIONS)
    try:
        result = gate("sessions", "--config", str(tmp_path / "soak.toml"), "--ramp", "1,4", "--turns", "2")
    finally:
        server.stop()
    assert "sessions" in result.output and server.stats.most_running > 1, result.output


@pytest.mark.parametrize(("args", "message"), [
    (["sessions", "--ramp", "1,two"], "--ramp takes session counts joined by commas"),
    (["sessions", "--ramp", "4,2"], "needs growing session counts from 1 up"),
    (["sessions", "--turns", "1"], "--ramp/--turns"),
    (["prefill", "--ramp", "1,2"], "--ramp and --turns shape the sessions gate"),
])
def test_a_bad_ramp_is_one_line_and_exit_2(args, message):
    result = gate(*args, "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.slow  # the default session sizes: about a minute
def test_the_shipped_sessions_scenario_has_its_cliff_at_four_with_the_default_probe(tmp_path):
    server = SimServer(load_scenario("sessions"), suite=EXERCISM_SUITE)
    url = server.start()
    try:
        out = tmp_path / "gates.json"
        result = gate("sessions", "--base-url", url, "--model", "m", "-o", str(out))
    finally:
        server.stop()
    (record,) = json.loads(out.read_text())["gates"]
    assert result.exit_code == 0 and record["measured"] == 4, result.output
    cold = record["levels"][-1]
    assert cold["sessions"] == 8 and not cold["warm"] and cold["full_price_turns"] > 0
    # Re-prefilling costs TTFT at the scenario's prefill rate: the cold level's slowest turns wait seconds.
    assert cold["ttft_p95_s"] > 2 * record["levels"][0]["ttft_p95_s"]
