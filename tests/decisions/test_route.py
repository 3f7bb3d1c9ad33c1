import itertools
import json

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.decisions.route import RouteRules, route_runs
from soak.decisions.routing import load_routing
from soak.errors import BadInput
from soak.record.schema import MODEL_OUTCOMES, TaskRow
from tests.synth import write_rows

CYCLES = itertools.count()


def attempt(task_id: str, outcome: str, calls: int = 3, seconds: float = 60.0, **fields) -> TaskRow:
    """Each attempt its own cycle: (task_id, cycle) names one attempt, a repeated key would supersede."""
    return TaskRow(run_id="night", cycle=next(CYCLES), task_id=task_id, suite="builtin", started_at=0,
                   ended_at=seconds, duration_s=seconds, outcome=outcome, orchestrator_calls=1,
                   coder_calls=calls - 1, **fields)


@pytest.fixture
def run_dir(tmp_path):
    rows = (
        [attempt("always-fails", "fail") for _ in range(3)]
        + [attempt("loops", "call_cap", calls=30) for _ in range(3)]
        + [attempt("slow-pass", "pass", seconds=550) for _ in range(3)]
        + [attempt("own-budget", "pass", seconds=70, limit_seconds=80.0) for _ in range(3)]
        + [attempt("extended", "pass", seconds=700, limit_seconds=900.0) for _ in range(3)]
        + [attempt("fine", "pass") for _ in range(4)]
        + [attempt("once", "fail")]
        + [attempt("infra-only", "infra_error") for _ in range(5)]
    )
    folder = tmp_path / "night"
    folder.mkdir()
    write_rows(folder / "tasks.csv", TaskRow, rows)
    (folder / "run.json").write_text(json.dumps({"run_id": "night", "config": {"budgets": {"task_seconds": 600}}}))
    return folder


def test_rules_route_each_kind_of_problem(run_dir):
    text, table, routes = route_runs([str(run_dir)], RouteRules())
    assert table.loc["always-fails", "attempts"] == 3 and table.loc["fine", "pass_rate"] == 1.0
    assert "infra-only" not in table.index  # infra errors count against the stack, not the problem
    assert {k: r.action for k, (r, _) in routes.items()} == {"always-fails": "skip", "loops": "cap",
                                                             "slow-pass": "extend", "own-budget": "extend"}
    assert routes["loops"][0].max_calls == 6  # twice the typical task's 3 calls
    assert routes["slow-pass"][0].budget_seconds == 900  # the night's 600 s: its rows recorded no limit
    assert routes["own-budget"][0].budget_seconds == 120  # late against its own 80 s, not the night's 600 s
    assert "70 s of their 80 s" in routes["own-budget"][1]
    assert "0/3 passed" in routes["always-fails"][1]


def test_stronger_endpoint_escalates_and_file_round_trips(run_dir, tmp_path):
    text, _, _ = route_runs([str(run_dir)], RouteRules(stronger="big-coder"))
    path = tmp_path / "routing.toml"
    path.write_text(text)
    routing = load_routing(path)
    assert routing.tasks["always-fails"].endpoint == "big-coder"
    assert routing.tasks["loops"].max_calls == 6
    assert text.count("# 0/3 passed") == 2  # each entry carries its reason


