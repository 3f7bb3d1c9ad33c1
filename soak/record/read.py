"""The one reader of a run folder: its CSVs as typed DataFrames (read_table) or row models (read_rows, built on
read_table), run.json through RunInfo (read_info), one attempt whole (RunRecord.attempt), and finding runs; tolerant
of a run still going, missing files and a torn last row.

The supersede rule lives here too (`latest_attempts`): an attempt is its AttemptId's slot, and of its rows in
tasks.csv only the last written counts, so a re-run (`soak run --resume RUN --retry infra_error`, the redo of a
cancelled attempt, the retry of one lost with its cluster node) replaces the earlier row in every aggregate while the
file keeps them all. `load_run` (report, route,
compare) and `read_attempts` (the night's schedule and limits, `soak status`/`runs`) both apply it."""

import contextlib
import csv
import io
import json
import math
import re
import time
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar, cast

import pandas as pd
from pydantic import ValidationError

from soak.config import SoakConfig
from soak.errors import BadInput
from soak.files import load_model
from soak.paths import data_dir, sweeps_dir
from soak.record.folder import complete_length
from soak.record.identity import ATTEMPT_COLUMNS, SLOT_COLUMNS, AttemptId
from soak.record.info import Host
from soak.record.layout import AttemptLayout, RunLayout
from soak.record.rounds import derived_rounds
from soak.record.schema import CallRow, EventRow, RoundRow, Row, RunInfo, SampleRow, Session, TaskRow
from soak.record.sweeps import SweepInfo
from soak.record.transcript import TranscriptLine, answering_calls, read_transcript

R = TypeVar("R", bound=Row)


TABLES: dict[str, type[Row]] = {"tasks": TaskRow, "calls": CallRow, "events": EventRow, "samples": SampleRow,
                                "rounds": RoundRow}
TRUE_WORDS = {"true", "1", "yes", "t", "y"}


@dataclass
class AttemptRecord:
    """One attempt, read whole: its tasks.csv row, its calls in order, its judged rounds (rounds.csv, or derived from
    an older folder's round folders) and, lazily, its conversation."""

    row: TaskRow
    layout: AttemptLayout
    calls: list[CallRow]
    rounds: list[RoundRow]

    @cached_property
    def conversation(self) -> list[tuple[TranscriptLine, CallRow | None]]:
        """soak's own transcript, each line with the call whose answer it is (answering_calls); empty for an external
        agent, whose conversation is in its own files (soak.export.conversation)."""
        lines = list(read_transcript(self.layout.transcript))
        return list(zip(lines, answering_calls(lines, self.calls), strict=True))


@dataclass
class RunRecord:
    """One run folder, read: run.json (None when missing or unreadable) plus the five CSVs as typed DataFrames (columns
    = row model fields); `attempt` reads one attempt whole."""

    path: Path
    run_id: str
    info: RunInfo | None
    tasks: pd.DataFrame
    calls: pd.DataFrame
    events: pd.DataFrame
    samples: pd.DataFrame
    rounds: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    """What was tolerated while reading (missing files, torn rows), shown in the report."""
    rounds_derived: bool = False
    """The folder predates rounds.csv (schema version 5 and older): each attempt's rounds are derived."""

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.path)

    @property
    def config(self) -> SoakConfig | None:
        return self.info.config if self.info else None

    @property
    def host(self) -> Host:
        return self.info.host if self.info else Host()

    @property
    def sessions(self) -> list[Session]:
        return self.info.sessions if self.info else []

    @property
    def running(self) -> bool:
        """Not ended: still going, or stopped by a crash (run.json cannot tell these apart; the heartbeat can)."""
        return self.info is not None and not self.info.ended_at

    @cached_property
    def _by_attempt(self) -> tuple[dict[AttemptId, dict[str, Any]], dict[AttemptId, list[dict[str, Any]]],
                                   dict[AttemptId, list[dict[str, Any]]]]:
        """The counting rows by slot, the calls and the rounds by try: grouped once for the run (a DataFrame per
        attempt costs milliseconds each, minutes over 10k attempts)."""
        rows = {AttemptId.of(r).slot: r for r in records(self.tasks)}
        calls: dict[AttemptId, list[dict[str, Any]]] = {}
        for call in records(self.calls.sort_values(["call_index", "retry"], kind="stable")):
            calls.setdefault(AttemptId.of(call), []).append(call)
        rounds: dict[AttemptId, list[dict[str, Any]]] = {}
        for item in records(self.rounds.sort_values("round", kind="stable")):
            rounds.setdefault(AttemptId.of(item), []).append(item)
        return rows, calls, rounds

    def attempt_ids(self) -> list[AttemptId]:
        """The try of each row of `tasks` (the one that counts), in its order: what `attempt` takes."""
        return [AttemptId.of(row) for row in records(self.tasks[list(ATTEMPT_COLUMNS)])]

    def attempt(self, attempt: AttemptId, *, strict: bool = True) -> AttemptRecord:
        """The try that counts of `attempt`'s slot (its row in `tasks`), typed; a value its model refuses raises
        ValidationError, or with `strict` False is kept as read (the report shows an outcome of a later version).
        KeyError when tasks.csv has no such row."""
        rows, calls, rounds = self._by_attempt
        row = model_of(rows[attempt.slot], TaskRow, strict)
        counted, layout = row.attempt, self.layout.attempt(attempt)
        return AttemptRecord(row, layout, [model_of(call, CallRow, strict) for call in calls.get(counted, [])],
                             derived_rounds(row, layout) if self.rounds_derived
                             else [model_of(item, RoundRow, strict) for item in rounds.get(counted, [])])


