import asyncio
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from soak.cli import main
from soak.config import SoakConfig, with_cli_endpoint
from soak.decisions.doctor import diagnose_all
from soak.paths import PACKAGE_DIR
from soak.sandbox.jail import isolation_kind
from soak.sim.scenario import Cache, Fault, Reasoning
from soak.stack.servers import free_port


def findings_of(url: str) -> dict[str, tuple[str, bool, str, bool]]:
    config = with_cli_endpoint(SoakConfig(), url, "soak-sim")
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
    hidden = ["hidden"] if kind != "session" else []
    assert list(jail) == ["isolation", "reads", *hidden, "writes", "network", "run records"]
    assert jail["isolation"]["result"] == kind and jail["isolation"]["ok"] == (kind != "session")
    if kind != "session":
        reads = jail["reads"]["result"]
        assert str(Path(sys.prefix).resolve()) in reads and str(PACKAGE_DIR) not in reads
        assert str(PACKAGE_DIR) in jail["hidden"]["result"]
        assert jail["run records"]["result"].startswith("protected") and jail["network"]["result"].startswith("none")
    # The unshare fallback builds the same root; only a plain session leaves the run records unprotected.
    monkeypatch.setattr("soak.decisions.doctor.isolation_kind", lambda: "unshare")
    fallback = {f["check"]: f for f in json.loads(doctor_cli(url, "--json").output)["jail"]}
    assert fallback["run records"]["result"].startswith("protected") and fallback["isolation"]["ok"]
    assert fallback["writes"]["result"].startswith("as nobody")
    monkeypatch.setattr("soak.decisions.doctor.isolation_kind", lambda: "session")
    fallback = {f["check"]: f for f in json.loads(doctor_cli(url, "--json").output)["jail"]}
    assert fallback["run records"]["result"].startswith("not protected") and not fallback["run records"]["ok"]
    assert "install bubblewrap" in fallback["isolation"]["advice"]
    table = doctor_cli(url)
    assert "the jail of agents and test runs" in table.output and "run records" in table.output