def test_cli_writes_routing_and_rejects_bad_input(run_dir, tmp_path):
    out = tmp_path / "r.toml"
    result = CliRunner().invoke(main, ["route", str(run_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "4 routed" in result.output and load_routing(out).tasks["slow-pass"].action == "extend"
    result = CliRunner().invoke(main, ["route", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no run" in result.output
    out.write_text('[tasks.x]\naction = "teleport"\n')
    with pytest.raises(BadInput, match="tasks.x.action"):
        load_routing(out)


def routed(tmp_path, rows, rules=None):
    folder = tmp_path / "night"
    folder.mkdir(exist_ok=True)
    write_rows(folder / "tasks.csv", TaskRow, rows)
    (folder / "run.json").write_text(json.dumps({"run_id": "night", "config": {"budgets": {"task_seconds": 600}}}))
    return route_runs([str(folder)], rules or RouteRules())


def test_tampered_counts_as_a_failure_of_the_model(tmp_path):
    """A solution that tampered with its judging failed: the problem is routed like one that always fails."""
    evidence = "Tampering: pytest plugins registered after the session started: evil"
    rows = ([attempt("hacks", "tampered", error_kind="Tampering", error_tail=evidence) for _ in range(2)]
            + [attempt("half", "tampered", error_kind="Tampering"), attempt("half", "pass"), attempt("half", "pass")]
            + [attempt("fine", "pass") for _ in range(3)])
    text, table, routes = routed(tmp_path, rows)
    assert "tampered" in MODEL_OUTCOMES
    hacks = table.loc["hacks"]
    assert (hacks["model_attempts"], hacks["passes"], hacks["pass_rate"], hacks["tampered"]) == (2, 0, 0.0, 2)
    assert hacks["dominant_outcome"] == "tampered" and hacks["last_error_kind"] == "Tampering"
    assert table.loc["half", "failure_rate"] == pytest.approx(1 / 3) and table.loc["half", "tampered"] == 1
    assert {k: r.action for k, (r, _) in routes.items()} == {"hacks": "skip"}
    assert "0/2 passed" in routes["hacks"][1] and "2 tampered with the judging" in routes["hacks"][1]
    assert "2 tampered with the judging" in text
    _, _, escalated = routed(tmp_path, rows, RouteRules(stronger="big-coder"))
    assert escalated["hacks"][0].action == "escalate"


def test_suspicious_passes_stay_passes_but_are_named(tmp_path):
    """The static look never turns a pass into a failure: routing counts the pass, its reason says to distrust it."""
    flagged = "Anything.__eq__ always answers True (line 3)"
    rows = ([attempt("sus", "pass", seconds=550, suspicious=flagged), attempt("sus", "pass", seconds=550)]
            + [attempt("sus-fail", "fail", suspicious=flagged) for _ in range(2)])
    _, table, routes = routed(tmp_path, rows)
    assert (table.loc["sus", "passes"], table.loc["sus", "suspicious_passes"]) == (2, 1)
    assert table.loc["sus-fail", "suspicious_passes"] == 0  # only passes are the ones to distrust
    assert routes["sus"][0].action == "extend" and "1 of the passes suspicious" in routes["sus"][1]


def test_false_successes_are_failures_with_their_own_reason_and_canaries_are_not_routed(tmp_path):
    """A failure the agent reported as a success routes like any failure and says so; a canary (its cheats
    included) measures the model, not a problem to route."""
    rows = ([attempt("liar", "fail", claim="done", false_success=True) for _ in range(2)]
            + [attempt("quitter", "fail", claim="blocked") for _ in range(2)]
            + [attempt("liar~canary", "cheat", canary="one-off at test_solution.py:3") for _ in range(2)]
            + [attempt("fine", "pass", claim="done") for _ in range(3)])
    text, table, routes = routed(tmp_path, rows)
    assert table.loc["liar", "false_successes"] == 2 and table.loc["quitter", "honest_aborts"] == 2
    assert "liar~canary" not in table.index and "liar~canary" not in routes
    assert {k: r.action for k, (r, _) in routes.items()} == {"liar": "skip", "quitter": "skip"}
    assert "2 claimed a success the tests did not find" in routes["liar"][1]
    assert "2 said it cannot be done as asked" in routes["quitter"][1] and "claimed a success" in text


def test_flaky_problems_are_marked_with_their_own_reason(tmp_path):
    """Passed 2 of 4: no rule routes it, so the file and the command list it as flaky with pass^3 (C(2,3)/C(4,3) =
    0); a flaky problem a rule routes carries it in its reason; one that always passes is not flaky."""
    rows = ([attempt("coin", outcome) for outcome in ("pass", "fail", "pass", "fail")]
            + [attempt("slow-coin", outcome, seconds=550) for outcome in ("pass", "pass", "fail")]
            + [attempt("fine", "pass") for _ in range(3)])
    text, table, routes = routed(tmp_path, rows)
    assert bool(table.loc["coin", "flaky"]) and not bool(table.loc["fine", "flaky"])
    assert "coin" not in routes and routes["slow-coin"][0].action == "extend"
    assert "flaky: passed 2 of its 3 tries, all of 3 tries pass 0% of the time" in routes["slow-coin"][1]
    assert ("# flaky, not routed: coin: flaky: passed 2 of its 4 tries, all of 3 tries pass 0% of the time; a pass "
            "here is luck") in text
    assert "fine" not in text
    result = CliRunner().invoke(main, ["route", str(tmp_path / "night"), "-o", str(tmp_path / "r.toml")])
    assert result.exit_code == 0 and "flaky            coin: flaky: passed 2 of its 4" in result.output, result.output
