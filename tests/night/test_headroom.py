"""A night against the sim with a stall before a first byte and one mid-stream: its headline's longest waits are the
maxima of calls.csv, beside the stale budget; and what an agent's own watchdog is in a night, as run.json keeps it."""

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.config import SoakConfig
from soak.night.plan import agent_host
from soak.report.headroom import seconds_text
from soak.sim.scenario import Fault, Scenario, Timing
from soak.sim.server import SimServer
from tests.helpers import EXERCISM_SUITE

FIRST_BYTE_STALL, GAP_STALL = 1.5, 0.8
"""Seconds the sim stays silent before the first byte of its second reply, and in the middle of its third."""


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("headroom")
    scenario = Scenario(timing=Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8), faults=[
        Fault(kind="stall", at_requests=[2], where="first_byte", seconds=FIRST_BYTE_STALL),
        Fault(kind="stall", at_requests=[3], where="mid", seconds=GAP_STALL),
    ])
    with SimServer(scenario, seed=3, suite=EXERCISM_SUITE) as sim:
        (home / "soak.toml").write_text(f'suite = "{EXERCISM_SUITE}"\n[budgets]\nstale_seconds = 30\n')
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SOAK_DATA_DIR", str(home / "data"))
            result = CliRunner().invoke(main, ["run", "--config", str(home / "soak.toml"), "--base-url", sim.base_url,
                                               "--model", "soak-sim", "--tasks", "2", "--quiet", "--run-id", "night"])
            assert result.exit_code == 0, result.output
            report = CliRunner().invoke(main, ["report", str(home / "data" / "night"), "--output",
                                               str(home / "report")])
            assert report.exit_code == 0, report.output
    return home


def test_the_headline_shows_the_longest_waits_of_calls_csv_beside_the_stale_budget(night):
    calls = pd.read_csv(night / "data" / "night" / "calls.csv", float_precision="round_trip")
    summary = json.loads((night / "report" / "summary.json").read_text())["runs"][0]
    headroom = summary["headroom"]
    slowest = calls.loc[calls["first_byte_s"].idxmax()]
    assert headroom["first_byte"]["seconds"] == calls["first_byte_s"].max() >= FIRST_BYTE_STALL
    assert (headroom["first_byte"]["task_id"], headroom["first_byte"]["call_index"]) == (slowest["task_id"],
                                                                                        slowest["call_index"])
    # The chunk before a stall may reach the client later than the one after it left the sim: a gap a little short.
    assert headroom["gap"]["seconds"] == calls["max_gap_s"].max() > GAP_STALL / 2
    assert (headroom["stale_budget"], headroom["agent_watchdog"], headroom["stalled"]) == (30, None, 0)
    line = (f"longest wait for a first byte: {seconds_text(calls['first_byte_s'].max())} of the 30 s stale budget "
            f"({slowest['task_id']} cycle {slowest['cycle']}, call {slowest['call_index']}, {slowest['role']})")
    assert line in summary["verdicts"]
    page = (night / "report" / "index.html").read_text()
    assert (f"<b>{seconds_text(calls['first_byte_s'].max())}</b><span>longest wait for a first byte of the 30 s "
            "stale budget</span>") in page
    assert summary["reprefilled"]["count"] is not None  # the sim reports cached tokens, as vLLM can


@pytest.mark.parametrize(("agent", "configured", "watchdog"), [
    ("hermes", None, 900.0),  # against a local endpoint (the proxy on 127.0.0.1), not its 180 s
    ("hermes", 120.0, 120.0),
    ("aider", 200.0, 200.0),  # its --timeout
    ("mini-swe-agent", 200.0, None),  # no watchdog soak could set or knows
    ("python3 agent.py {prompt_file}", 50.0, None),
])
def test_an_agent_nights_run_json_keeps_the_agents_own_watchdog(agent, configured, watchdog):
    config = SoakConfig(mode="agent", agent={"name": agent, "stale_seconds": configured, "uncontained": True})
    host = agent_host(config)
    assert host.agent_stale_seconds == watchdog and host.agent_name == agent.split()[0]
