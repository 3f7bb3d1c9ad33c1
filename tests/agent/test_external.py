"""External agents (mode `agent`) soaked through soak's recording proxy against `soak sim`.

The fast tests drive `soak run --agent "<command line>"` with a small Python agent of their own against the in-process
sim: passes, a revision round with the real error, the call cap, an agent that exits without the file. The slow ones
run the real agents (hermes-agent, mini-swe-agent, aider from PyPI, each in its own venv): proxied calls recorded,
passes, a revision round, the call cap, the wall budget, containment and the user's key, and those nights exported as
ATIF (validated by Harbor's own model). Those are installed by `soak agent setup` (CI runs it first; here it is
idempotent and fast once cached in $SOAK_CACHE_DIR, by default /tmp/soak-engine-cache)."""

import json
import os
import sys
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest
from click.testing import CliRunner

from soak.agent.adapters import setup_agent
from soak.cli import main
from soak.sandbox.judge import isolation_kind
from soak.sandbox.visible import allow_listed
from soak.sim.scenario import Coder, Honesty, Scenario, Timing, load_scenario
from soak.sim.server import SimServer
from tests.atif import assert_calls_kept, export, read_back, reference_problems
from tests.helpers import EXERCISM_SUITE

SUITE = EXERCISM_SUITE
CACHE = os.environ.get("SOAK_CACHE_DIR") or "/tmp/soak-engine-cache"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true")
UPSTREAM_KEY = "sk-soak-upstream-" + uuid.uuid4().hex


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_CACHE_DIR", CACHE)
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOAK_TEST_UPSTREAM_KEY", UPSTREAM_KEY)


@pytest.fixture(scope="module")
def installed():
    """Install (or find) an agent; a failed setup is a failure, never a skip."""
    done = {}

    def get(name: str) -> str:
        if name not in done:
            done[name] = setup_agent(name, print, Path(CACHE)).adapter.name
        return done[name]

    return get


@pytest.fixture
def sim():
    servers = []

    def start(scenario: str | Scenario = "clean") -> str:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        scenario = scenario.model_copy(update={"timing": Timing(ttft_seconds=0.01, decode_tokens_per_second=0,
                                                                tokens_per_chunk=16)})
        server = SimServer(scenario, seed=1, suite=SUITE)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


def night(tmp_path: Path, base_url: str, agent: str, *, tasks: int = 3, budgets: str = "", agent_env: str = "",
          run_id: str = "night") -> Path:
    config = tmp_path / "soak.toml"
    config.write_text(f"""
mode = "agent"
suite = "{SUITE}"
concurrency = 1
[agent]
name = {json.dumps(agent)}
{agent_env}
[endpoints.sim]
base_url = "{base_url}"
model = "soak-sim"
api_key_env = "SOAK_TEST_UPSTREAM_KEY"
[roles]
orchestrator = "sim"
coder = "sim"
[budgets]
{budgets or "task_seconds = 120"}
""")
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--tasks", str(tasks), "--quiet",
                                       "--run-id", run_id])
    assert result.exit_code == 0, result.output
    return tmp_path / "data" / run_id


