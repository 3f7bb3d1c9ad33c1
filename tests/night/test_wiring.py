"""Whole nights through the real CLI: self-healing of a crashing server, and the routing round trip."""

import sys
from pathlib import Path

import pandas as pd
import pytest

from soak.decisions.routing import load_routing
from soak.stack.servers import EMBEDDED_SERVER, free_port
from tests.helpers import EXERCISM_SUITE, supervised_sim, wait_until

SUITE = EXERCISM_SUITE



@pytest.mark.slow
def test_crashing_server_is_restarted_by_its_up_command_and_the_night_goes_on(tmp_path, data_dir, soak):
    # The crash scenario exits on its 3rd request; the state file keeps the count across restarts: it dies once.
    config = supervised_sim(tmp_path, f"--scenario crash --state {tmp_path / 'sim-state.json'}")
    result = soak("run", "--config", str(config), "--tasks", "4", "--quiet", "--run-id", "heal")
    assert result.exit_code == 0, result.output
    run = data_dir / "heal"
    events = pd.read_csv(run / "events.csv")
    kinds = list(events["kind"])
    assert kinds.index("down") < kinds.index("restart") < kinds.index("up")
    restarted_at = events.loc[events["kind"] == "up", "at"].iloc[0]
    tasks = pd.read_csv(run / "tasks.csv")
    assert len(tasks) == 4
    assert (tasks.loc[tasks["started_at"] > restarted_at, "outcome"] == "pass").any()
    samples = pd.read_csv(run / "samples.csv")
    served = samples[(samples["source"] == "server:sim") & (samples["metric"] == "vllm:prompt_tokens_total")]
    assert (served["at"] > restarted_at).any() and served["value"].max() > 0  # telemetry followed the new process
    assert (run / "logs" / "sim.log").read_text().strip()


@pytest.mark.slow
def test_routing_round_trip(tmp_path, data_dir, soak):
    scenario = tmp_path / "night.toml"
    scenario.write_text("""
[timing]
ttft_seconds = 0
decode_tokens_per_second = 0
tokens_per_chunk = 8
[orchestrator]
overiterate_tasks = ["two-fer"]
""")
    from soak.sim.server import SimServer, load_scenario

    with SimServer(load_scenario(scenario), seed=1, suite=SUITE) as sim:
        url = sim.start()
        first = soak("run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE, "--tasks", "6", "--quiet",
                     "--run-id", "night-1")
        assert first.exit_code == 0, first.output
        routing = tmp_path / "routing.toml"
        routed = soak("route", "night-1", "-o", str(routing))
        assert routed.exit_code == 0, routed.output
        routes = load_routing(routing).tasks
        assert routes["two-fer"].action == "cap" and "leap-year" not in routes
        second = soak("run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE, "--tasks", "4", "--quiet",
                      "--run-id", "night-2", "--routing", str(routing))
        assert second.exit_code == 0, second.output
    tasks = pd.read_csv(data_dir / "night-2" / "tasks.csv", keep_default_na=False)
    two_fer = tasks[tasks["task_id"] == "two-fer"]
    assert not two_fer.empty and set(two_fer["route"]) == {f"cap:{routes['two-fer'].max_calls}"}
    assert (two_fer["orchestrator_calls"] + two_fer["coder_calls"] <= routes["two-fer"].max_calls).all()
    assert set(tasks.loc[tasks["task_id"] == "leap-year", "route"]) == {""}


@pytest.mark.slow
def test_try_with_no_endpoint_starts_and_stops_the_embedded_default(data_dir, soak):
    import contextlib

    import psutil

    def embedded_servers() -> set[int]:
        """This test's own embedded llama.cpp server processes: soak try runs in-process, so they are its descendants
        (servers other test runs on the host start are not counted)."""
        found = set()
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if EMBEDDED_SERVER in child.cmdline():
                    found.add(child.pid)
        return found

    before = embedded_servers()
    config = data_dir.parent / "try.toml"  # the server's start and stop are under test, not the tiny model's solving
    config.write_text("[budgets]\ntask_seconds = 60\nmax_rounds = 1\n")
    result = soak("try", "--task", "word-frequency", "--suite", "builtin", "--config", str(config))
    assert result.exit_code in (0, 1), result.output
    assert "server_ready embedded" in result.output and "server_stop embedded" in result.output
    assert "SmolLM2-135M-Instruct" in result.output and "tests_total" in result.output
    assert embedded_servers() <= before  # nothing left running
    assert list((data_dir / "try").glob("word-frequency-*/transcript.jsonl"))


