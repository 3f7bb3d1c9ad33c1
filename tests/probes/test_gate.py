import json
from typing import get_args

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.record.identity import AttemptId
from soak.sim.scenario import Cache, Fault
from soak.stack.servers import free_port


def gate(*args: str):
    return CliRunner().invoke(main, ["gate", *args])


def test_prefill_measures_reported_prompt_tokens(fast_sim, tmp_path):
    server, url = fast_sim()
    out = tmp_path / "gates.json"
    result = gate("prefill", "--base-url", url, "--model", "m", "--tokens", "1500", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "PASS  prefill" in result.output
    (entry,) = json.loads(out.read_text())["gates"]
    assert entry["passed"] and entry["measured"] > 900
    # Sized from the server's own count: the three probes' sizes are what the sim served, within one word.
    probe_sizes = [r.prompt_tokens for r in server.stats.records][1:]
    assert len(probe_sizes) == 3 and all(abs(size - 1500) < 60 for size in probe_sizes)
    strict = gate("prefill", "--base-url", url, "--model", "m", "--tokens", "500", "--threshold", "1e12")
    assert strict.exit_code == 1 and "FAIL  prefill" in strict.output


def test_prefix_twin_reads_counter_deltas(fast_sim):
    _, cached = fast_sim()
    result = gate("prefix-twin", "--base-url", cached, "--model", "m")
    assert result.exit_code == 0 and "PASS  prefix-twin" in result.output
    _, uncached = fast_sim(cache=Cache(enabled=False))
    result = gate("prefix-twin", "--base-url", uncached, "--model", "m")
    assert result.exit_code == 1 and "FAIL  prefix-twin    0 hit rate" in result.output


def test_prefix_twin_on_llama_server_counts_cached_beside_evaluated_tokens(fast_sim, tmp_path):
    server, url = fast_sim(engine="llama-server")
    out = tmp_path / "gates.json"
    result = gate("prefix-twin", "--base-url", url, "--model", "m", "-o", str(out))
    assert result.exit_code == 0 and "PASS  prefix-twin" in result.output, result.output
    (entry,) = json.loads(out.read_text())["gates"]
    # hits / (cached + evaluated): the twin's repeat is all cache hits but its last partial block.
    stats = server.stats
    assert entry["detail"].endswith("over 1 repeat(s)") and 0.9 < entry["measured"] < 1
    assert stats.cached_tokens > 0


@pytest.mark.slow  # seconds, not milliseconds: the default set stays under 5 minutes on 2 cores; CI runs it
def test_unmeasurable_gates_fail_with_the_reason(fast_sim):
    _, url = fast_sim(max_model_len=4000)
    no_metrics = gate("prefix-twin", "--base-url", url, "--model", "m", "--metrics-url", url + "/nothing")
    assert no_metrics.exit_code == 1 and "cannot be measured: no prefix-cache counters" in no_metrics.output
    too_long = gate("long-prompt", "--base-url", url, "--model", "m", "--tokens", "10000")
    assert too_long.exit_code == 1 and "context_window" in too_long.output
    unreachable = gate("prefill", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m")
    assert unreachable.exit_code == 1 and "probe call failed (connection" in unreachable.output


def test_streams_without_usage_are_probed_unstreamed(fast_sim):
    """llama-cpp-python reports usage only outside streams: the gate says so and still measures."""
    _, url = fast_sim(faults=[Fault(kind="no_usage", rate=1.0)])
    result = gate("prefill", "--base-url", url, "--model", "m", "--tokens", "500")
    assert result.exit_code == 0 and "probed without streaming" in result.output


def test_prefix_replay_of_a_recorded_transcript(fast_sim, tmp_path):
    _, url = fast_sim()
    transcript = tmp_path / "transcript.jsonl"
    history = [{"role": "system", "content": "You are a careful engineer. " * 80},
               {"role": "user", "content": "Task id: word-frequency. Write solution.py."}]
    for turn in range(3):
        history += [{"role": "assistant", "content": f"Step {turn}: writing the file. " * 20},
                    {"role": "user", "content": f"The tests failed (round {turn}); fix it."}]
    transcript.write_text("\n".join(json.dumps(m) for m in history))
    result = gate("prefix-replay", "--base-url", url, "--model", "m", "--transcript", str(transcript))
    assert result.exit_code == 0 and "over 2 repeat(s)" in result.output
    transcript.write_text('{"content": "no role"}\n')
    bad = gate("prefix-replay", "--base-url", url, "--model", "m", "--transcript", str(transcript))
    assert bad.exit_code == 2 and "every line must be a chat message" in bad.output


def test_prefix_replay_replays_each_thread_of_a_soak_transcript(fast_sim, tmp_path):
    server, url = fast_sim()
    system = {"role": "system", "content": "You lead a coding task. " * 60}
    lines = [{**system, "thread": "orchestrator", "round": 1},
             {"role": "user", "content": "Task id: word-frequency", "thread": "orchestrator", "round": 1},
             {"role": "assistant", "content": None, "reasoning": "hmm", "thread": "orchestrator", "round": 1,
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "delegate", "arguments": "{\"instructions\": \"go\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "written", "thread": "orchestrator", "round": 1},
             {"role": "assistant", "content": "done", "thread": "orchestrator", "round": 1}]
    coder = [{"role": "system", "content": "You write files. " * 60}, {"role": "user", "content": "go"}]
    for n in range(3):
        # The first write's arguments were cut short: replay must still send a valid request.
        arguments = '{"path": "solution.py", "content"' if n == 0 else '{"path": "solution.py", "content": "x = 1"}'
        call = {"id": f"w{n}", "type": "function", "function": {"name": "write_file", "arguments": arguments}}
        coder += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"w{n}", "content": "error: not valid JSON" if n == 0 else "ok"}]
    lines += [{**m, "thread": "coder-1", "round": 1} for m in coder]
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text("\n".join(json.dumps(m) for m in lines))
    result = gate("prefix-replay", "--base-url", url, "--model", "m", "--transcript", str(transcript))
    assert result.exit_code == 0, result.output
    assert "over 3 repeat(s)" in result.output  # orchestrator turn 2, coder turns 2 and 3
    assert server.stats.requests == 5


def test_the_registry_names_the_gates_of_the_cli_and_the_sweep():
    from soak.night.sweep import GateName, SweepConfiguration
    from soak.probes.gate import GATES, SWEEP_GATES

    usage = " ".join(gate("--help").output.split())
    assert "{" + "|".join([*GATES, "all"]) + "}" in usage.replace("- ", "-")
    assert gate("nope").exit_code == 2
    assert tuple(name for name in GATES if name != "prefix-replay") == SWEEP_GATES == get_args(GateName)
    assert SweepConfiguration(name="a", gates=list(SWEEP_GATES)).gates == list(SWEEP_GATES)


def test_tokens_and_threshold_set_the_named_gates_own_settings_only(tmp_path):
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text('{"role": "user", "content": "hi"}\n')
    url = f"http://127.0.0.1:{free_port()}/v1"
    replay = gate("prefix-replay", "--base-url", url, "--model", "m", "--transcript", str(transcript),
                  "--tokens", "100")
    assert replay.exit_code == 2 and "drop --tokens" in replay.output
    every = gate("all", "--base-url", url, "--model", "m", "--threshold", "0.9")
    assert every.exit_code == 2 and "name the gate" in every.output


def test_gate_all_replays_the_newest_transcript_with_two_assistant_turns(tmp_path):
    import os

    from soak.probes.gate import latest_transcript
    from soak.record.layout import RunLayout

    turn = json.dumps({"role": "assistant", "content": "ok", "thread": "direct", "round": 1}) + "\n"
    found = {}
    for age, (run_id, turns) in enumerate([("new", 1), ("old", 2), ("older", 2)]):
        layout = RunLayout(tmp_path / run_id)
        layout.info.parent.mkdir(parents=True)
        layout.info.write_text("{}")
        found[run_id] = layout.attempt(AttemptId("t", 0)).transcript
        found[run_id].parent.mkdir(parents=True)
        found[run_id].write_text(turn * turns)
        os.utime(found[run_id], (1e9 - age, 1e9 - age))
    assert latest_transcript(tmp_path) == found["old"]
    assert latest_transcript(tmp_path / "nothing") is None
