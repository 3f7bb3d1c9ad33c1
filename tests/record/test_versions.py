"""Run folders of older schema versions: version 1 (calls.csv said `attempt` where version 2 says `retry`), version 2
(tasks.csv without `tests_touched`), version 3 (calls.csv without `max_gap_s`), version 4 (calls.csv without
`requested_model`), version 5 (no rounds.csv: tests/record/test_rounds.py), version 6 (tasks.csv without
`claim_reason`) and version 7 (calls.csv without `temperature`, `top_p` and `seed`, no `repeat` column). Report,
route and compare read them; a resume appends when the columns allow, else refuses in one line and changes nothing."""

import csv
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.night.lifecycle import RunOptions, reopen_run
from soak.record.folder import RunFolder
from soak.record.read import load_run, read_rows
from soak.record.schema import SCHEMA_VERSION, CallRow, RoundRow, RunLimits, TaskRow
from tests.night.test_loop import FakeTasks, new_folder, run


def rewrite(path: Path, change) -> None:
    """Rewrite a CSV row by row: `change(header, row)` returns the row to keep (the header comes first)."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(change(header, row) for row in rows)


def as_version_1(folder: RunFolder) -> None:
    """What soak wrote before version 2: `attempt` in calls.csv, schema_version 1 in every row and run.json."""
    for path in (folder.layout.tasks, folder.layout.calls, folder.layout.events):
        rewrite(path, lambda header, row: row if row is header else ["1", *row[1:]])
    rewrite(folder.layout.calls, lambda header, row: ["attempt" if c == "retry" else c for c in row]
            if row is header else row)
    info = json.loads(folder.layout.info.read_text())
    folder.layout.info.write_text(json.dumps({**info, "schema_version": 1}))


def without_column(folder: RunFolder, csv_path: Path, column_name: str, row_model: type, version: int) -> None:
    """The folder as an older soak wrote it: `column_name` missing from that CSV, and that schema_version."""
    column = row_model.columns().index(column_name)
    rewrite(csv_path, lambda header, row: (row if row is header else [str(version), *row[1:]])[:column]
            + row[column + 1:])
    info = json.loads(folder.layout.info.read_text())
    folder.layout.info.write_text(json.dumps({**info, "schema_version": version}))


def as_version_2(folder: RunFolder) -> None:
    """What soak wrote before version 3: tasks.csv without `tests_touched`."""
    without_column(folder, folder.layout.tasks, "tests_touched", TaskRow, 2)


def as_version_3(folder: RunFolder) -> None:
    """What soak wrote before version 4: calls.csv without `max_gap_s`."""
    without_column(folder, folder.layout.calls, "max_gap_s", CallRow, 3)


def as_version_4(folder: RunFolder) -> None:
    """What soak wrote before version 5: calls.csv without `requested_model`."""
    without_column(folder, folder.layout.calls, "requested_model", CallRow, 4)


def as_version_6(folder: RunFolder) -> None:
    """What soak wrote before version 7: tasks.csv without `claim_reason` and `coder_quote`, and a last-words claim's
    source called `text`."""
    without_column(folder, folder.layout.tasks, "coder_quote", TaskRow, 6)
    without_column(folder, folder.layout.tasks, "claim_reason", TaskRow, 6)
    rewrite(folder.layout.tasks, lambda header, row: row if row is header else
            ["text" if name == "claim_source" and value == "model" else value
             for name, value in zip(header, row, strict=True)])


def as_version_7(folder: RunFolder) -> None:
    """What soak wrote before version 8: calls.csv without the sampling settings each call was sent with, and no
    CSV with the `repeat` of its attempts."""
    for column in ("seed", "top_p", "temperature", "repeat"):
        without_column(folder, folder.layout.calls, column, CallRow, 7)
    without_column(folder, folder.layout.tasks, "repeat", TaskRow, 7)


def as_version_8(folder: RunFolder) -> None:
    """What soak wrote before version 9: no CSV with the `node` of its attempts."""
    for path, model in ((folder.layout.tasks, TaskRow), (folder.layout.calls, CallRow),
                        (folder.layout.rounds, RoundRow)):
        without_column(folder, path, "node", model, 8)


def as_version_5(run: Path) -> None:
    """What soak wrote before version 6: no rounds.csv, schema_version 5 in every row and run.json."""
    (run / "rounds.csv").unlink()
    for name in ("tasks.csv", "calls.csv", "events.csv", "samples.csv"):
        rewrite(run / name, lambda header, row: row if row is header else ["5", *row[1:]])
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "schema_version": 5}))


def older_folder(tmp_path: Path, monkeypatch, version: int, convert) -> RunFolder:
    """A two-task night's folder (run id `v<version>`) as soak of that schema version wrote it (`convert`)."""
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    folder, info, config = new_folder(tmp_path / "data", RunLimits(max_tasks=2), run_id=f"v{version}")
    run(folder, info, config, FakeTasks(calls=1))
    convert(folder)
    return folder