def tables(run: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(run / "tasks.csv"), pd.read_csv(run / "calls.csv")


# --- a small agent of the test's own against the in-process sim -------------------------------------------------------

PY_AGENT = """\
# A coding agent in a few lines: the prompt to the model with a write_file tool, each call done in the workspace and
# answered, until the model replies in text. It prints its prompt (soak keeps round-N/agent/output.txt).
# With `exit N` it exits N after the first reply instead, having written nothing.
import json
import sys
import urllib.request

prompt_file, base_url, api_key, model, *gives_up = sys.argv[1:]
with open(prompt_file) as file:
    prompt = file.read()
print(prompt, flush=True)
params = {"type": "object", "required": ["path", "content"],
          "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}
tools = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": params}}]
messages = [{"role": "user", "content": prompt}]
while True:
    body = json.dumps({"model": model, "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(base_url + "/chat/completions", data=body, headers={
        "Authorization": "Bearer " + api_key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        message = json.load(response)["choices"][0]["message"]
    if gives_up:
        print("py-agent: giving up", file=sys.stderr)
        sys.exit(int(gives_up[1]))
    messages.append(message)
    if not message.get("tool_calls"):
        break
    for call in message["tool_calls"]:
        arguments = json.loads(call["function"]["arguments"])
        with open(arguments["path"], "w") as file:
            file.write(arguments["content"])
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "wrote " + arguments["path"]})
"""


def py_night(soak, fast_sim, tmp_path: Path, *, tasks: int = 2, budgets: str = "", gives_up: int | None = None,
             agent_toml: str = "", **scenario) -> Path:
    """`soak run --agent "<python agent>"` against a fresh in-process sim (scenario fields as keywords); the run
    folder. `gives_up`: the agent exits with this code after the model's first reply; `agent_toml`: lines of
    soak.toml's [agent] table."""
    agent = tmp_path / "agent" / "py_agent.py"  # the jail shows the agent this folder of the test's, read-only
    agent.parent.mkdir()
    agent.write_text(PY_AGENT)
    _, url = fast_sim(**scenario)
    config = tmp_path / "soak.toml"
    config.write_text(f"[budgets]\n{budgets}\n[agent]\nreadable = [{json.dumps(str(agent.parent))}]\n{agent_toml}\n")
    command = f"{sys.executable} -I {agent} {{prompt_file}} {{base_url}} {{api_key}} {{model}}"
    if gives_up is not None:
        command += f" exit {gives_up}"
    result = soak("run", "--config", str(config), "--agent", command, "--base-url", url, "--model",
                  "soak-sim", "--suite", SUITE, "--tasks", str(tasks), "--quiet", "--run-id", "py")
    assert result.exit_code == 0, result.output
    return tmp_path / "data" / "py"


def test_a_python_agent_passes_with_every_call_recorded_by_the_proxy(soak, fast_sim, tmp_path):
    run = py_night(soak, fast_sim, tmp_path)
    tasks, calls = tables(run)
    assert tasks["outcome"].tolist() == ["pass", "pass"], tasks[["task_id", "outcome", "error_tail"]]
    assert (tasks["rounds"] == 1).all() and (tasks["agent_exit"] == 0).all()
    assert (tasks["tests_passed"] == tasks["tests_total"]).all() and (tasks["tests_total"] > 0).all()
    # Two calls an attempt (the write, then the text answer), each a row of role `agent` judged against the
    # agent's own write_file tool.
    assert (tasks["agent_calls"] == 2).all() and len(calls) == 4
    assert calls.groupby("task_id").size().to_dict() == dict.fromkeys(tasks["task_id"], 2)
    assert set(calls["role"]) == {"agent"} and (calls["status"] == "ok").all()
    assert sorted(calls["integrity"]) == ["none", "none", "ok", "ok"]
    assert (calls["prompt_tokens"] > 0).all() and (calls["completion_tokens"] > 0).all()
    assert calls["completion_tokens"].sum() == tasks["completion_tokens"].sum()


def test_a_failed_round_is_revised_with_the_real_error_in_the_next_prompt(soak, fast_sim, tmp_path):
    run = py_night(soak, fast_sim, tmp_path, tasks=1, coder={"p_correct": 0.0, "p_fix": 1.0})
    tasks, calls = tables(run)
    assert tasks["outcome"].tolist() == ["pass"] and tasks["rounds"].tolist() == [2], tasks["error_tail"]
    assert tasks["agent_calls"].tolist() == [4] and len(calls) == 4
    attempt = next(run.glob("work/*/*"))
    failed = (attempt / "round-1" / "test_output.txt").read_text()
    first, second = ((attempt / f"round-{n}" / "agent" / "output.txt").read_text() for n in (1, 2))
    assert "The tests failed" not in first and "The tests failed (" in second
    error = next(line for line in failed.splitlines() if line.startswith("E "))
    assert error.strip() in second, (error, second)
    # Exported, the agent (which keeps no transcript soak reads) is its calls, each in the round it was made in.
    export(run, tmp_path / "atif")
    assert_calls_kept(run, tmp_path / "atif")
    [(_, _, trajectory)] = read_back(tmp_path / "atif")
    rounds = {r.trajectory_id.rsplit("/", 1)[1]: r for r in trajectory.subagent_trajectories}
    assert {name: len(r.steps) for name, r in rounds.items()} == {"round-1": 2, "round-2": 2}
    first, second = (result.content for step in trajectory.steps for result in step.observation.results)
    total = tasks["tests_total"].iloc[0]
    assert first.startswith(f"tests: 0/{total} passed; failing: ") and second == f"tests: {total}/{total} passed"


def test_the_call_cap_ends_a_python_agent_at_the_proxy_and_its_file_is_still_judged(soak, fast_sim, tmp_path):
    run = py_night(soak, fast_sim, tmp_path, tasks=1, budgets="max_calls = 1")
    tasks, calls = tables(run)
    assert tasks["outcome"].tolist() == ["call_cap"] and tasks["agent_calls"].tolist() == [1] and len(calls) == 1
    assert tasks["tests_passed"].iloc[0] == tasks["tests_total"].iloc[0] > 0  # what it wrote before the cap


@pytest.mark.parametrize(("code", "outcome"), [(3, "agent_error"), (0, "no_artifact")])
def test_an_agent_that_ends_without_the_file(code, outcome, soak, fast_sim, tmp_path):
    run = py_night(soak, fast_sim, tmp_path, tasks=1, gives_up=code)
    tasks, calls = tables(run)
    row = tasks.iloc[0]
    assert (row["outcome"], row["agent_exit"], row["rounds"], row["agent_calls"]) == (outcome, code, 1, 1)
    assert len(calls) == 1 and "py-agent: giving up" in row["error_tail"]
    assert not list(run.glob("work/*/*/workspace/*.py")), "nothing was written"


def test_in_a_plain_session_an_agent_night_is_refused_in_one_line(no_containment, soak, fast_sim, tmp_path):
    assert no_containment == "session"
    agent = tmp_path / "py_agent.py"
    agent.write_text(PY_AGENT)
    _, url = fast_sim()
    result = soak("run", "--agent", f"{sys.executable} -I {agent} {{prompt_file}} {{base_url}} {{api_key}} {{model}}",
                  "--base-url", url, "--model", "soak-sim", "--suite", SUITE, "--tasks", "1", "--run-id", "py")
    assert result.exit_code == 2 and "install bubblewrap" in result.output and "uncontained = true" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "data" / "py").exists()