def _kind(annotation: Any) -> str:
    """'int' | 'float' | 'bool' | 'str' for a row field, looking through `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if annotation is bool:
        return "bool"
    if annotation in (int, float):
        return "float" if annotation is float else "int"
    return "str"


def _column_kinds(model: type[Row]) -> dict[str, tuple[str, Any, bool]]:
    """name -> (kind, default, required), in the CSV's column order."""
    fields = model.model_fields
    return {name: (_kind(fields[name].annotation), fields[name].default, fields[name].is_required())
            for name in model.columns()}


def _parse(text: str, text_columns: list[str]) -> pd.DataFrame:
    """CSV text -> DataFrame (numbers parsed by pandas, text kept as text); a malformed body falls back to the csv
    module, keeping whole rows only."""
    try:
        return pd.read_csv(io.StringIO(text), dtype=dict.fromkeys(text_columns, str), keep_default_na=False,
                           na_values=[""], on_bad_lines="skip", low_memory=False, float_precision="round_trip")
    except (pd.errors.ParserError, csv.Error, ValueError):
        rows = list(csv.reader(io.StringIO(text), strict=False))
        if not rows:
            return pd.DataFrame()
        header = rows[0]
        return pd.DataFrame([r for r in rows[1:] if len(r) == len(header)], columns=header, dtype=str)


def read_table(path: Path, model: type[Row], notes: list[str]) -> pd.DataFrame:
    """One CSV as a DataFrame with every field of `model`, typed; missing columns get the model's default and a
    column of an older schema version is read under its new name (`Row.former_names`)."""
    kinds = _column_kinds(model)
    data = b""
    if path.is_file():
        data = path.read_bytes()
    elif path.parent.is_dir():
        notes.append(f"{path.name}: missing")
    keep = complete_length(data)
    if keep < len(data):
        # Rows are appended whole; bytes after the last complete row are a write in flight or a crash.
        notes.append(f"{path.name}: ignored a torn last row ({len(data) - keep} bytes)")
    text = data[:keep].decode("utf-8", errors="replace")
    text_columns = [name for name, (kind, _, _) in kinds.items() if kind in ("str", "bool")]
    frame = _parse(text, text_columns) if text.strip() else pd.DataFrame()
    frame = frame.rename(columns=str.strip)
    frame = frame.rename(columns={old: new for old, new in model.former_names.items() if new not in frame.columns})
    out: dict[str, pd.Series[Any]] = {}
    for name, (kind, default, _) in kinds.items():
        raw = frame[name] if name in frame.columns else pd.Series([None] * len(frame), dtype=object)
        raw = raw.reset_index(drop=True)
        if kind in ("int", "float"):
            numbers = raw if pd.api.types.is_numeric_dtype(raw) else pd.to_numeric(raw, errors="coerce")
            if default is not None and not isinstance(default, bool) and isinstance(default, int | float):
                numbers = numbers.fillna(default)
            out[name] = numbers.astype(float)
        elif kind == "bool":
            out[name] = raw.fillna("").astype(str).str.strip().str.lower().isin(TRUE_WORDS)
        else:
            fallback = default if isinstance(default, str) else ""
            out[name] = raw.fillna(fallback).astype(str)
    table = pd.DataFrame(out, columns=list(kinds))
    required = [name for name, (kind, _, needed) in kinds.items() if needed and kind in ("int", "float")]
    unreadable = table[required].isna().any(axis=1)
    if unreadable.any():
        notes.append(f"{path.name}: skipped {int(unreadable.sum())} rows with unreadable required fields")
        table = table[~unreadable].reset_index(drop=True)
    return table


