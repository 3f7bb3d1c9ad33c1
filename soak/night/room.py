"""Room on disk. A night whose run folder's filesystem (or the temporary one its judges use) fills up pauses: no new
attempt starts, the attempts the full disk cut short are recorded `cancelled` (error kind `DiskFull`) once there is
room and tried again, and a finished attempt's row waits for room instead of being lost. Events and samples that
find no room are counted, not written (soak.record.folder). No room within the error budget's wait for the stack
ends the night (`disk_full`), and a resume redoes what was cut short."""

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from soak.errors import DiskFull, is_disk_full
from soak.record.folder import RunFolder
from soak.record.schema import TaskRow

ROOM_BYTES = 64 << 20
"""Free bytes on every filesystem the night writes to before attempts start again: room for a few attempts' folders
and rows, so the first one after the pause does not fill the disk at once (a twentieth of a smaller filesystem)."""
ROOM_SHARE = 20
CHECK_SECONDS = 1.0
DISK_FULL = "DiskFull"
"""The error kind of an attempt a full disk cut short."""


def unless_full(write: Callable[[], object]) -> None:
    """`write()`, skipped when the disk is full: run.json is written again at the next heartbeat."""
    try:
        write()
    except OSError as error:
        if not is_disk_full(error):
            raise


def free_bytes(paths: list[Path]) -> int:
    return min(shutil.disk_usage(path).free for path in paths)


def roomy(paths: list[Path]) -> bool:
    """Every filesystem of `paths` has ROOM_BYTES free, or a twentieth of itself where that is less."""
    usage = [shutil.disk_usage(path) for path in paths]
    return all(use.free >= min(ROOM_BYTES, use.total // ROOM_SHARE) for use in usage)


def size_text(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"


class Room:
    """The night's one wait for room: the first lane that finds the disk full starts it, the others wait on it."""

    def __init__(self, folder: RunFolder, timeout: float, pause: Callable[[], None], go_on: Callable[[], None],
                 give_up: Callable[[str], None], stopped: Callable[[], bool]):
        self.folder, self.timeout = folder, timeout
        self.pause, self.go_on, self.give_up, self.stopped = pause, go_on, give_up, stopped
        """`stopped`: the night stops (a signal, a deadline): the wait ends at once, a resume redoes the rest."""
        self.paths = [folder.path, Path(tempfile.gettempdir())]
        self.waiting: asyncio.Task[bool] | None = None
        self.given_up = False

    async def wait(self, why: str) -> bool:
        """True once there is room again; False when there was none within the wait (the night then stops)."""
        if self.given_up or self.stopped():
            return False
        if self.waiting is None:
            self.waiting = asyncio.create_task(self.until_room(why))
        return await asyncio.shield(self.waiting)  # one lane cancelled must not end the others' wait

    async def until_room(self, why: str) -> bool:
        self.pause()
        self.folder.event("pause", f"no room on disk ({why}; {size_text(free_bytes(self.paths))} free): new attempts "
                          f"wait up to {self.timeout:g} s for {size_text(ROOM_BYTES)} (a twentieth of a smaller "
                          "disk); free space, or `soak stop`")

        @retry(stop=stop_after_delay(self.timeout), wait=wait_fixed(CHECK_SECONDS),
               retry=retry_if_result(lambda ok: not ok), retry_error_callback=lambda _: False)
        async def room_or_stop() -> bool:
            return self.stopped() or roomy(self.paths)

        found = await room_or_stop()
        self.waiting = None
        if self.stopped():
            return False
        if not found:
            self.given_up = True
            self.give_up(f"no room on disk for {self.timeout:g} s; free space, then soak run --resume "
                         f"{self.folder.run_id}")
            return False
        unwritten = dict(self.folder.unwritten)
        self.folder.unwritten.clear()
        self.folder.event("unpause", f"room on disk again; not written meanwhile: {unwritten or 'nothing'}")
        self.go_on()
        return True

    async def recorded(self, record: Callable[[TaskRow], None], row: TaskRow) -> None:
        """`record(row)`, waiting for room while the disk is full; with no room in time, a resume redoes it."""
        while True:
            try:
                return record(row)
            except DiskFull as full:
                if not await self.wait(str(full)):
                    return
