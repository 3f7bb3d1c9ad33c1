"""`soak sweep`: configurations one after another on the same tasks, the recommendation and its reasons, resume,
bad input. The configurations' servers are real `soak sim` processes that the stack supervisor starts and stops."""

import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from soak.decisions.sweep import Standing, recommend
from soak.night.sweep import plan_sweep
from soak.record.read import load_run
from soak.record.schema import RunLimits
from soak.record.summary import wilson
from soak.record.sweeps import GateRecord
from soak.stack.servers import free_port
from tests.helpers import REPO, SMALL_SESSIONS

SOAK = [sys.executable, "-m", "soak.cli"]


def sim_configuration(name: str, tmp: Path, scenario: str, *, up: str | None = None) -> str:
    """A [[configurations]] entry whose stack is one `soak sim` with this scenario."""
    port = free_port()
    (tmp / f"{name}.toml").write_text(textwrap.dedent(scenario))
    base_url = f"http://127.0.0.1:{port}/v1"
    up = up or "exec " + shlex.join([*SOAK, "sim", "--port", str(port), "--scenario", str(tmp / f"{name}.toml")])
    return textwrap.dedent(f"""
        [[configurations]]
        name = "{name}"
        [configurations.overrides]
        endpoints.default = {{base_url = "{base_url}", model = "soak-sim", max_tokens = 8192}}
        stack.servers = [{{name = "sim", up = {json.dumps(up)}, base_url = "{base_url}", start_timeout_seconds = 20}}]
        stack.health_interval_seconds = 0.5
        sampling.interval_seconds = 1
        """)


CLEAN = """
    [timing]
    ttft_seconds = 0.01
    decode_tokens_per_second = 300
    tokens_per_chunk = 4
    """
MANGLING = """
    [timing]
    ttft_seconds = 0.01
    decode_tokens_per_second = 900
    tokens_per_chunk = 4
    [spec_decode]
    enabled = true
    [[faults]]
    kind = "name_absorbs_args"
    rate = 0.7
    roles = ["coder"]
    """


def write_sweep(tmp: Path, body: str, head: str = 'tasks = 6\ngates = ["prefix-twin"]\n') -> Path:
    path = tmp / "sweep.toml"
    path.write_text(head + body)
    return path


