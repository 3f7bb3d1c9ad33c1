import json

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.decisions.route import RouteRules, load_routing, route_runs
from soak.errors import BadInput
from soak.record.schema import TaskRow
from soak.report.synth import write_rows


def attempt(task_id: str, outcome: str, calls: int = 3, seconds: float = 60.0) -> TaskRow:
    return TaskRow(run_id="night", cycle=0, task_id=task_id, suite="builtin", started_at=0, ended_at=seconds,
                   duration_s=seconds, outcome=outcome, orchestrator_calls=1, coder_calls=calls - 1)


@pytest.fixture
def run_dir(tmp_path):
    rows = (
        [attempt("always-fails", "fail") for _ in range(3)]
        + [attempt("loops", "call_cap", calls=30) for _ in range(3)]
        + [attempt("slow-pass", "pass", seconds=550) for _ in range(3)]
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
                                                             "slow-pass": "extend"}
    assert routes["loops"][0].max_calls == 6  # twice the typical task's 3 calls
    assert routes["slow-pass"][0].budget_seconds == 900
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
    assert "3 routed" in result.output and load_routing(out).tasks["slow-pass"].action == "extend"
    result = CliRunner().invoke(main, ["route", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no run" in result.output
    out.write_text('[tasks.x]\naction = "teleport"\n')
    with pytest.raises(BadInput, match="tasks.x.action"):
        load_routing(out)