def read_rows(path: Path, model: type[R]) -> Iterator[R]:
    """Rows of a CSV written by CsvLog, as models: read_table's rows, in file order (an empty cell is None where
    the field allows it; a torn last row and rows missing a required number are left out, a bad value raises)."""
    if not path.exists():
        return
    yield from _models(read_table(path, model, []), model)


def latest_attempts(tasks: pd.DataFrame) -> pd.DataFrame:
    """The supersede rule: of the rows of the same slot (AttemptId.slot) only the last written counts (a later
    session's re-run, or a retry in the same session of a try lost with its cluster node); the rows kept stay in file
    order."""
    if tasks.empty:
        return tasks
    return tasks.drop_duplicates(list(SLOT_COLUMNS), keep="last")


def read_attempts(path: Path) -> list[TaskRow]:
    """The rows of tasks.csv that count (`latest_attempts`), in file order."""
    if not path.exists():
        return []
    return list(_models(latest_attempts(read_table(path, TaskRow, [])), TaskRow))


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as dicts by column (read_table's columns are field names), an empty number None (looked for in
    the columns that have one only: a check of every value costs seconds over 100k calls)."""
    found = cast(list[dict[str, Any]], frame.to_dict("records"))
    empty = [name for name in frame.columns if frame[name].dtype.kind == "f" and frame[name].isna().any()]
    for record in found if empty else []:
        for name in empty:
            if record[name] != record[name]:  # NaN
                record[name] = None
    return found


def model_of(values: dict[str, Any], model: type[R], strict: bool = True) -> R:
    """One of `records` as its model; a value the model refuses raises ValidationError, or without `strict` is kept as
    read_table typed it."""
    try:
        return model.model_validate(values)
    except ValidationError:
        if strict:
            raise
    kinds = _column_kinds(model)
    kept: dict[str, Any] = {k: int(v) if kinds[k][0] == "int" and isinstance(v, float) and v.is_integer() else v
                            for k, v in values.items() if k in kinds}
    return model.model_construct(**kept)


def _models(frame: pd.DataFrame, model: type[R]) -> Iterator[R]:
    for record in records(frame):
        yield model_of(record, model)


def read_info(path: Path, notes: list[str]) -> RunInfo | None:
    """run.json through RunInfo, leniently, for readers (a resume reads it strictly: RunFolder.read_info): keys it does
    not know are ignored, a field it cannot read is left at its default and noted (run_id: the folder's name;
    created_at: 0 and config: None, unknown); None when the file is missing or no JSON object."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        notes.append("run.json: missing")
        return None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        notes.append(f"run.json: unreadable ({error})")
        return None
    if not isinstance(data, dict):
        notes.append("run.json: unreadable (not a JSON object)")
        return None
    known = {key: value for key, value in data.items() if key in RunInfo.model_fields}
    fallback = {"run_id": path.parent.name, "created_at": 0.0, "config": None, "limits": {}}
    try:
        return RunInfo.model_validate({**fallback, **known})
    except ValidationError as error:
        bad = sorted({str(problem["loc"][0]) for problem in error.errors() if problem["loc"]})
        notes.append(f"run.json: unreadable {', '.join(bad)} (read as unknown)")
        return RunInfo.model_validate({**fallback, **{k: v for k, v in known.items() if k not in bad}})


