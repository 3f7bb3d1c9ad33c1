import csv
import json
import os
import time

import pandas as pd
import pytest

from soak.errors import BadInput
from soak.files import write_atomic
from soak.record import folder as record
from soak.record.folder import CsvLog, RunFolder, clean_text, complete_length, encode_row
from soak.record.read import created_at, load_run, read_rows, run_folders
from soak.record.schema import CallRow, EventRow, RunInfo, RunLimits, Session, TaskRow

TORTURE = [
    "plain",
    "line one\nline two\r\nline three\rend",
    'she said "hi", then ""left""',
    "a,b,,c,",
    "nul\x00inside\x00",
    '"',
    "\n",
    "",
    "ünïcödé ✓ 中文",
    "lone surrogate \udcff here",
    "x" * 100_000,
    'mixed "quote\nnewline,comma\x00nul' * 2000,
]


def task_row(i: int, error_tail: str = "") -> TaskRow:
    return TaskRow(
        run_id="r1", cycle=i // 3, task_id=f"t{i}", suite="builtin", started_at=1000.0 + i, ended_at=1001.5 + i,
        duration_s=1.5, outcome="pass" if i % 2 else "fail", error_tail=error_tail,
    )


def test_columns_come_from_the_model_with_schema_version(tmp_path):
    log = CsvLog(tmp_path / "tasks.csv", TaskRow)
    log.close()
    header = (tmp_path / "tasks.csv").read_text().strip().split(",")
    assert header == TaskRow.columns()
    assert header[0] == "schema_version"


def test_torture_values_stay_one_row_each(tmp_path):
    path = tmp_path / "tasks.csv"
    log = CsvLog(path, TaskRow)
    for i, value in enumerate(TORTURE):
        log.append(task_row(i, value))
    log.close()
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(TORTURE)
    frame = pd.read_csv(path, keep_default_na=False)
    assert len(frame) == len(TORTURE)
    assert list(frame["task_id"]) == [f"t{i}" for i in range(len(TORTURE))]
    for row, value in zip(rows, TORTURE, strict=True):
        stored = row["error_tail"]
        assert "\x00" not in stored
        if len(value) <= record.MAX_TEXT_CHARS:
            assert stored == value.replace("\x00", "").encode("utf-8", "backslashreplace").decode("utf-8")
        else:
            assert "…[truncated " in stored
            assert len(stored) < record.MAX_TEXT_CHARS + 100


def test_clean_text_keeps_head_and_tail_and_says_how_much_was_cut():
    text = "HEAD" + "m" * 50 + "TAIL"
    cut = clean_text(text, limit=20)
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert f"…[truncated {len(text) - 20} chars]" in cut
    assert clean_text("a\x00b") == "ab"


def test_rows_read_back_as_models_with_none_kept(tmp_path):
    path = tmp_path / "calls.csv"
    log = CsvLog(path, CallRow)
    rows = [
        CallRow(run_id="r", task_id="t", cycle=0, call_index=0, role="coder", endpoint="e", model="m", stream=True,
                started_at=5.0, duration_s=0.25, ttft_s=None, prompt_tokens=None, completion_tokens=7,
                error='boom,\n"x"'),
        CallRow(run_id="r", task_id="t", cycle=0, call_index=1, role="orchestrator", endpoint="e", model="m",
                stream=False, started_at=6.0, duration_s=1.0, ttft_s=0.5, prompt_tokens=3, reasoning_exhausted=True),
    ]
    for row in rows:
        log.append(row)
    log.close()
    assert list(read_rows(path, CallRow)) == rows


def test_a_log_takes_only_its_own_row_model(tmp_path):
    log = CsvLog(tmp_path / "tasks.csv", TaskRow)
    with pytest.raises(TypeError):
        log.append(EventRow(run_id="r", at=1.0, kind="note"))  # type: ignore[arg-type]
    log.close()


def test_reopening_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "tasks.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(BadInput, match="columns"):
        CsvLog(path, TaskRow)


