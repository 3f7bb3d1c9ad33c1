"""rounds.csv on a sim night with known revisions: the sim's coder writes either a task's reference or its broken
variant (wrong.py), each first write the reference half the time and every revision the reference, so some tasks pass
in round 1 and the rest are fixed in round 2. Each judged round is one row holding what its file earns from the judge;
the last is tasks.csv's; the report's revision figures and the ATIF export read rounds.csv, not the test output;
transcript lines name their calls; and the same folder as schema version 5 (no rounds.csv) still reads, renders,
routes, compares and exports, its rounds derived from the test output."""

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.paths import builtin_tasks_dir
from soak.record.identity import AttemptId
from soak.record.read import load_run
from soak.record.transcript import answering_calls
from soak.sandbox.judge import judge
from soak.sim.reply import broken_variant
from soak.sim.scenario import Coder, Scenario, Timing
from soak.sim.server import SimServer
from soak.tasks.suites import load_suites
from tests.atif import read_back
from tests.record.test_versions import as_version_5

TASK_IDS = ["fizzbuzz-rules", "gcd-lcm", "luhn-checksum", "day-of-year"]
ATTEMPTS = 8


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("revised")
    for task_id in TASK_IDS:
        shutil.copytree(builtin_tasks_dir() / task_id, home / "suite" / task_id)
    scenario = Scenario(timing=Timing(ttft_seconds=0, decode_tokens_per_second=0), coder=Coder(p_correct=0.5, p_fix=1))
    with SimServer(scenario, seed=1, suite=f"dir:{home / 'suite'}") as sim:
        (home / "soak.toml").write_text(f'suite = "dir:{home / "suite"}"\nseed = 1\n')
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SOAK_DATA_DIR", str(home / "data"))
            result = CliRunner().invoke(main, ["run", "--config", str(home / "soak.toml"), "--base-url", sim.base_url,
                                               "--model", "soak-sim", "--tasks", str(ATTEMPTS), "--quiet",
                                               "--run-id", "revised"])
    assert result.exit_code == 0, result.output
    return home


@pytest.fixture(scope="module")
def night(home) -> Path:
    return home / "data" / "revised"


@pytest.fixture(scope="module")
def earned(home) -> dict[str, tuple[str, int, int, list[str]]]:
    """sha256 of each file the sim's coder can write -> (task, tests passed, tests in all, failing ids) as the judge
    finds it on its own."""
    found = {}
    for task in load_suites(f"dir:{home / 'suite'}"):
        for source in (task.reference, broken_variant(task)):
            verdict = judge(task, source)
            found[hashlib.sha256(source.encode()).hexdigest()] = (task.id, verdict.tests_passed, verdict.tests_total,
                                                                 verdict.failing_tests)
    return found


def rounds_of(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "rounds.csv", keep_default_na=False)


def test_each_judged_round_is_a_row_with_what_its_file_earns(night, earned):
    tasks = pd.read_csv(night / "tasks.csv", keep_default_na=False)
    rounds = rounds_of(night)
    assert len(tasks) == ATTEMPTS and (tasks["outcome"] == "pass").all()
    assert len(rounds) == tasks["rounds"].sum()
    for _, row in tasks.iterrows():
        mine = rounds[(rounds["task_id"] == row["task_id"]) & (rounds["cycle"] == row["cycle"])]
        assert mine["round"].tolist() == list(range(1, row["rounds"] + 1))
        assert set(mine["session"]) == {row["session"]} and set(mine["run_id"]) == {"revised"}
        for _, judged in mine.iterrows():
            task_id, passed, total, failing = earned[judged["entry_sha256"]]
            kept = night / "work" / row["task_id"] / str(row["cycle"]) / f"round-{judged['round']}" / "solution.py"
            assert hashlib.sha256(kept.read_bytes()).hexdigest() == judged["entry_sha256"]
            assert judged["entry_bytes"] == kept.stat().st_size
            assert (task_id, judged["tests_passed"], judged["tests_total"]) == (row["task_id"], passed, total)
            assert judged["failing_tests"].splitlines() == failing and len(failing) == total - passed
            assert judged["result"] == ("pass" if passed == total else "fail") and not judged["noop"]
        last = mine.iloc[-1]
        assert (last["tests_passed"], last["tests_total"], last["error_kind"]) == (
            row["tests_passed"], row["tests_total"], row["error_kind"])
    # Known revisions: some attempts pass in round 1, the others fail it and are fixed in round 2.
    assert sorted(set(tasks["rounds"])) == [1, 2]
    assert set(rounds.loc[rounds["round"] == 1, "result"]) == {"pass", "fail"}
    assert set(rounds.loc[rounds["round"] == 2, "result"]) == {"pass"}


def test_each_round_keeps_the_claim_its_driver_read(night):
    """The sim's orchestrator closes each round with `finish`: done after the reference, partial after the broken
    variant; a round's claim is that round's, the attempt's (tasks.csv) the last round's."""
    tasks = pd.read_csv(night / "tasks.csv", keep_default_na=False).set_index(["task_id", "cycle"])
    for _, judged in rounds_of(night).iterrows():
        assert (judged["claim"], judged["claim_source"]) == ("done" if judged["result"] == "pass" else "partial",
                                                             "tool")
        row = tasks.loc[(judged["task_id"], judged["cycle"])]
        if judged["round"] == row["rounds"]:
            assert (judged["claim"], judged["claimed_tests_pass"]) == (row["claim"], row["claimed_tests_pass"])


