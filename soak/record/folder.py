"""Writing a run folder: append-only CSV logs (a crash tears at most the last row) and run.json."""

import csv
import io
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from soak.errors import BadInput, DiskFull, is_disk_full
from soak.files import write_atomic
from soak.record.layout import RunLayout
from soak.record.schema import (
    SCHEMA_VERSION,
    CallRow,
    EventKind,
    EventRow,
    RoundRow,
    Row,
    RunInfo,
    SampleRow,
    TaskRow,
)

# --- CSV writers --------------------------------------------------------------------------------

MAX_TEXT_CHARS = 32_000
"""Longest text kept in one CSV field (spreadsheets stop at 32,767); the middle of longer text is cut."""

R = TypeVar("R", bound=Row)


def clean_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """NUL bytes dropped (csv readers choke on them); over `limit`, head and tail kept around a marker."""
    text = text.replace("\x00", "")
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[: limit // 2]}…[truncated {cut} chars]{text[len(text) - limit // 2 :]}"


def csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    return str(value)


def encode_row(values: list[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue().encode("utf-8", "backslashreplace")


def complete_length(data: bytes) -> int:
    """Bytes up to the end of the last complete row: a newline outside quotes (an even count of quotes before it)."""
    quotes_before = data.count(b'"')
    hi = len(data)
    while (pos := data.rfind(b"\n", 0, hi)) >= 0:
        quotes_before -= data.count(b'"', pos, hi)
        if quotes_before % 2 == 0:
            return pos + 1
        hi = pos
    return 0


def repair_tail(path: Path) -> int:
    """Cut a row torn by a crash mid-write; returns the bytes dropped."""
    data = path.read_bytes()
    keep = complete_length(data)
    if keep < len(data):
        with path.open("r+b") as handle:
            handle.truncate(keep)
            os.fsync(handle.fileno())
    return len(data) - keep


HEAD_BYTES = 1 << 20
"""What check_columns reads of a CSV: its header and first row fit."""


def head(path: Path) -> tuple[list[str], list[str]]:
    """(header, first row) of a CSV, empty when missing; whole rows only (a header torn by a crash is written again on
    open: repair_tail)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(HEAD_BYTES)
    except FileNotFoundError:
        return [], []
    lines = csv.reader(io.StringIO(data[: complete_length(data)].decode("utf-8", errors="replace")))
    return next(lines, []), next(lines, [])


def written_with(header: list[str], first: list[str]) -> str:
    found = dict(zip(header, first, strict=False)).get("schema_version", "")
    return f"schema version {found}" if found.isdigit() else "another schema version"


def check_columns(path: Path, model: type[Row]) -> None:
    """An existing CSV can be appended to when its header is the model's columns, older names allowed (the reader
    maps them: a version 1 calls.csv says `attempt` where version 2 says `retry`); otherwise one line says which
    schema versions differ and what still works."""
    header, first = head(path)
    if not header or [model.former_names.get(name, name) for name in header] == model.columns():
        return
    raise BadInput(f"{path}: written with {written_with(header, first)}, whose {model.__name__} columns this soak "
                   f"(schema version {SCHEMA_VERSION}) cannot append to; report, route and compare still read it: "
                   "start a new run")


def check_rounds(layout: RunLayout) -> None:
    """A folder written before rounds.csv (schema version 5 and older) cannot be resumed: its earlier attempts' rounds
    would be missing from the file."""
    if layout.rounds.exists() or not layout.tasks.exists():
        return
    raise BadInput(f"{layout.path}: written with {written_with(*head(layout.tasks))}, before rounds.csv; this soak "
                   f"(schema version {SCHEMA_VERSION}) cannot append to it; report, route and compare still read it: "
                   "start a new run")


class CsvLog(Generic[R]):
    """Append-only CSV of one row model: one write() per row, so a crash tears at most the last one."""

    def __init__(self, path: Path, model: type[R], *, durable: bool = False):
        self.path, self.model, self.durable = path, model, durable
        self.columns = model.columns()
        check_columns(path, model)
        self.repaired_bytes = repair_tail(path) if path.exists() else 0
        self.lock = threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size == 0:
            self.write(encode_row(self.columns))

    def write(self, data: bytes) -> None:
        """The whole row or nothing: a write that finds no room is cut back to where the row began (DiskFull)."""
        with self.lock:
            start = os.fstat(self.fd).st_size
            try:
                while data:
                    data = data[os.write(self.fd, data) :]
                if self.durable:
                    os.fsync(self.fd)
            except OSError as error:
                if not is_disk_full(error):
                    raise
                os.ftruncate(self.fd, start)
                raise DiskFull(f"{self.path}: {error.strerror}") from error

    def append(self, row: R) -> None:
        """Write one row now; a durable log (tasks.csv) also fsyncs it."""
        if not isinstance(row, self.model):
            raise TypeError(f"{self.path.name} takes {self.model.__name__}, not {type(row).__name__}")
        self.write(encode_row([csv_value(getattr(row, column)) for column in self.columns]))

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


# --- the run folder -----------------------------------------------------------------------------

class RowListener:
    """Sees every row as it is written (the live view, the Prometheus exporter, the runner's pause on `down`);
    a listener overrides the kinds of row it reads, the others pass by."""

    def task(self, row: TaskRow) -> None:
        pass

    def call(self, row: CallRow) -> None:
        pass

    def event(self, row: EventRow) -> None:
        pass

    def sample(self, row: SampleRow) -> None:
        pass


class RunFolder:
    """`data/<run_id>/`: run.json, the five CSVs (opened for appending) and `work/<task>/<cycle>/`."""

    def __init__(self, path: Path):
        self.path = path
        self.layout = RunLayout(path)
        self.run_id = path.name
        self.listeners: list[RowListener] = []
        self.unwritten: Counter[str] = Counter()
        """Rows of events.csv and samples.csv that found no room (`kept`), by file name."""

    def check_columns(self) -> None:
        """Refuse (BadInput) before anything is written when a CSV cannot be appended to (check_columns)."""
        layout = self.layout
        for path, model in ((layout.tasks, TaskRow), (layout.calls, CallRow), (layout.events, EventRow),
                            (layout.samples, SampleRow), (layout.rounds, RoundRow)):
            check_columns(path, model)
        check_rounds(layout)

    def open(self) -> None:
        """Create or reopen the CSVs, repairing torn tails; tasks.csv is fsynced per row."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.check_columns()
        self.tasks = CsvLog(self.layout.tasks, TaskRow, durable=True)
        self.calls = CsvLog(self.layout.calls, CallRow)
        self.events = CsvLog(self.layout.events, EventRow)
        self.samples = CsvLog(self.layout.samples, SampleRow)
        self.rounds = CsvLog(self.layout.rounds, RoundRow)

    @property
    def logs(self) -> list[CsvLog[Any]]:
        return [self.tasks, self.calls, self.events, self.samples, self.rounds]

    def close(self) -> None:
        for log in self.logs:
            log.close()

    def record_task(self, row: TaskRow) -> None:
        self.tasks.append(row)
        for listener in self.listeners:
            listener.task(row)

    def record_call(self, row: CallRow) -> None:
        self.calls.append(row)
        for listener in self.listeners:
            listener.call(row)

    def record_round(self, row: RoundRow) -> None:
        self.rounds.append(row)

    def record_sample(self, row: SampleRow) -> None:
        """The telemetry writer (soak.stack.telemetry.Monitor's `write`)."""
        self.kept(self.samples, row)
        for listener in self.listeners:
            listener.sample(row)

    def event(self, kind: EventKind, detail: str = "", source: str = "runner") -> EventRow:
        row = EventRow(run_id=self.run_id, at=time.time(), kind=kind, source=source, detail=detail)
        self.kept(self.events, row)
        for listener in self.listeners:
            listener.event(row)
        return row

    def kept(self, log: CsvLog[R], row: R) -> None:
        """An event or a sample that finds no room is counted, not written: the night goes on without it (its
        listeners still see it), while an attempt's rows wait for room (soak.night.room)."""
        try:
            log.append(row)
        except DiskFull:
            self.unwritten[log.path.name] += 1

    def read_info(self) -> RunInfo:
        try:
            return RunInfo.model_validate_json(self.layout.info.read_text())
        except FileNotFoundError:
            raise BadInput(f"{self.path}: no run.json, not a run folder") from None
        except ValidationError as error:
            problems = error.error_count()
            raise BadInput(f"{self.layout.info}: not a run.json this soak version reads "
                           f"({problems} problems)") from None

    def write_info(self, info: RunInfo) -> None:
        write_atomic(self.layout.info, info.model_dump_json(indent=2))