def soak_command(*args: str, cwd: Path, data: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "SOAK_DATA_DIR": str(data), "SOAK_REPORTS_DIR": str(cwd / "reports")}
    return subprocess.run([*SOAK, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def sweep_json(data: Path, sweep_id: str) -> dict:
    return json.loads((data / "sweeps" / sweep_id / "sweep.json").read_text())


# --- the recommendation, from figures ---------------------------------------------------------------------


def test_the_wilson_interval_holds_the_rate_and_narrows_with_trials():
    low, high = wilson(6, 6)
    assert low < 1.0 == high and low > 0.5
    assert wilson(0, 0) == (0.0, 1.0)
    narrow, wide = wilson(50, 100), wilson(5, 10)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]


def done(name: str, **figures) -> Standing:
    return Standing(name=name, run_id=f"s.{name}", status="done", **figures)


def test_a_faster_configuration_that_mangles_tool_calls_loses_with_that_reason():
    clean = done("clean", passes=10, attempts=12, tool_calls=40, mangled={}, decode_tps=300.0)
    spec = done("spec-ngram", passes=10, attempts=12, tool_calls=40, mangled={"mangled_name": 12}, decode_tps=560.0)
    verdict = recommend([clean, spec])
    assert verdict.choice == "clean"
    assert "30% of its tool calls mangled" in verdict.reasons["spec-ngram"]
    assert "1.87× the decode speed of clean" in verdict.reasons["spec-ngram"]
    assert "mangled_name 12" in verdict.reasons["spec-ngram"]


def test_within_noise_the_fastest_wins_and_a_clear_pass_rate_drop_loses():
    slow = done("slow", passes=9, attempts=12, tool_calls=30, decode_tps=100.0)
    fast = done("fast", passes=8, attempts=12, tool_calls=30, mangled={"bad_json": 1}, decode_tps=200.0)
    weak = done("weak", passes=1, attempts=12, tool_calls=30, decode_tps=400.0)
    verdict = recommend([slow, fast, weak])
    assert verdict.choice == "fast"
    assert verdict.reasons["slow"].startswith("slower: 100.0 tok/s")
    assert "beyond noise" in verdict.reasons["weak"] and "8%" in verdict.reasons["weak"]


def test_a_faster_configuration_whose_agent_claims_false_successes_or_cheats_loses_with_that_reason():
    honest = done("honest", passes=10, attempts=20, decode_tps=100.0,
                  dishonest={"false success": (1, 10), "cheating": (0, 10)})
    liar = done("liar", passes=10, attempts=20, decode_tps=300.0,
                dishonest={"false success": (9, 10), "cheating": (0, 10)})
    cheat = done("cheat", passes=11, attempts=20, decode_tps=500.0,
                 dishonest={"false success": (1, 10), "cheating": (9, 10)})
    verdict = recommend([honest, liar, cheat])
    assert verdict.choice == "honest"
    assert verdict.reasons["liar"].startswith("false success rate 9/10 90% is above honest's 1/10 10% beyond noise")
    assert verdict.reasons["cheat"].startswith("cheating rate 9/10 90% is above")
    table = "\n".join(verdict.lines([honest, liar, cheat]))
    assert "false success" in table and "9/10 90%" in table
    # Within noise (or not measured), honesty does not decide: the fastest wins.
    unmeasured = done("unmeasured", passes=10, attempts=20, decode_tps=900.0)
    assert recommend([honest, unmeasured]).choice == "unmeasured"


def test_failed_gates_and_a_stack_that_never_came_up_disqualify_and_none_left_means_no_recommendation():
    gate = GateRecord(name="prefix-twin", measured=0.0, threshold=0.5, unit="hit rate", passed=False)
    off = done("prefix-off", passes=3, attempts=3, decode_tps=900.0, gates=[gate])
    down = Standing(name="down", run_id="s.down", status="stack_down", detail="server sim not healthy after 20 s")
    verdict = recommend([off, down])
    assert verdict.choice is None
    assert verdict.reasons["prefix-off"] == "failed its gates: prefix-twin 0 hit rate (threshold >= 0.5)"
    assert "never came up (server sim not healthy" in verdict.reasons["down"]
    on = done("prefix-on", passes=3, attempts=3, decode_tps=800.0,
              gates=[gate.model_copy(update={"measured": 0.97, "passed": True})])
    assert recommend([off, on, down]).choice == "prefix-on"


# --- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "message"), [
    ('[[configurations]]\nname = "a"\n[[configurations]]\nname = "a"\n', "a given twice"),
    ('[[configurations]]\nname = "a"\noverrides = {seed = 3}\n', "seed belong to the whole sweep"),
    ('[[configurations]]\nname = "a"\noverrides = {canary_share = 0.5}\n', "canary_share belong to the whole sweep"),
    ('[[configurations]]\nname = "a"\noverrides = {budgets = {max_calls = "many"}}\n',
     "configuration a: budgets.max_calls"),
    ('[[configurations]]\nname = "a b"\n', "configurations.0.name"),
    ('[[configurations]]\nname = "a"\ntasks = 2\nminutes = 3\n', "tasks or minutes, not both"),
    ('repeat = 3\ntasks = 40\n[[configurations]]\nname = "a"\n',
     "tasks = 40 with repeat = 3 leaves some of a pass's 63 tasks (canaries included) with fewer than 3 tries (a "
     "task's tries are one pass over the suite apart), so pass^3 cannot rank: give tasks = 189, a suite of at most "
     "13 tasks, or minutes"),
    ('colour = "red"\n[[configurations]]\nname = "a"\n', "colour: Extra inputs are not permitted"),
    ('gates = ["prefix-replay"]\n[[configurations]]\nname = "a"\n', "gates.0"),
    ('[[configurations]]\nname = "a"\noverrides = {endpoints = {default = {base_url = "http://x/v1", model = "m"}},'
     ' roles = {coder = "nowhere"}}\n', "endpoint 'nowhere', which is not defined"),
])
def test_a_bad_sweep_file_is_one_line_exit_2_and_writes_nothing(tmp_path, data_dir, soak, body, message):
    path = tmp_path / "sweep.toml"
    path.write_text(body)
    result = soak("sweep", str(path))
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1, result.output
    assert not data_dir.exists()


def test_sweep_needs_a_file_or_a_sweep_to_resume(data_dir, soak):
    assert soak("sweep").exit_code == 2
    unknown = soak("sweep", "--resume", "nope")
    assert unknown.exit_code == 2 and "no sweep 'nope'" in unknown.output


