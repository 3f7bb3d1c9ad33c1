"""What a run leaves on disk, at any depth (untrusted code makes the tree; soak.sandbox.rootfs.walk goes by file
descriptor): its entries, its size against the cap (files its processes hold open after unlinking them included),
and its removal."""

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from soak.sandbox.rootfs import walk


def entries(root: Path) -> Iterator[tuple[Path, str, os.stat_result]]:
    """Every entry under `root`: its folder (relative to root), its name and its lstat, links not followed, top-down,
    at any depth (soak.sandbox.rootfs.walk: untrusted code makes the tree)."""
    for _, here, name, info in walk(str(root)):
        yield Path(*here), name, info


def held_unlinked(pids: list[int], devices: set[int]) -> int:
    """Bytes of the regular files that the run's processes hold open after unlinking them, on the file systems of the
    paths it writes: a walk of the tree cannot see them, the disk holds them all the same."""
    held: dict[tuple[int, int], int] = {}
    for pid in pids:
        with contextlib.suppress(OSError), os.scandir(f"/proc/{pid}/fd") as fds:
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path).endswith(" (deleted)"):
                        info = os.stat(fd.path)
                        if stat.S_ISREG(info.st_mode) and info.st_dev in devices:
                            held[(info.st_dev, info.st_ino)] = info.st_size
    return sum(held.values())


MAX_ENTRIES = 20_000
"""The most entries a run's writable folders may hold: a tree of absurdly many is over its cap whatever its bytes."""


def too_big(
    paths: tuple[Path, ...], limit: int, pids: list[int] | None = None, max_entries: int = MAX_ENTRIES
) -> bool:
    """Whether the files under `paths` and the unlinked ones the run's `pids` hold there exceed the byte limit (or
    the trees hold absurdly many entries)."""
    devices, total, count = set(), 0, 0
    for path in paths:
        with contextlib.suppress(OSError):
            devices.add(path.stat().st_dev)
        for *_, info in walk(str(path)):
            count += 1
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
            if total > limit or count > max_entries:
                return True
    return bool(pids) and total + held_unlinked(pids or [], devices) > limit


def remove_tree(path: Path) -> None:
    """Delete a workspace however deep (soak.sandbox.rootfs.walk), even where the solution made parts of it
    unwritable. Only once nothing of the run is alive: it leaves each folder through its '..'."""
    if not path.is_dir() or path.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return

    def rmdir(parent: int, name: str) -> None:
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=parent)

    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    for fd, _, name, info in walk(str(path), leave=rmdir):
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o700)  # its folder, so that it may be emptied
        if not stat.S_ISDIR(info.st_mode):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)