@pytest.fixture
def v1(tmp_path, monkeypatch) -> RunFolder:
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    folder, info, config = new_folder(tmp_path / "data", RunLimits(max_tasks=4), run_id="old")
    run(folder, info, config, FakeTasks(calls=3))
    as_version_1(folder)
    header = "schema_version,run_id,task_id,cycle,repeat,session,node,call_index,attempt,"
    assert folder.layout.calls.read_text().startswith(header)
    return folder


def test_report_route_and_compare_read_a_version_1_folder(v1, tmp_path):
    record = load_run(v1.path)
    assert len(record.tasks) == 4 and len(record.calls) == 12
    assert list(record.calls["retry"]) == [1.0] * 12 and set(record.calls["schema_version"]) == {1.0}
    assert not [note for note in record.notes if "calls.csv" in note]
    invoke = CliRunner().invoke
    report = invoke(main, ["report", str(v1.path), "-o", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    attempt_pages = list((tmp_path / "report" / "attempts").rglob("*.html"))
    assert len(attempt_pages) == 4 and "try" in attempt_pages[0].read_text()
    routed = invoke(main, ["route", str(v1.path), "-o", str(tmp_path / "routing.toml")])
    assert routed.exit_code == 0 and "4 problems" in routed.output
    twin = shutil.copytree(v1.path, tmp_path / "twin")
    compared = invoke(main, ["compare", str(v1.path), str(twin)])
    assert compared.exit_code == 0 and "PASS" in compared.output


def test_a_resume_appends_to_a_version_1_folder_whose_columns_differ_only_by_a_new_name(v1):
    folder, info, config, tasks = reopen_run(RunOptions(resume="old", tasks=2))
    run(folder, info, config, FakeTasks(calls=3), tasks=tasks)
    assert folder.layout.calls.read_text().splitlines()[0].split(",")[8] == "attempt"  # the header stays as written
    calls = list(read_rows(folder.layout.calls, CallRow))
    assert len(calls) == 18 and {c.retry for c in calls} == {1}
    assert [c.schema_version for c in calls] == [1] * 12 + [SCHEMA_VERSION] * 6
    assert [r.session for r in read_rows(folder.layout.tasks, TaskRow)] == [0] * 4 + [1] * 2


def test_a_resume_refuses_in_one_line_a_folder_whose_columns_differ(v1):
    rewrite(v1.layout.tasks, lambda header, row: row[:-1])  # an older soak: tasks.csv without agent_exit
    before = {path: path.read_bytes() for path in v1.path.rglob("*") if path.is_file()}
    result = CliRunner().invoke(main, ["run", "--resume", "old", "--tasks", "2"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "tasks.csv" in result.output
    assert "schema version 1" in result.output and f"schema version {SCHEMA_VERSION}" in result.output
    assert "start a new run" in result.output
    assert {path: path.read_bytes() for path in v1.path.rglob("*") if path.is_file()} == before
    assert len(load_run(v1.path).tasks) == 4  # still read by report, route and compare


def test_a_version_2_folder_is_read_without_tests_touched_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 2, as_version_2)
    assert "tests_touched" not in folder.layout.tasks.read_text()
    record = load_run(folder.path)
    assert len(record.tasks) == 2 and list(record.tasks["tests_touched"]) == ["", ""]
    invoke = CliRunner().invoke
    report = invoke(main, ["report", str(folder.path), "-o", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["tests_touched"] == 0
    assert invoke(main, ["route", str(folder.path), "-o", str(tmp_path / "routing.toml")]).exit_code == 0
    twin = shutil.copytree(folder.path, tmp_path / "twin")
    assert invoke(main, ["compare", str(folder.path), str(twin)]).exit_code == 0
    resumed = invoke(main, ["run", "--resume", "v2", "--tasks", "1"])
    assert resumed.exit_code == 2 and "schema version 2" in resumed.output and "start a new run" in resumed.output


def assert_reported_routed_and_refused(tmp_path: Path, folder, version: int) -> None:
    """An older folder (run id `v<version>`) renders and routes; a resume refuses it in one line, naming its version."""
    invoke = CliRunner().invoke
    report = invoke(main, ["report", str(folder.path), "-o", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert invoke(main, ["route", str(folder.path), "-o", str(tmp_path / "routing.toml")]).exit_code == 0
    resumed = invoke(main, ["run", "--resume", f"v{version}", "--tasks", "1"])
    assert resumed.exit_code == 2 and f"schema version {version}" in resumed.output
    assert "start a new run" in resumed.output


def test_a_version_3_folder_is_read_without_max_gap_s_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 3, as_version_3)
    assert "max_gap_s" not in folder.layout.calls.read_text()
    record = load_run(folder.path)
    assert len(record.calls) == 2 and record.calls["max_gap_s"].isna().all()
    assert_reported_routed_and_refused(tmp_path, folder, 3)


def test_a_version_4_folder_is_read_without_requested_model_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 4, as_version_4)
    assert "requested_model" not in folder.layout.calls.read_text()
    record = load_run(folder.path)
    assert len(record.calls) == 2 and list(record.calls["requested_model"]) == ["", ""]
    assert [call.requested_model for call in read_rows(folder.layout.calls, CallRow)] == ["", ""]
    assert_reported_routed_and_refused(tmp_path, folder, 4)


def test_a_version_6_folder_is_read_without_claim_reason_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 6, as_version_6)
    header = folder.layout.tasks.read_text().splitlines()[0].split(",")
    assert "claim_reason" not in header and "coder_quote" not in header and "claim_source" in header
    record = load_run(folder.path)
    assert len(record.tasks) == 2 and list(record.tasks["claim_reason"]) == ["", ""]
    assert [row.coder_quote for row in read_rows(folder.layout.tasks, TaskRow)] == ["", ""]
    assert_reported_routed_and_refused(tmp_path, folder, 6)


def test_a_version_7_folder_is_read_without_sampling_settings_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 7, as_version_7)
    header = folder.layout.calls.read_text().splitlines()[0].split(",")
    assert not {"temperature", "top_p", "seed", "repeat"} & set(header) and "max_tokens" in header
    assert "repeat" not in folder.layout.tasks.read_text().splitlines()[0].split(",")
    record = load_run(folder.path)
    assert len(record.calls) == 2 and record.calls[["temperature", "top_p", "seed"]].isna().all().all()
    assert list(record.tasks["repeat"]) == list(record.calls["repeat"]) == [1, 1]
    assert [(c.temperature, c.seed) for c in read_rows(folder.layout.calls, CallRow)] == [(None, None)] * 2
    assert_reported_routed_and_refused(tmp_path, folder, 7)


def test_a_version_8_folder_is_read_as_run_on_this_machine_and_refused_by_a_resume(tmp_path, monkeypatch):
    folder = older_folder(tmp_path, monkeypatch, 8, as_version_8)
    for path in (folder.layout.tasks, folder.layout.calls, folder.layout.rounds):
        assert "node" not in path.read_text().splitlines()[0].split(",")
    record = load_run(folder.path)
    assert list(record.tasks["node"]) == list(record.calls["node"]) == ["", ""]
    attempt = record.attempt(record.attempt_ids()[0])
    assert attempt.row.node == "" and len(attempt.calls) == 1
    assert_reported_routed_and_refused(tmp_path, folder, 8)