@pytest.mark.parametrize(
    "value", ["short", 'quoted "multi\nline", with, commas\n\n"', "x" * 3000], ids=["short", "quoted", "long"]
)
def test_a_torn_last_row_is_cut_at_every_possible_point(tmp_path, value):
    path = tmp_path / "tasks.csv"
    log = CsvLog(path, TaskRow)
    for i in range(3):
        log.append(task_row(i, value))
    log.close()
    complete = path.read_bytes()
    torn = encode_row([record.csv_value(getattr(task_row(9, value), c)) for c in TaskRow.columns()])
    for cut in range(0, len(torn), max(1, len(torn) // 200)):
        path.write_bytes(complete + torn[:cut])
        log = CsvLog(path, TaskRow)
        assert log.repaired_bytes == cut
        assert path.read_bytes() == complete
        log.append(task_row(5, value))
        log.close()
        assert [r.task_id for r in read_rows(path, TaskRow)] == ["t0", "t1", "t2", "t5"]
        assert len(pd.read_csv(path)) == 4


def test_complete_length_handles_a_torn_header_and_an_empty_file():
    assert complete_length(b"") == 0
    assert complete_length(b"schema_version,run_") == 0
    assert complete_length(b'a,b\n"x\ny",1\n"z\n') == len(b'a,b\n"x\ny",1\n')


def test_a_torn_header_is_rewritten(tmp_path):
    path = tmp_path / "events.csv"
    path.write_bytes(b"schema_version,run_")
    CsvLog(path, EventRow).close()
    assert path.read_text().strip().split(",") == list(EventRow.model_fields)


def test_task_rows_are_fsynced_calls_only_written(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(record.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    tasks = CsvLog(tmp_path / "tasks.csv", TaskRow, durable=True)
    calls = CsvLog(tmp_path / "calls.csv", CallRow)
    synced.clear()
    tasks.append(task_row(1))
    calls.append(CallRow(run_id="r", task_id="t", cycle=0, call_index=0, role="coder", endpoint="e", model="m",
                         stream=True, started_at=1.0, duration_s=1.0))
    assert synced == [tasks.fd]
    # Written without buffering: another reader sees the row at once.
    assert len(list(read_rows(tmp_path / "calls.csv", CallRow))) == 1
    tasks.close()
    calls.close()


def test_run_json_is_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    write_atomic(path, json.dumps({"v": 1}))
    assert path.stat().st_mode & 0o777 == 0o644  # not the temp file's 0o600
    monkeypatch.setattr(record.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        write_atomic(path, json.dumps({"v": 2}))
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_run_folder_round_trip(tmp_path):
    folder = RunFolder(tmp_path / "run-1")
    folder.open()
    info = RunInfo(run_id="run-1", created_at=1.0, config={"concurrency": 2}, limits=RunLimits(max_tasks=3))
    folder.write_info(info)
    folder.event("note", "hello, \"world\"\n")
    folder.close()
    assert folder.read_info() == info
    assert sorted(p.name for p in folder.path.iterdir()) == [
        "calls.csv", "events.csv", "rounds.csv", "run.json", "samples.csv", "tasks.csv"
    ]
    assert [e.detail for e in read_rows(folder.path / "events.csv", EventRow)] == ["hello, \"world\"\n"]
    assert pd.read_csv(folder.path / "samples.csv").empty
    with pytest.raises(BadInput, match="run.json"):
        RunFolder(tmp_path / "nothing").read_info()


def test_runs_are_ordered_by_created_at_not_by_folder_mtime(tmp_path):
    for name, created in (("b-older", 100.0), ("a-newer", 200.0)):
        RunFolder(tmp_path / name).path.mkdir()
        RunFolder(tmp_path / name).write_info(RunInfo(run_id=name, created_at=created, config={}, limits=RunLimits()))
    os.utime(tmp_path / "b-older", (300.0, 300.0))  # touched last, made first
    (tmp_path / "20000101-000000-ab12").mkdir()
    (tmp_path / "20000101-000000-ab12" / "tasks.csv").write_text("")  # no run.json: its name tells the time
    assert [p.name for p in run_folders(tmp_path)] == ["b-older", "a-newer", "20000101-000000-ab12"]


def test_readers_take_run_json_through_run_info_leniently(tmp_path):
    """A key this soak does not know is ignored, a field it cannot read is left unknown and noted, the rest typed;
    a resume still refuses such a run.json (RunFolder.read_info)."""
    folder = RunFolder(tmp_path / "20000101-000000-ab12")
    folder.open()
    folder.close()
    session = Session(session=0, pid=1, started_at=10.0, last_seen_at=70.0)
    info = RunInfo(run_id="night", created_at=5.0, config={"mode": "direct"}, limits=RunLimits(max_tasks=2),
                   sessions=[session], host={"agent_isolation": "bubblewrap"}, versions={"soak": "0.1.0"})
    written = json.loads(info.model_dump_json())
    folder.layout.info.write_text(json.dumps({**written, "from_a_later_soak": [1], "created_at": "at dawn",
                                              "sessions": [{"session": "first"}]}))
    run = load_run(folder.path)
    assert run.info is not None and run.run_id == "night" and run.running
    assert (run.config, run.host, run.info.versions, run.info.limits) == (info.config, info.host, info.versions,
                                                                          info.limits)
    assert run.sessions == [] and run.info.created_at == 0
    assert "run.json: unreadable created_at, sessions (read as unknown)" in run.notes
    assert created_at(folder.path) == time.mktime(time.strptime("20000101-000000", "%Y%m%d-%H%M%S"))
    with pytest.raises(BadInput, match="run.json"):
        folder.read_info()
    folder.layout.info.write_text(json.dumps({**written, "ended_at": 80.0}))
    ended = load_run(folder.path)
    assert ended.sessions == [session] and not ended.running and ended.notes == []
    folder.layout.info.unlink()
    gone = load_run(folder.path)
    assert gone.info is None and gone.run_id == folder.path.name and not gone.running
    assert "run.json: missing" in gone.notes