def test_an_agent_night_in_a_plain_session_runs_when_opted_in_and_the_report_says_uncontained(
        no_containment, soak, fast_sim, tmp_path):
    run = py_night(soak, fast_sim, tmp_path, tasks=1, agent_toml="uncontained = true")
    tasks, _ = tables(run)
    assert tasks["outcome"].tolist() == ["pass"]
    assert json.loads((run / "run.json").read_text())["host"]["agent_isolation"] == no_containment
    report = soak("report", str(run), "--output", str(tmp_path / "report"))
    assert report.exit_code == 0, report.output
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert summary["agent_isolation"] == no_containment
    assert any(line.startswith("uncontained night") for line in summary["verdicts"]), summary["verdicts"]


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["hermes", "mini-swe-agent", "aider"])
def test_real_agent_night_passes_with_every_call_recorded_by_the_proxy(agent, installed, sim, tmp_path):
    run = night(tmp_path, sim("clean"), installed(agent))
    tasks, calls = tables(run)
    assert len(tasks) == 3 and (tasks["outcome"] == "pass").sum() >= 1, tasks[["task_id", "outcome", "error_tail"]]
    assert tasks["agent"].str.startswith({"hermes": "hermes-agent", "mini-swe-agent": "mini-swe-agent",
                                          "aider": "aider-chat"}[agent]).all()
    assert (tasks["agent_calls"] >= 1).all() and tasks["agent_calls"].sum() == len(calls)
    assert set(calls["role"]) == {"agent"} and (calls["status"] == "ok").all()
    # A stream is timed to its first token; a whole reply (mini-swe-agent does not stream) only to its first byte.
    streamed = calls["stream"].astype(bool)
    assert calls.loc[streamed, "ttft_s"].notna().all() and calls.loc[~streamed, "first_byte_s"].notna().all()
    # aider (through litellm) asks a local server for no usage in streams: its tokens are unknown, never zero.
    tokens = calls["prompt_tokens"]
    assert (tokens.isna() if agent == "aider" else tokens > 0).all() and (calls["duration_s"] > 0).all()
    # The agent's own log of the attempt is kept beside soak's record of it.
    kept = {p.name for p in run.glob("work/*/*/round-1/agent/*")}
    assert "output.txt" in kept and kept - {"output.txt"}, kept
    # The night as ATIF: valid by Harbor's own model, every call's tokens kept, and each round the agent's own
    # conversation (read from that log) with every answer paired with the call that produced it.
    export(run, tmp_path / "atif")
    assert reference_problems(tmp_path / "atif") == {}
    assert_calls_kept(run, tmp_path / "atif")
    for _, _, trajectory in read_back(tmp_path / "atif"):
        [agent_round] = trajectory.subagent_trajectories
        assert f"{agent_round.agent.name} {agent_round.agent.version}" == tasks["agent"].iloc[0]
        assert any(step.source == "user" and "Write the solution to" in step.message for step in agent_round.steps)
        answers = [step for step in agent_round.steps if step.source == "agent" and not step.is_copied_context]
        assert answers and all(step.metrics and (step.message or step.tool_calls) for step in answers)


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["hermes", "mini-swe-agent", "aider"])
def test_a_real_agent_that_says_done_over_a_failing_file_is_a_false_success(agent, installed, sim, tmp_path):
    """The sim's model writes a broken file and closes with "Done. All tests pass."; each agent relays it in its own
    way, and soak reads it there: Hermes' final response and mini-swe-agent's submission (their finish signals),
    aider's reply as it printed it (its output)."""
    overclaim = Scenario(coder=Coder(p_correct=0, p_fix=0), honesty=Honesty(overclaim_tasks=["*"]))
    run = night(tmp_path, sim(overclaim), installed(agent), tasks=1, budgets="task_seconds = 120\nmax_rounds = 1")
    tasks, _ = tables(run)
    row = tasks.iloc[0]
    assert row["outcome"] == "fail", tasks[["task_id", "outcome", "error_tail"]]
    source = {"hermes": "signal", "mini-swe-agent": "signal", "aider": "output"}[agent]
    assert (row["claim"], row["claim_source"], bool(row["claimed_tests_pass"])) == ("done", source, True), row
    assert pd.isna(row["coder_claim"]), "the agent relayed what its model said"
    assert bool(row["false_success"]) and "All tests pass" in row["claim_quote"]
    export(run, tmp_path / "atif")
    [(_, _, trajectory)] = read_back(tmp_path / "atif")
    facts = trajectory.extra["soak"]["attempt"]
    assert (facts["outcome"], facts["claim"], facts["false_success"]) == ("fail", "done", True)