# --- whole sweeps against soak sim -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_sweep_recommends_the_clean_stack_over_a_faster_one_that_mangles_tool_names(tmp_path):
    data = tmp_path / "data"
    body = (sim_configuration("clean", tmp_path, CLEAN) + sim_configuration("spec-ngram", tmp_path, MANGLING)
            + sim_configuration("no-server", tmp_path, CLEAN, up="exit 3"))
    result = soak_command("sweep", str(write_sweep(tmp_path, body)), "--sweep-id", "mangle", "--quiet",
                          cwd=tmp_path, data=data)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "recommendation: clean:" in result.stdout
    plan = sweep_json(data, "mangle")
    status = {c["name"]: c["status"] for c in plan["configurations"]}
    assert status == {"clean": "done", "spec-ngram": "done", "no-server": "stack_down"}

    # Every configuration saw the same tasks in the same order (shared suite and seed).
    orders = [load_run(data / f"mangle.{name}").tasks.sort_values("started_at")["task_id"].tolist()
              for name in ("clean", "spec-ngram")]
    assert len(orders[0]) == 6 and set(orders[0]) == set(orders[1])

    report = soak_command("report", "mangle", cwd=tmp_path, data=data)
    assert report.returncode == 0, report.stderr
    summary = json.loads((tmp_path / "reports" / "mangle" / "summary.json").read_text())["sweep"]
    rows = {row["name"]: row for row in summary["configurations"]}
    assert summary["recommendation"] == "clean"
    assert rows["spec-ngram"]["decode_tps"] > rows["clean"]["decode_tps"]  # the mangling one decodes faster
    reason = rows["spec-ngram"]["reason"]
    assert "of its tool calls mangled" in reason and "mangled_name" in reason
    assert rows["spec-ngram"]["spec"] and not rows["clean"]["spec"]  # acceptance per draft position, from /metrics
    assert all(g["passed"] for g in rows["clean"]["gates"]) and rows["clean"]["gates"][0]["name"] == "prefix-twin"
    assert "never came up (server sim exited with code 3 before it was healthy" in rows["no-server"]["reason"]
    html = (tmp_path / "reports" / "mangle" / "index.html").read_text()
    assert "Recommendation: clean" in html and "of its tool calls mangled" in html


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_configuration_failing_its_gates_exits_1(tmp_path):
    data = tmp_path / "data"
    no_cache = CLEAN + "[cache]\nenabled = false\n"
    path = write_sweep(tmp_path, sim_configuration("no-cache", tmp_path, no_cache),
                       head='tasks = 1\ngates = ["prefix-twin"]\n')
    result = soak_command("sweep", str(path), "--sweep-id", "gated", "--quiet", cwd=tmp_path, data=data)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "no recommendation" in result.stdout and "failed its gates: prefix-twin 0 hit rate" in result.stdout
    gates = json.loads((data / "gated.no-cache" / "gates.json").read_text())
    assert gates[0]["name"] == "prefix-twin" and gates[0]["measured"] == 0 and not gates[0]["passed"]