def load_run(path: Path) -> RunRecord:
    """Read a run folder; anything missing becomes an empty table and a note, never an error. `tasks` holds the
    attempts that count (`latest_attempts`); `calls` keeps every call, a superseded attempt's too (served is
    served)."""
    path = Path(path)
    if not path.is_dir():
        raise BadInput(f"{path}: not a run folder")
    notes: list[str] = []
    layout = RunLayout(path)
    info = read_info(layout.info, notes)
    derived = not layout.rounds.is_file()
    # A folder without rounds.csv is one of schema version 5 or older, not one missing a file.
    tables = {name: read_table(getattr(layout, name), model, [] if derived and name == "rounds" else notes)
              for name, model in TABLES.items()}
    if derived and layout.tasks.is_file():
        notes.append("rounds.csv: none (schema version 5 or older): each round is derived from its folder's test "
                     "output")
    every = tables["tasks"]
    tables["tasks"] = latest_attempts(every).reset_index(drop=True)
    if superseded := len(every) - len(tables["tasks"]):
        notes.append(f"tasks.csv: {superseded} rows superseded by a later attempt of the same task and cycle "
                     "(a retry, the redo of a cancelled attempt or of one lost with its node); they stay in the file")
    for name in ("tasks", "calls", "events", "samples"):
        tables[name].sort_values("at" if name in ("events", "samples") else "started_at", inplace=True, kind="stable",
                                 ignore_index=True)
    run_id = info.run_id if info else path.name
    return RunRecord(path=path, run_id=run_id, info=info, notes=notes, rounds_derived=derived, **tables)


RUN_NAME_START = re.compile(r"^(\d{8}-\d{6})")
"""A default run id starts with its start time (`soak run` names it `%Y%m%d-%H%M%S-xxxx`)."""


def created_at(path: Path) -> float | None:
    """When a run was made: run.json's `created_at`, else the start time its name begins with; None if neither."""
    info = read_info(RunLayout(path).info, [])
    if info is not None and info.created_at:
        return info.created_at
    match = RUN_NAME_START.match(path.name)
    if match:
        with contextlib.suppress(ValueError, OverflowError):
            return time.mktime(time.strptime(match[1], "%Y%m%d-%H%M%S"))
    return None


def run_folders(root: Path | None = None) -> list[Path]:
    """Run folders under the data dir, oldest first by `created_at` (folders that tell no time first, by name).

    The one ordering of runs: `soak report`, `soak status`, `soak runs` and `--resume` all pick "the latest" here."""
    root = root or data_dir()
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and RunLayout(p).is_run()]
    return sorted(found, key=lambda p: (created_at(p) or 0.0, p.name))


def resolve_run_dir(ref: str | Path | None) -> Path:
    """A run id (under the data dir) or a folder path -> the run folder; None -> the latest run."""
    if ref is None:
        runs = run_folders()
        if not runs:
            raise BadInput(f"no runs in {data_dir()}/ yet: start one with `soak run`, or pass a run folder")
        return runs[-1]
    candidate = Path(ref)
    if candidate.is_dir():
        return candidate
    under_data = data_dir() / str(ref)
    if under_data.is_dir():
        return under_data
    known = ", ".join(p.name for p in run_folders()[-5:]) or "none"
    raise BadInput(f"no run '{ref}': not a folder, nor a run id in {data_dir()}/ (latest: {known})")


def sweep_folder(ref: str | Path) -> Path | None:
    """A sweep id (under data/sweeps/) or a sweep folder -> its folder; None when `ref` names no sweep."""
    for candidate in (Path(ref), sweeps_dir() / str(ref)):
        if (candidate / "sweep.json").is_file():
            return candidate
    return None


def load_sweep(ref: str | Path) -> tuple[Path, SweepInfo]:
    """A sweep's folder and its sweep.json; an unknown id lists the latest sweeps."""
    folder = sweep_folder(ref)
    if folder is None:
        known = sorted(p.parent.name for p in sweeps_dir().glob("*/sweep.json"))
        listed = ", ".join(known[-5:]) or "none"
        raise BadInput(f"no sweep '{ref}' in {sweeps_dir()} (sweeps: {listed})")
    return folder, load_model(folder / "sweep.json", SweepInfo, "sweep file")


def time_span(run: RunRecord) -> tuple[float, float]:
    """Start and end of the run in unix seconds; a run still going ends at its latest record."""
    stamps = [run.tasks["ended_at"].max(), run.calls["started_at"].max(), run.events["at"].max(),
              run.samples["at"].max()]
    seen = [s for s in stamps if pd.notna(s)]
    firsts = [run.tasks["started_at"].min(), run.calls["started_at"].min(), run.events["at"].min(),
              run.samples["at"].min()]
    info = run.info
    start = known_time(info.started_at if info else None) or min((f for f in firsts if pd.notna(f)), default=0.0)
    end = known_time(info.ended_at if info else None) or max(seen, default=start)
    return float(start), float(max(end, start))


def known_time(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value > 0 else None