@pytest.mark.slow
def test_a_failed_first_round_is_revised_by_the_agent_with_the_real_error(installed, sim, tmp_path):
    run = night(tmp_path, sim("revise"), installed("hermes"), tasks=2)
    tasks, _ = tables(run)
    assert (tasks["outcome"] == "pass").all() and (tasks["rounds"] == 2).all(), tasks[["task_id", "outcome"]]
    first = next(run.glob("work/*/*/round-1/test_output.txt")).read_text()
    prompt_of_round_2 = [p for p in run.glob("work/*/*/round-2/agent/.hermes/sessions/*.json")]
    assert "failed" in first and prompt_of_round_2
    assert "The tests failed" in prompt_of_round_2[0].read_text()
    # As ATIF: a subagent per round, each with the calls of its own run of the agent; the second's prompt has the error.
    export(run, tmp_path / "atif")
    assert reference_problems(tmp_path / "atif") == {}
    assert_calls_kept(run, tmp_path / "atif")
    for _, _, trajectory in read_back(tmp_path / "atif"):
        rounds = trajectory.subagent_trajectories
        assert [r.trajectory_id.rsplit("/", 1)[1] for r in rounds] == ["round-1", "round-2"]
        assert all(any(step.metrics for step in r.steps) for r in rounds)
        assert any("The tests failed" in step.message for step in rounds[1].steps if step.source == "user")


@pytest.mark.slow
def test_the_call_cap_ends_the_attempt_at_the_proxy(installed, sim, tmp_path):
    run = night(tmp_path, sim("clean"), installed("hermes"), tasks=1, budgets="max_calls = 1")
    tasks, calls = tables(run)
    assert tasks["outcome"].tolist() == ["call_cap"]
    assert len(calls) == 1 and tasks["agent_calls"].tolist() == [1]


@pytest.mark.slow
def test_the_wall_budget_kills_a_sleeping_agent_and_its_whole_tree(sim, tmp_path):
    marker = f"soak-sleeper-{uuid.uuid4().hex}"
    # A shell that starts a grandchild and sleeps: every process of the tree inherits the marker.
    run = night(tmp_path, sim("clean"), "sh -c 'sleep 3600 & sleep 3600'", tasks=1,
                budgets="task_seconds = 4\nfinal_test_seconds = 1", agent_env=f'env = {{ SLEEPER = "{marker}" }}')
    tasks, _ = tables(run)
    assert tasks["outcome"].tolist() == ["timeout"] and tasks["duration_s"].iloc[0] < 30

    def marked(process: psutil.Process) -> bool:
        try:
            return process.environ().get("SLEEPER") == marker
        except psutil.Error:
            return False

    assert [p for p in psutil.process_iter() if marked(p)] == []