@retry(stop=stop_after_delay(240), wait=wait_fixed(0.2), retry=retry_if_result(lambda found: not found))
def rows_in(path: Path) -> bool:
    """True once the CSV holds a data row (an attempt of that configuration has finished)."""
    return path.is_file() and len(path.read_text().splitlines()) >= 2


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_sweep_stopped_mid_way_resumes_at_the_configuration_and_attempt_where_it_stopped(tmp_path):
    data = tmp_path / "data"
    slow = CLEAN.replace("ttft_seconds = 0.01", "ttft_seconds = 0.3")
    body = sim_configuration("first", tmp_path, CLEAN) + sim_configuration("second", tmp_path, slow)
    path = write_sweep(tmp_path, body, head="tasks = 8\n")
    env = {**os.environ, "SOAK_DATA_DIR": str(data)}
    sweep = subprocess.Popen([*SOAK, "sweep", str(path), "--sweep-id", "cut", "--quiet"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        rows_in(data / "cut.second" / "tasks.csv")
        sweep.send_signal(signal.SIGTERM)
        output, _ = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 130, output[-3000:]
    assert "soak sweep --resume cut" in output
    status = {c["name"]: c["status"] for c in sweep_json(data, "cut")["configurations"]}
    assert status == {"first": "done", "second": "running"}
    first = (data / "cut.first" / "tasks.csv").read_text()
    second_before = load_run(data / "cut.second").tasks
    finished = second_before[second_before["outcome"] != "cancelled"]
    assert 1 <= len(finished) < 8

    resumed = soak_command("sweep", "--resume", "cut", "--quiet", cwd=tmp_path, data=data)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert (data / "cut.first" / "tasks.csv").read_text() == first  # the finished configuration was not rerun
    after = load_run(data / "cut.second")
    assert len(after.tasks) == 8 and set(after.tasks["outcome"]) == {"pass"}  # each attempt once (latest row)
    kept = after.tasks.set_index(["task_id", "cycle"])
    for _, row in finished.iterrows():  # attempts finished before the stop were kept, not redone
        assert kept.loc[(row["task_id"], row["cycle"]), "started_at"] == row["started_at"]
    assert len(json.loads((data / "cut.second" / "run.json").read_text())["sessions"]) == 2
    assert {c["status"] for c in sweep_json(data, "cut")["configurations"]} == {"done"}


def test_the_docs_sweep_files_plan(tmp_path, data_dir):
    """The docs' sweep files (llama.cpp vs vLLM, spec decode on/off, two cache RAM sizes) are valid and resolve
    as they say."""
    pages = "".join((REPO / "docs" / "decide" / page).read_text() for page in ("sweep.md", "sessions.md"))
    blocks = re.findall(r'```toml title="sweep.toml"\n(base = .*?)```', pages, re.S)
    assert len(blocks) == 3
    (tmp_path / "soak.toml").write_text('[endpoints.default]\nbase_url = "http://127.0.0.1:8000/v1"\n'
                                        'model = "qwen3-coder"\n')
    planned, limits = [], []
    for number, block in enumerate(blocks):
        (tmp_path / f"sweep{number}.toml").write_text(block)
        info, configs = plan_sweep(tmp_path / f"sweep{number}.toml", f"readme{number}")
        planned.append({entry.name: config for entry, config in zip(info.configurations, configs, strict=True)})
        limits.append([entry.limits for entry in info.configurations])
    assert limits[0] == [RunLimits(max_tasks=189, repeats=3)] * 2
    engines, spec, cache_ram = planned
    assert engines["llama-server"].endpoints["default"].base_url == "http://127.0.0.1:8080/v1"
    assert engines["vllm"].stack.servers[0].up.startswith("vllm serve")
    assert "--speculative-config" in spec["spec-ngram"].stack.servers[0].up
    assert "--speculative-config" not in spec["spec-off"].stack.servers[0].up
    assert "--port 8000 --enable-auto-tool-choice" in spec["spec-off"].stack.servers[0].up
    assert "--cache-ram" not in cache_ram["cache-ram-8g"].stack.servers[0].up  # llama-server's default, 8 GiB
    assert cache_ram["cache-ram-32g"].endpoints["default"].base_url == "http://127.0.0.1:8080/v1"
    assert cache_ram["cache-ram-32g"].stack.servers[0].up.endswith("--cache-ram 32768")


@retry(stop=stop_after_delay(60), wait=wait_fixed(0.1), retry=retry_if_result(lambda pid: pid is None))
def server_started(events: Path) -> int | None:
    """The pid of the server soak started, once events.csv says it started it."""
    if not events.is_file():
        return None
    started = [line for line in events.read_text().splitlines() if ",server_start," in line]
    return int(started[0].rsplit("pid ", 1)[1].split(",")[0]) if started else None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_sweep_stopped_while_a_stack_starts_stops_that_stack_too(tmp_path):
    data = tmp_path / "data"
    body = sim_configuration("sleepy", tmp_path, CLEAN, up="exec sleep 300")
    env = {**os.environ, "SOAK_DATA_DIR": str(data)}
    sweep = subprocess.Popen([*SOAK, "sweep", str(write_sweep(tmp_path, body, head="tasks = 1\n")), "--sweep-id",
                              "early", "--quiet"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        server = psutil.Process(server_started(data / "early.sleepy" / "events.csv"))
        sweep.send_signal(signal.SIGTERM)
        output, _ = sweep.communicate(timeout=60)
    finally:
        sweep.kill()
    assert sweep.returncode == 130, output[-3000:]
    server.wait(timeout=30)  # the server soak had started is gone, not left running
    assert sweep_json(data, "early")["configurations"][0]["status"] == "running"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sweep_compares_two_cache_sizes_by_the_sessions_they_keep_warm(tmp_path):
    """Two sims that differ only in their prefix cache's capacity: the larger keeps 4 sessions warm, the smaller 2,
    and the report charts and tabulates both ramps."""
    data = tmp_path / "data"
    (tmp_path / "soak.toml").write_text(SMALL_SESSIONS)
    body = (sim_configuration("cache-small", tmp_path, CLEAN + "[cache]\ncapacity_blocks = 60\n")
            + sim_configuration("cache-large", tmp_path, CLEAN + "[cache]\ncapacity_blocks = 110\n"))
    path = write_sweep(tmp_path, body, head='base = "soak.toml"\ntasks = 1\ngates = ["sessions"]\n')
    result = soak_command("sweep", str(path), "--sweep-id", "cliff", "--quiet", cwd=tmp_path, data=data)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "recommendation: cache-large" in result.stdout
    assert "failed its gates: sessions 2 sessions (threshold >= 4)" in result.stdout
    report = soak_command("report", "cliff", cwd=tmp_path, data=data)
    assert report.returncode == 0, report.stderr
    summary = json.loads((tmp_path / "reports" / "cliff" / "summary.json").read_text())["sweep"]
    ramps = {c["name"]: [(level["sessions"], level["warm"]) for level in c["levels"]] for c in summary["sessions"]}
    assert ramps == {"cache-small": [(1, True), (2, True), (4, False)],
                     "cache-large": [(1, True), (2, True), (4, True), (8, False)]}
    html = (tmp_path / "reports" / "cliff" / "index.html").read_text()
    assert "Sessions until the cliff" in html and 'alt="cross-turn hit rate and TTFT p95' in html


def test_a_configuration_whose_night_degraded_is_not_recommended_however_fast():
    fast = done("fast", passes=9, attempts=10, decode_tps=900.0, held=False,
                course="degraded from 02:14: TTFT p95 1.2 s → 4.8 s")
    steady = done("steady", passes=9, attempts=10, decode_tps=600.0, held=True, course="held up for 8 h 00 min")
    verdict = recommend([fast, steady])
    assert verdict.choice == "steady"
    assert verdict.reasons["fast"] == "its night degraded from 02:14: TTFT p95 1.2 s → 4.8 s"


def tried(*groups: tuple[int, int, int]) -> dict[str, tuple[int, int]]:
    """Tasks t0, t1, ... as (how many, tries, passes) groups."""
    rows = [(tries, passes) for count, tries, passes in groups for _ in range(count)]
    return {f"t{number}": row for number, row in enumerate(rows)}


def test_a_configuration_that_gets_the_same_task_right_less_often_loses_on_pass_hat_k():
    """Equal pass rates within noise; three tries of each of 20 tasks: `steady` passes 18 tasks every time, `coin`
    5 every time and 2 of 3 on the rest. Task by task its pass^3 is 13/20 = 65 % lower, [42 %, 88 %] by the
    t-interval (t 2.093, sd 0.489 over 20): the faster, less repeatable one loses, with pass^3 as its reason."""
    steady = done("steady", passes=80, attempts=100, decode_tps=600.0, tries=tried((18, 3, 3), (2, 3, 0)),
                  repeatability={1: (0.8, 0.7, 0.9), 2: (0.85, 0.75, 0.95), 3: (0.9, 0.8, 0.97)})
    coin = done("coin", passes=75, attempts=100, decode_tps=900.0, tries=tried((5, 3, 3), (15, 3, 2)),
                repeatability={1: (0.75, 0.65, 0.85), 2: (0.4, 0.3, 0.5), 3: (0.2, 0.1, 0.3), 4: (0.1, 0.0, 0.2)})
    verdict = recommend([coin, steady])
    assert verdict.choice == "steady" and "pass^3" in verdict.why
    assert verdict.reasons["coin"] == ("pass^3 20% [10%-30%] is below steady's 90% [80%-97%] beyond noise (65% lower "
                                       "[42%-88%] on the 20 tasks both tried): it gets the same task right less often")
    table = "\n".join(verdict.lines([coin, steady]))
    assert "pass^3 [95% CI]" in table and "90% [80%-97%]" in table
    once = done("once", passes=75, attempts=100, decode_tps=900.0, repeatability={1: (0.75, 0.65, 0.85)})
    assert recommend([once, steady]).choice == "once"  # tried once: nothing to say about repeats


def test_pass_hat_k_is_compared_task_by_task_on_the_tasks_both_tried():
    """Side by side their pass^3 intervals overlap, yet on the same 30 tasks `fast` never passes all three tries
    where `slow` fails and loses 8 of the 20 `slow` passes: beyond noise paired on the tasks. On tasks neither shares
    (or fewer than two), nothing is said."""
    slow = done("slow", passes=60, attempts=90, decode_tps=300.0, tries=tried((20, 3, 3), (10, 3, 0)),
                repeatability={3: (0.67, 0.48, 0.81)})
    fast = done("fast", passes=54, attempts=90, decode_tps=900.0, tries=tried((12, 3, 3), (8, 3, 2), (10, 3, 0)),
                repeatability={3: (0.40, 0.24, 0.58)})
    verdict = recommend([fast, slow])
    assert verdict.choice == "slow"
    assert "27% lower [10%-43%] on the 30 tasks both tried" in verdict.reasons["fast"]
    elsewhere = done("elsewhere", passes=54, attempts=90, decode_tps=900.0, repeatability={3: (0.40, 0.24, 0.58)},
                     tries={f"other{n}": (3, 3 * (n % 2)) for n in range(30)})
    assert recommend([elsewhere, slow]).choice == "elsewhere"


def test_with_each_figure_taken_among_those_still_standing_a_cycle_of_losses_still_leaves_a_recommendation():
    """`a` is below `b` on pass rate, `b` below `c` on pass^3, `c` mangles the tool calls `a` keeps clean: all against
    all, none would stand. Honesty, pass rate, pass^k, tool calls in turn, each best among those left: `c`."""
    a = done("a", passes=50, attempts=100, tool_calls=100, decode_tps=900.0, tries=tried((20, 3, 3)),
             repeatability={3: (1.0, 0.84, 1.0)})
    b = done("b", passes=90, attempts=100, tool_calls=100, decode_tps=600.0, tries=tried((20, 3, 2)),
             repeatability={3: (0.0, 0.0, 0.16)})
    c = done("c", passes=85, attempts=100, tool_calls=100, mangled={"mangled_name": 50}, decode_tps=300.0,
             tries=tried((20, 3, 3)), repeatability={3: (1.0, 0.84, 1.0)})
    verdict = recommend([a, b, c])
    assert verdict.choice == "c"
    assert verdict.reasons["a"].startswith("pass rate 50% ") and "below b's 90%" in verdict.reasons["a"]
    assert verdict.reasons["b"].startswith("pass^3 0% [0%-16%] is below c's 100%")


def test_the_cost_front_holds_the_configurations_no_other_beats_on_both_speed_and_energy_and_the_report_draws_it():
    """solved tasks per hour against joules per solved task: `quick` and `frugal` each win on one, `worse` loses on
    both to `quick`, `dark` measured no energy; the sweep's section draws the chart and marks the front."""
    from soak.decisions.sweep import cost_front
    from soak.report.build import sweep_view

    found = [done("quick", passes=9, attempts=10, solved_per_hour=30.0, joules_per_pass=60_000.0),
             done("frugal", passes=9, attempts=10, solved_per_hour=12.0, joules_per_pass=25_000.0),
             done("worse", passes=9, attempts=10, solved_per_hour=20.0, joules_per_pass=70_000.0),
             done("dark", passes=9, attempts=10, solved_per_hour=40.0)]
    assert cost_front(found) == {"quick", "frugal"}
    view = sweep_view(found, recommend(found), [], [])
    assert {r["name"]: r["front"] for r in view["rows"]} == {"quick": True, "frugal": True, "worse": False,
                                                            "dark": False}
    assert view["cost_chart"].startswith("data:image/png;base64,")
    assert sweep_view(found[3:], recommend(found[3:]), [], [])["cost_chart"] is None
    lines = recommend(found).lines(found)
    assert lines[0].split()[-2:] == ["kJ/solved", "gates"] and "60.0" in lines[1]
    assert lines[-1] == "cheapest per solved task for their speed (the Pareto front): frugal, quick"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_against_configurations_whose_right_answer_is_built_in_the_sweep_recommends_the_right_one():
    """bench/sweep_truth.py's real sweep on one seed (its 20 are in BENCHMARKS.md; one holds the bench to them at
    half the CI time of two): the slow, steady, clean stack that gets the same tasks right every try wins; the
    degrading one loses on its night, the dead one on its stack, the coin and the mangler each on a reason of their
    own."""
    bench = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location(
        "sweep_truth", REPO / "bench" / "sweep_truth.py"))
    spec.loader.exec_module(bench)
    found = bench.sweep(1)
    assert found.choice == "right", found.output[-3000:]
    assert found.reasons["degrade"].startswith("its night degraded from"), found.reasons
    assert found.reasons["coin"] and found.reasons["mangle"] and "never came up" in found.reasons["down"]
