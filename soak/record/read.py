"""The one reader of a run folder: its CSVs as typed DataFrames (read_table) or row models (read_rows, built on
read_table), run.json, and finding runs; tolerant of a run still going, missing files and a torn last row.

The supersede rule lives here too (`latest_attempts`): an attempt is (task_id, cycle), and of its rows in tasks.csv
only the latest session's counts, so a re-run (`soak run --resume RUN --retry infra_error`, or the redo of a cancelled
attempt) replaces the earlier row in every aggregate while the file keeps them all. `load_run` (report, route,
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
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from pydantic import BaseModel

from soak.errors import BadInput
from soak.files import load_model
from soak.paths import data_dir, sweeps_dir
from soak.record.folder import complete_length
from soak.record.layout import RunLayout
from soak.record.schema import CallRow, EventRow, Row, SampleRow, SweepInfo, TaskRow

R = TypeVar("R", bound=Row)


TABLES: dict[str, type[Row]] = {"tasks": TaskRow, "calls": CallRow, "events": EventRow, "samples": SampleRow}
TRUE_WORDS = {"true", "1", "yes", "t", "y"}


@dataclass
class RunRecord:
    """One run folder, read: run.json plus the four CSVs as typed DataFrames (columns = row model fields)."""

    path: Path
    run_id: str
    meta: dict[str, Any]
    tasks: pd.DataFrame
    calls: pd.DataFrame
    events: pd.DataFrame
    samples: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    """What was tolerated while reading (missing files, torn rows), shown in the report."""

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.path)

    @property
    def config(self) -> dict[str, Any]:
        config = self.meta.get("config")
        return config if isinstance(config, dict) else {}

    @property
    def sessions(self) -> list[dict[str, Any]]:
        sessions = self.meta.get("sessions")
        return [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []

    @property
    def running(self) -> bool:
        """Not ended: still going, or stopped by a crash (run.json cannot tell these apart; the heartbeat can)."""
        return bool(self.meta) and not self.meta.get("ended_at")


def _kind(annotation: Any) -> str:
    """'int' | 'float' | 'bool' | 'str' for a row field, looking through `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if annotation is bool:
        return "bool"
    if annotation in (int, float):
        return "float" if annotation is float else "int"
    return "str"


def _column_kinds(model: type[BaseModel]) -> dict[str, tuple[str, Any, bool]]:
    """name -> (kind, default, required)."""
    return {name: (_kind(f.annotation), f.default, f.is_required()) for name, f in model.model_fields.items()}


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
    out = {}
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


ATTEMPT_KEY = ["task_id", "cycle"]
"""What names one attempt across sessions: a re-run of it is a later row with the same key."""


def latest_attempts(tasks: pd.DataFrame) -> pd.DataFrame:
    """The supersede rule: a row of a later session with the same (task_id, cycle) supersedes the earlier ones, so
    only the rows of each attempt's latest session count; the rows kept stay in file order. (A session runs each
    (task_id, cycle) once, so that is one row per attempt in a real run.)"""
    if tasks.empty:
        return tasks
    latest = tasks.groupby(ATTEMPT_KEY, sort=False)["session"].transform("max")
    return tasks[tasks["session"] == latest]


def read_attempts(path: Path) -> list[TaskRow]:
    """The rows of tasks.csv that count (`latest_attempts`), in file order."""
    if not path.exists():
        return []
    return list(_models(latest_attempts(read_table(path, TaskRow, [])), TaskRow))


def _models(frame: pd.DataFrame, model: type[R]) -> Iterator[R]:
    for record in frame.to_dict("records"):
        yield model.model_validate({k: None if isinstance(v, float) and math.isnan(v) else v
                                    for k, v in record.items()})


def read_meta(path: Path, notes: list[str]) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        notes.append("run.json: missing")
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        notes.append(f"run.json: unreadable ({error})")
        return {}
    return meta if isinstance(meta, dict) else {}


def load_run(path: Path) -> RunRecord:
    """Read a run folder; anything missing becomes an empty table and a note, never an error. `tasks` holds the
    attempts that count (`latest_attempts`); `calls` keeps every call, a superseded attempt's too (served is
    served)."""
    path = Path(path)
    if not path.is_dir():
        raise BadInput(f"{path}: not a run folder")
    notes: list[str] = []
    layout = RunLayout(path)
    meta = read_meta(layout.info, notes)
    tables = {name: read_table(getattr(layout, name), model, notes) for name, model in TABLES.items()}
    every = tables["tasks"]
    tables["tasks"] = latest_attempts(every).reset_index(drop=True)
    if superseded := len(every) - len(tables["tasks"]):
        notes.append(f"tasks.csv: {superseded} rows superseded by a later attempt of the same task and cycle "
                     "(a retry or the redo of a cancelled attempt); they stay in the file")
    for frame in tables.values():
        time_column = "at" if "at" in frame.columns else "started_at"
        frame.sort_values(time_column, inplace=True, kind="stable", ignore_index=True)
    run_id = str(meta.get("run_id") or path.name)
    return RunRecord(path=path, run_id=run_id, meta=meta, notes=notes, **tables)


RUN_NAME_START = re.compile(r"^(\d{8}-\d{6})")
"""A default run id starts with its start time (`soak run` names it `%Y%m%d-%H%M%S-xxxx`)."""


def created_at(path: Path) -> float | None:
    """When a run was made: run.json's `created_at`, else the start time its name begins with; None if neither."""
    try:
        value = json.loads(RunLayout(path).info.read_text()).get("created_at")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    except (OSError, ValueError, AttributeError):
        pass
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
