"""How many agents at once, against a server whose knee is known by construction: the sim's capacity scenario decodes
at most four requests at once, so a capacity sweep over 1, 2, 4, 6 and 8 agents must answer within one level of 4,
on two seeds, and its report must draw the curve and name the limiting signal. Each seed is a real `soak sweep` in
its own process, the sim restarted per level by the stack supervisor (about two minutes a seed on 2 cores)."""

import json
import shutil
import sys
import textwrap

import pytest

from soak.paths import builtin_tasks_dir
from soak.stack.servers import free_port
from tests.night.test_sweep import soak_command, sweep_json

LEVELS = [1, 2, 4, 6, 8]
KNEE = 4
"""The scenario's max_running."""
SMALL_TASKS = ["fizzbuzz-rules", "gcd-lcm", "slugify", "pascal-row", "luhn-checksum", "isbn-validate",
               "balanced-brackets", "word-frequency"]
"""Bank tasks whose tests take about a second, so the server, not the 2-core host, is what the agents share."""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_the_knee_of_a_server_that_decodes_four_at_once_is_found_within_one_level(tmp_path, seed):
    suite = tmp_path / "suite"
    for task in SMALL_TASKS:
        shutil.copytree(builtin_tasks_dir() / task, suite / task)
    port = free_port()
    up = (f"exec {sys.executable} -m soak.cli sim --port {port} --scenario capacity --seed {seed} "
          f"--suite dir:{suite}")
    base_url = f"http://127.0.0.1:{port}/v1"
    (tmp_path / "base.toml").write_text(textwrap.dedent(f"""
        [endpoints.default]
        base_url = "{base_url}"
        model = "soak-sim"
        [budgets]
        task_seconds = 15
        [stack]
        health_interval_seconds = 0.5
        servers = [{{name = "sim", up = "{up}", base_url = "{base_url}", start_timeout_seconds = 20}}]
        [sampling]
        interval_seconds = 1
        """))
    (tmp_path / "sweep.toml").write_text(textwrap.dedent(f"""
        base = "base.toml"
        suite = "dir:{suite}"
        canary_share = 0
        seed = {seed}
        concurrency = {LEVELS}
        tasks = {len(SMALL_TASKS)}
        """))
    data = tmp_path / "data"
    swept = soak_command("sweep", "sweep.toml", "--quiet", "--sweep-id", "cap", cwd=tmp_path, data=data, timeout=280)
    assert swept.returncode == 0, swept.stdout[-3000:] + swept.stderr[-3000:]
    assert sweep_json(data, "cap")["levels"] == LEVELS
    assert "run " in swept.stdout and " agents: " in swept.stdout

    reported = soak_command("report", "cap", cwd=tmp_path, data=data)
    assert reported.returncode == 0, reported.stderr
    capacity = json.loads((tmp_path / "reports" / "cap" / "summary.json").read_text())["capacity"]
    found = capacity["agents"]
    assert abs(LEVELS.index(found) - LEVELS.index(KNEE)) <= 1, capacity["answer"]
    rows = {row["agents"]: row for row in capacity["rows"]}
    assert rows[found]["knee"] and rows[found]["pass_rate"] == 1.0
    assert rows[KNEE]["solved_per_hour"] > 2 * rows[1]["solved_per_hour"], "four agents share the server well"
    assert rows[8]["pass_rate"] < rows[1]["interval"][0], "twice the slots breaks the pass rate beyond noise"
    assert rows[1]["queued_s"] == 0.0 and rows[8]["queued_s"] > 1.0, "the queue is read from the server's gauge"
    assert capacity["limit"] in ("queueing", "timeouts"), capacity["answer"]
    page = (tmp_path / "reports" / "cap" / "index.html").read_text()
    assert 'id="capacity"' in page and capacity["answer"].split(";")[0] in page
