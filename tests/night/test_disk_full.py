"""A night whose run folder's filesystem fills up: a real small tmpfs (mounted by the test, as root; elsewhere these
tests skip with the reason), filled while attempts run. The night pauses, keeps no partial row, charges nothing to
the stack, the model or itself, and carries on once there is room; with no room in time it stops with one line."""

import asyncio
import errno
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import soak.night.room as room
from soak.errors import DiskFull, exit_line
from soak.night.loop import Runner, SessionStart
from soak.record.folder import CsvLog, RowListener, RunFolder
from soak.record.schema import EventRow, RunLimits
from tests.night.test_loop import FakeTasks, Never, calls_of, make_tasks, new_folder, tasks_of

DISK_BYTES = 4 << 20


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs at tmp_path/disk: room is a twentieth of it free (soak.night.room.roomy)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.strip()}): needs root")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Fill the filesystem to its last byte: big writes, then ever smaller ones until none fits."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as error:
                assert error.errno == errno.ENOSPC
    return filler


class FreeOnPause(RowListener):
    """Frees the disk when the night says it waits for room: the test moves on by the night's events."""

    def __init__(self, filler: list[Path]):
        self.filler, self.pauses = filler, []

    def event(self, row: EventRow) -> None:
        if row.kind == "pause" and self.filler:
            self.pauses.append(row.detail)
            self.filler.pop().unlink()


def night(folder, info, config, tasks, listener=None):
    folder.open()
    if listener:
        folder.listeners.append(listener)
    try:
        return asyncio.run(Runner(folder, info, config, make_tasks(), tasks, SessionStart(Never())).run())
    finally:
        folder.close()


def test_a_row_that_finds_no_room_is_cut_back_whole(small_disk):
    log = CsvLog(small_disk / "calls.csv", EventRow)
    log.write(b"a,b\n")
    before = (small_disk / "calls.csv").read_bytes()
    fill(small_disk)
    with pytest.raises(DiskFull, match="No space left on device"):
        log.write(b"x" * 10_000 + b"\n")  # the file's last page has room for part of it: that part is cut back
    log.close()
    assert (small_disk / "calls.csv").read_bytes() == before


def test_events_that_find_no_room_are_counted_and_the_file_stays_whole(small_disk):
    folder = RunFolder(small_disk / "run")
    folder.open()
    try:
        fill(small_disk)
        for _ in range(3):
            folder.event("note", "x" * 5000)
    finally:
        folder.close()
    assert folder.unwritten["events.csv"] >= 2  # the file's last page held at most one
    assert len(pd.read_csv(folder.layout.events)) == 3 - folder.unwritten["events.csv"]


def test_a_full_disk_pauses_the_night_which_goes_on_once_there_is_room(small_disk):
    folder, info, config = new_folder(small_disk, RunLimits(max_tasks=12), concurrency=2)
    filler: list[Path] = []
    listener = FreeOnPause(filler)

    def on_attempt(n: int) -> None:
        if n == 5:
            filler.append(fill(small_disk))

    end = night(folder, info, config, FakeTasks(calls=3, hook=on_attempt, outcome=lambda t, n: "pass"), listener)
    assert end.reason == "tasks" and len(listener.pauses) == 1 and "no room on disk" in listener.pauses[0]
    rows = tasks_of(folder)  # every row whole: read_rows validates each
    cut = [r for r in rows if r.error_kind == room.DISK_FULL]
    assert cut and all(r.outcome == "cancelled" for r in cut)
    finished = [(r.cycle, r.repeat, r.task_id) for r in rows if r.outcome != "cancelled"]
    assert len(finished) == 12 == len(set(finished)) and {r.outcome for r in rows} == {"pass", "cancelled"}
    assert {(r.cycle, r.task_id) for r in cut} <= {(c, t) for c, _, t in finished}  # each tried again
    calls_of(folder)
    events = pd.read_csv(folder.path / "events.csv")
    unpause = events.loc[events["kind"] == "unpause", "detail"].iloc[0]
    assert unpause.startswith("room on disk again; not written meanwhile: ")


def test_no_room_in_time_ends_the_night_with_one_line_and_a_resume_finishes_it(small_disk):
    folder, info, config = new_folder(small_disk, RunLimits(max_tasks=12), concurrency=2)
    config = config.model_copy(update={"error_budget": config.error_budget.model_copy(
        update={"wait_for_stack_seconds": 1.0})})
    filler: list[Path] = []

    def on_attempt(n: int) -> None:
        if n == 5:
            filler.append(fill(small_disk))

    end = night(folder, info, config, FakeTasks(calls=3, hook=on_attempt, outcome=lambda t, n: "pass"))
    assert (end.reason, end.exit_code) == ("disk_full", 1)
    assert f"soak run --resume {folder.run_id}" in end.detail
    first = tasks_of(folder)
    assert first and all(r.outcome in ("pass", "cancelled") for r in first)
    filler.pop().unlink()
    end = night(folder, folder.read_info(), config, FakeTasks(calls=3, outcome=lambda t, n: "pass"))
    assert end.reason == "tasks"
    finished = [(r.cycle, r.repeat, r.task_id) for r in tasks_of(folder) if r.outcome != "cancelled"]
    assert len(finished) == 12 == len(set(finished))


def test_the_cli_says_a_full_disk_in_one_line():
    said, code = exit_line(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert code == 1 and said.startswith("error: no room on disk") and "soak run --resume" in said
    assert exit_line(OSError(errno.EACCES, "denied")) is None


def test_a_stop_ends_the_wait_for_room_at_once(small_disk):
    """`soak stop` (SIGTERM) while the night waits for room: it ends now, not after the error budget's wait."""
    folder, info, config = new_folder(small_disk, RunLimits(max_tasks=12), concurrency=2)

    def on_attempt(n: int) -> None:
        if n == 5:
            fill(small_disk)

    runner = Runner(folder, info, config, make_tasks(), FakeTasks(calls=3, hook=on_attempt,
                                                                  outcome=lambda t, n: "pass"), SessionStart(Never()))

    class StopOnPause(RowListener):
        def event(self, row: EventRow) -> None:
            if row.kind == "pause":
                runner.on_signal(signal.SIGTERM)

    folder.open()
    folder.listeners.append(StopOnPause())
    try:
        end = asyncio.run(runner.run())
    finally:
        folder.close()
    assert end.reason == "signal" and config.error_budget.wait_for_stack_seconds == 900
    assert all(r.outcome in ("pass", "cancelled") for r in tasks_of(folder))
