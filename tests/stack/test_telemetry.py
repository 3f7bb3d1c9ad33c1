import asyncio
import subprocess
import sys
import time

import httpx2
import psutil
import pytest

from soak.stack.servers import free_port
from soak.stack.telemetry import Monitor, Sampler, ServerMetricsSource, default_samplers, parse_server_metrics
from tests.helpers import FIXTURES, wait_until

VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1131.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 100.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 94.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 78.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="m"} 40.0
"""

LLAMACPP_TEXT = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 18292
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 514.037
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
"""


def test_parse_vllm_keeps_series_sums_engines_and_maps_old_names():
    parsed = {(m, labels): v for m, v, labels in parse_server_metrics(VLLM_TEXT)}
    assert parsed[("vllm:num_requests_running", "")] == 2.0
    assert parsed[("vllm:prefix_cache_queries_total", "")] == 1231.0
    assert parsed[("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=0")] == 94.0
    assert parsed[("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=1")] == 78.0
    assert parsed[("vllm:kv_cache_usage_perc", "")] == 0.25
    assert not any("created" in m or "time_to_first" in m for m, _ in parsed)


REAL_LLAMA_SERVER = FIXTURES / "llama-server-b11434.metrics"
"""A scrape of llama.cpp build 11434 after two identical 32-token prompts (the second one 31 tokens cached)."""


def sample_names(text: str) -> set[str]:
    return {line.split()[0].split("{")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_real_llama_server_scrape_keeps_the_cache_and_speculation_counters():
    parsed = {metric: value for metric, value, _ in parse_server_metrics(REAL_LLAMA_SERVER.read_text())}
    # prompt_tokens_total counts evaluated tokens only; with the cached ones it makes the 64 prompt tokens sent.
    assert parsed["llamacpp:prompt_tokens_total"] + parsed["llamacpp:prompt_tokens_cached_total"] == 64
    assert {"llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_draft_tokens_total",
            "llamacpp:spec_decode_num_accepted_tokens_total", "llamacpp:tokens_predicted_seconds_total"} <= set(parsed)
    assert "llamacpp:prompt_tokens_seconds" not in parsed  # a per-scrape gauge


def test_sim_exposes_the_series_a_real_llama_server_does(fast_sim):
    _, url = fast_sim(engine="llama-server")
    simulated = httpx2.get(url.removesuffix("/v1") + "/metrics").text
    assert sample_names(simulated) == sample_names(REAL_LLAMA_SERVER.read_text())


def test_parse_llamacpp_keeps_counters_not_per_scrape_gauges():
    parsed = {m: v for m, v, _ in parse_server_metrics(LLAMACPP_TEXT)}
    assert parsed == {"llamacpp:prompt_tokens_total": 18292.0, "llamacpp:requests_processing": 1.0}


def test_failing_sampler_does_not_blank_the_others():
    rows = []

    def broken():
        raise RuntimeError("nvidia-smi fell over")

    samplers = [Sampler("gpu", broken), *default_samplers(lambda: {}, [], [])]
    asyncio.run(Monitor("run", samplers, rows.append, interval=1).sample_once())
    errors = [r for r in rows if r.error]
    assert len(errors) == 1 and errors[0].source == "gpu" and "fell over" in errors[0].error
    metrics = {(r.source, r.metric) for r in rows if not r.error}
    assert {("host", "mem_available_bytes"), ("harness", "rss_bytes")} <= metrics


@pytest.fixture
def static_http(tmp_path):
    """A real loopback HTTP server serving files from tmp_path."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: httpx2.get(f"http://127.0.0.1:{port}/"), timeout=10, what="the static HTTP server",
               process=proc, ignoring=(httpx2.HTTPError,))
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def test_server_metrics_scraped_and_missing_endpoint_noted_once(tmp_path, static_http):
    (tmp_path / "metrics").write_text(VLLM_TEXT)
    notes, rows = [], []
    present = ServerMetricsSource("vllm", f"{static_http}/metrics", notes.append)
    absent = ServerMetricsSource("llama", f"{static_http}/nothing-here", notes.append)
    samplers = [Sampler("server:vllm", present.read, is_async=True), Sampler("server:llama", absent.read, True)]
    monitor = Monitor("run", samplers, rows.append, interval=1)
    for _ in range(3):
        asyncio.run(monitor.sample_once())
    scraped = [r for r in rows if r.source == "server:vllm" and r.metric == "vllm:prefix_cache_queries_total"]
    assert [r.value for r in scraped] == [1231.0] * 3
    assert len(notes) == 1 and "llama has no /metrics" in notes[0]
    assert not [r for r in rows if r.error]


def test_metrics_scraped_from_the_sim_equal_what_it_served(fast_sim):
    import openai

    sim, url = fast_sim()
    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    for n in range(4):
        client.chat.completions.create(model="soak-sim", messages=[{"role": "user", "content": f"hello {n} " * 40}],
                                       max_tokens=20)
    source = ServerMetricsSource("sim", url.removesuffix("/v1") + "/metrics", note=lambda text: None)
    scraped = {metric: value for _, metric, value, labels in asyncio.run(source.read()) if not labels}
    stats = sim.stats
    assert scraped["vllm:prompt_tokens_total"] == stats.prompt_tokens > 0
    assert scraped["vllm:generation_tokens_total"] == stats.completion_tokens > 0
    assert scraped["vllm:prefix_cache_hits_total"] == stats.cached_tokens


def test_harness_tree_leaves_out_servers_and_cpu_spans_the_interval():
    import subprocess
    import sys

    from soak.stack.telemetry import ProcessTrees, sample_processes

    # Each child says when it is ready; the busy one (e.g. a sandboxed test run) burns 0.5 s of its own CPU time
    # when told to, then waits: the harness's CPU over the interval must hold those 0.5 s, however loaded the host.
    server = subprocess.Popen([sys.executable, "-c", "import sys; x = bytearray(300_000_000); print('ready', "
                               "flush=True); sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    busy = subprocess.Popen([sys.executable, "-c", "import sys, time\nprint('ready', flush=True)\n"
                             "sys.stdin.readline()\nstart = time.process_time()\n"
                             "while time.process_time() - start < 0.5: pass\n"
                             "print('burned', flush=True)\nsys.stdin.readline()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == b"ready\n" and busy.stdout.readline() == "ready\n"
        trees = ProcessTrees()
        started = time.monotonic()
        sample_processes(trees, lambda: {"vllm": server.pid})
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline() == "burned\n"
        readings = {(source, metric): value for source, metric, value, _ in
                    sample_processes(trees, lambda: {"vllm": server.pid})}
        interval = time.monotonic() - started
        me = psutil.Process()
        ours = sum(p.memory_info().rss for p in [me, *me.children(recursive=True)] if p.pid != server.pid)
    finally:
        server.kill()
        busy.kill()
        server.wait()
        busy.wait()
    assert readings[("server:vllm", "rss_bytes")] > 250e6
    # The harness tree is this process and its children but the server: not the server's 300 MB, however big
    # pytest itself has grown.
    assert abs(readings[("harness", "rss_bytes")] - ours) < 100e6
    # psutil's percent is CPU seconds over its own interval, which lies inside `interval`: the busy child's 0.5 s
    # count only if the harness tree holds it and the same handle spans both samples (a fresh one reads 0).
    assert readings[("harness", "cpu_percent")] / 100 * interval >= 0.45