@pytest.mark.slow
def test_metrics_port_serves_the_night_while_it_runs(tmp_path, data_dir):
    import os
    import subprocess

    import httpx2
    from prometheus_client.parser import text_string_to_metric_families

    from soak.sim.scenario import Scenario, Timing
    from soak.sim.server import SimServer

    port = free_port()
    with SimServer(Scenario(timing=Timing(ttft_seconds=0.2, decode_tokens_per_second=0)), suite=SUITE) as sim:
        url = sim.start()
        soak_bin = Path(sys.executable).with_name("soak")
        run = subprocess.Popen([str(soak_bin), "run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE,
                                "--tasks", "8", "--quiet", "--metrics-port", str(port)],
                               env={**os.environ, "SOAK_DATA_DIR": str(data_dir)}, stdout=subprocess.DEVNULL)

        def finished() -> float:
            text = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                       if s.name == "soak_tasks_total")

        try:
            # Scraped mid-run: the exporter counts what the run has recorded so far.
            wait_until(finished, timeout=60, interval=0.1, what="a finished task at /metrics", process=run,
                       ignoring=(httpx2.HTTPError,))
            assert run.wait(timeout=60) == 0
        finally:
            run.kill()


def test_each_attempt_page_shows_the_limits_that_attempt_ran_under(tmp_path, data_dir, soak):
    """A task capped by the routing file, one given more time by it and one with a budget of its own: each page and
    row shows its own limit, not the night's defaults (600 s, 24 calls)."""
    import shutil

    from soak.paths import builtin_tasks_dir
    from soak.sim.scenario import Scenario, Timing
    from soak.sim.server import SimServer

    bank = tmp_path / "bank"
    for task_id in ("gcd-lcm", "fizzbuzz-rules", "slugify"):
        shutil.copytree(builtin_tasks_dir() / task_id, bank / task_id)
    with (bank / "slugify" / "task.toml").open("a") as toml:
        toml.write("budget_seconds = 77\n")
    routing = tmp_path / "routing.toml"
    routing.write_text('[tasks.gcd-lcm]\naction = "cap"\nmax_calls = 5\n\n'
                       '[tasks.fizzbuzz-rules]\naction = "extend"\nbudget_seconds = 900\n')
    timing = Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8)
    with SimServer(Scenario(timing=timing), seed=3) as sim:  # its coder knows the bank's tasks
        ran = soak("run", "--base-url", sim.start(), "--model", "soak-sim", "--suite", f"dir:{bank}", "--tasks", "3",
                   "--quiet", "--run-id", "limits", "--routing", str(routing))
    assert ran.exit_code == 0, ran.output
    tasks = pd.read_csv(data_dir / "limits" / "tasks.csv").set_index("task_id")
    assert tasks.loc["gcd-lcm", ["limit_seconds", "limit_calls"]].tolist() == [600, 5]
    assert tasks.loc["fizzbuzz-rules", ["limit_seconds", "limit_calls"]].tolist() == [900, 24]
    assert tasks.loc["slugify", ["limit_seconds", "limit_calls"]].tolist() == [77, 24]
    assert soak("report", "limits").exit_code == 0
    pages = {task_id: next((tmp_path / "reports").rglob(f"attempts/limits/{task_id}/1.html")).read_text()
             for task_id in tasks.index}
    assert "its limits (routed: cap:5): wall 600 s · calls 5" in pages["gcd-lcm"]
    assert "its limits (routed: extend:900): wall 900 s · calls 24" in pages["fizzbuzz-rules"]
    assert "its limits: wall 77 s · calls 24" in pages["slugify"]