@pytest.mark.slow
def test_an_agent_writes_nothing_outside_its_workspace_and_home_and_never_sees_the_key(sim, tmp_path):
    if not allow_listed(isolation_kind()):
        if IN_CI:
            pytest.fail("CI must have bubblewrap: the read-only root is what contains an agent's writes")
        pytest.skip("a read-only root needs bubblewrap or unshare")
    outside = [Path("/tmp") / f"soak-escape-{uuid.uuid4().hex}", Path.home() / f".soak-escape-{uuid.uuid4().hex}",
               Path.cwd() / f"soak-escape-{uuid.uuid4().hex}"]
    base_url = sim("clean")
    # The model's server itself is out of reach: the agent's network is the proxy and nothing else.
    probe = (f"import sys, urllib.request as u\nfor url in ({base_url + '/models'!r}, sys.argv[1] + '/models'):\n"
             "    try: u.urlopen(url, timeout=5); print(url, 'reached')\n"
             "    except OSError as e: print(url, 'refused', e)\n")
    readable = tmp_path / "agent-files"  # the jail shows the agent this folder of the test's, read-only
    readable.mkdir()
    (readable / "probe.py").write_text(probe)
    script = ("; ".join(f"echo x > {p}" for p in outside) + "; env > env.txt; cp {prompt_file} solution.py; "
              f"{sys.executable} -I {readable / 'probe.py'} {{base_url}} > net.txt 2>&1; exit 0")
    run = night(tmp_path, base_url, f"sh -c {json.dumps(script)}", tasks=1,
                agent_env=f"readable = [{json.dumps(str(readable))}]")
    assert not any(p.exists() for p in outside)
    workspace = next(run.glob("work/*/*/workspace"))
    seen = (workspace / "env.txt").read_text()
    assert UPSTREAM_KEY not in seen and "NO_PROXY=127.0.0.1" in seen
    upstream, proxy = (workspace / "net.txt").read_text().splitlines()
    assert "refused" in upstream and proxy.endswith("reached"), (upstream, proxy)


@pytest.mark.slow
def test_the_report_names_the_agent_and_the_users_key_appears_in_no_record_log_or_report(installed, sim, tmp_path):
    run = night(tmp_path, sim("clean"), installed("hermes"), tasks=2)
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(run), "-o", str(report)])
    assert result.exit_code == 0, result.output
    assert "agent hermes-agent 0.19.0" in report.read_text()  # the headline names the agent
    for path in [*run.rglob("*"), report, report.with_name("summary.json")]:
        if path.is_file():
            assert UPSTREAM_KEY not in path.read_text(errors="replace"), path


def test_bad_agent_input_is_one_line_and_exit_2(tmp_path, monkeypatch):
    unknown = CliRunner().invoke(main, ["run", "--agent", "nope", "--base-url", "http://127.0.0.1:9/v1",
                                        "--model", "m", "--tasks", "1"])
    assert unknown.exit_code == 2 and "known: hermes, mini-swe-agent, aider" in unknown.output
    monkeypatch.setenv("SOAK_CACHE_DIR", str(tmp_path / "empty-cache"))
    missing = CliRunner().invoke(main, ["run", "--agent", "mini-swe-agent", "--base-url", "http://127.0.0.1:9/v1",
                                        "--model", "m", "--tasks", "1"])
    assert missing.exit_code == 2 and "soak agent setup mini-swe-agent" in missing.output
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_builtin_agents_own_arguments_are_never_taken_for_files_of_the_folder_soak_runs_in(installed, tmp_path,
                                                                                              monkeypatch):
    """Hermes is run with `--provider custom`: a file named `custom` where soak runs changes nothing of that."""
    from soak.agent.external import ExternalAgent
    from soak.config import SoakConfig

    installed("hermes")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "custom").write_text("")
    config = SoakConfig.model_validate({
        "mode": "agent", "agent": {"name": "hermes"}, "roles": {"orchestrator": "sim", "coder": "sim"},
        "endpoints": {"sim": {"base_url": "http://127.0.0.1:9/v1", "model": "soak-sim"}}})
    argv = ExternalAgent(config).argv({key: key for key in ("prompt", "model", "home")})
    assert argv[argv.index("--provider") + 1] == "custom"