def mislead(run: Path) -> None:
    """Every round's test output rewritten to claim the opposite of what the judge found."""
    for output in run.glob("work/*/*/round-*/test_output.txt"):
        output.write_text("FAILED test_solution.py::test_invented - AssertionError\n1 failed, 0 passed in 0.01s\n"
                          if "passed" in output.read_text() else "7 passed in 0.01s\n")


def revision_and_rounds(run: Path, out: Path) -> tuple[dict, dict]:
    """(the report's revision figures: summary.json's and each problem page's rounds, the ATIF export's rounds per
    attempt)."""
    assert CliRunner().invoke(main, ["report", str(run), "-o", str(out / "report")]).exit_code == 0
    assert CliRunner().invoke(main, ["export", str(run), "--out", str(out / "atif")]).exit_code == 0
    figures = json.loads((out / "report" / "summary.json").read_text())["runs"][0]["revision"]
    for page in sorted((out / "report" / "problems").glob("*.html")):
        figures[page.stem] = [line for line in page.read_text().splitlines() if "generated" not in line]
    exported = {(task, cycle): made.extra["soak"]["rounds"] for task, cycle, made in read_back(out / "atif")}
    return figures, exported


def test_the_report_and_the_export_read_rounds_csv_not_the_test_output(night, tmp_path):
    figures, exported = revision_and_rounds(night, tmp_path / "before")
    tasks = pd.read_csv(night / "tasks.csv")
    revised = int((tasks["rounds"] == 2).sum())
    assert figures["failed_round_1"] == figures["fixed"] == revised > 0
    assert figures["better"] == figures["unchanged"] == figures["worse"] == figures["no_round_2"] == 0
    assert set(figures) >= set(TASK_IDS)
    rows = rounds_of(night)
    for (task_id, cycle), facts in exported.items():
        mine = rows[(rows["task_id"] == task_id) & (rows["cycle"] == cycle)]
        assert [(r["round"], r["tests_passed"], r["tests_total"], r["failing_tests"], r["derived"]) for r in facts] == [
            (r.round, r.tests_passed, r.tests_total, r.failing_tests, False) for r in mine.itertuples()]
    misled = shutil.copytree(night, tmp_path / "misled")
    mislead(misled)
    assert revision_and_rounds(misled, tmp_path / "after") == (figures, exported)
    as_version_5(misled)  # read from the test output, as an older folder's rounds are, they would change
    assert revision_and_rounds(misled, tmp_path / "derived")[0] != figures


def test_every_transcript_line_names_its_call(night):
    """An answer names the try that answered it, any other line the call it was first sent in; the pairing by index
    is the one the fallback (tool names, in order) finds in a transcript without them."""
    run = load_run(night)
    for task_id, cycle in zip(run.tasks["task_id"], run.tasks["cycle"], strict=True):
        attempt = run.attempt(AttemptId(task_id, int(cycle)))
        indexes = {call.call_index for call in attempt.calls}
        lines = [line for line, _ in attempt.conversation]
        assert lines and all(line.call_index is not None for line in lines)
        for line, call in attempt.conversation:
            if line.role == "assistant":
                assert call is not None and call.call_index == line.call_index and call.status == "ok"
                assert call.tool_names == line.tool_names
            else:
                assert call is None and (line.call_index in indexes or line.call_index == max(indexes) + 1)
        unnamed = [line.model_copy(update={"call_index": None}) for line in lines]
        assert answering_calls(unnamed, attempt.calls) == [call for _, call in attempt.conversation]


def test_a_version_5_folder_derives_its_rounds_and_is_refused_by_a_resume(night, tmp_path, monkeypatch):
    old = shutil.copytree(night, tmp_path / "data" / "v5")
    as_version_5(old)
    record, current = load_run(old), load_run(night)
    assert record.rounds_derived and record.rounds.empty
    assert any("rounds.csv: none (schema version 5 or older)" in note for note in record.notes)
    for task_id, cycle in zip(current.tasks["task_id"], current.tasks["cycle"], strict=True):
        attempt = AttemptId(task_id, int(cycle))
        derived, judged = record.attempt(attempt).rounds, current.attempt(attempt).rounds
        assert all(r.derived and r.schema_version == 5 for r in derived)
        keep = {"round", "tests_passed", "tests_total", "entry_sha256", "entry_bytes", "noop"}
        assert [r.model_dump(include=keep) for r in derived] == [r.model_dump(include=keep) for r in judged]
        # pytest's short summary names the tests that failed; the judge also those that never ran
        assert all(set(d.failing) <= set(j.failing) for d, j in zip(derived, judged, strict=True))
    figures, exported = revision_and_rounds(old, tmp_path / "out")
    assert figures == revision_and_rounds(night, tmp_path / "new")[0]
    assert exported and all(facts and all(r["derived"] for r in facts) for facts in exported.values())
    invoke = CliRunner().invoke
    assert invoke(main, ["route", str(old), "-o", str(tmp_path / "routing.toml")]).exit_code == 0
    assert invoke(main, ["compare", str(old), str(night)]).exit_code == 0
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    before = {path: path.read_bytes() for path in old.rglob("*") if path.is_file()}
    resumed = invoke(main, ["run", "--resume", "v5", "--tasks", "1"])
    assert resumed.exit_code == 2 and resumed.output.count("\n") == 1
    assert "schema version 5" in resumed.output and "rounds.csv" in resumed.output
    assert "start a new run" in resumed.output
    assert {path: path.read_bytes() for path in old.rglob("*") if path.is_file()} == before
