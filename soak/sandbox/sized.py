"""A jailed agent's writable folders on one sized filesystem: its workspace and its HOME (TMPDIR lies in it) are
folders of a tmpfs of the disk cap's size, mounted inside the jail's mount namespace only, so the kernel refuses the
write that would pass the cap (ENOSPC), files unlinked but held open included, where a poll of host folders saw it
only once passed.

The tmpfs has no path in the harness's mount namespace: a first step in the jail, before anything untrusted
(soak.sandbox.handoff), hands the harness a descriptor of it. Through that descriptor the harness fills it from the
host's folders, lets the command start, watches it for being full (the run is then over its cap and killed, as a
passed cap was), and once nothing of the run is alive copies the folders back over the host's: between rounds and
after the attempt the workspace and HOME are on the host as the run left them, as with a bind mount.

A copy goes by descriptor, links not followed, at any depth (soak.sandbox.rootfs.walk), keeps folders, regular files,
symbolic links and pipes (no setuid or setgid bit, no socket or device), and is bounded as the poll of a host folder
is: files at their length and entries counted (a hard link or a sparse file of the run copies whole, so a run whose
folders hold more than the cap that way is over it too).
"""

import contextlib
import errno
import os
import socket
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from soak.sandbox.disk import MAX_ENTRIES, remove_tree
from soak.sandbox.handoff import GO
from soak.sandbox.rootfs import FOLDER, NOBODY, walk
from soak.sandbox.visible import Mount, in_jail, sized

HANDOFF = Path(__file__).with_name("handoff.py")
HOME_NAME = "home"
"""The HOME's folder beside the workspace on the tmpfs (the workspace is `workspace`: soak.record.layout)."""
FILLED = (errno.ENOSPC, errno.EDQUOT)
SENT = 16 << 20
"""The most one sendfile call copies."""
WATCH_SECONDS = 0.002
"""Between two looks at a run's tmpfs: a run that fills it and frees it at once (it exits on ENOSPC, its unlinked
files closed with it) must still be found to have filled it; a look is one fstatvfs."""


@dataclass
class Budget:
    """What one copy may still take: bytes (regular files at their length) and entries."""

    bytes: int
    entries: int = MAX_ENTRIES

    def take(self, info: os.stat_result) -> bool:
        self.entries -= 1
        self.bytes -= info.st_size if stat.S_ISREG(info.st_mode) else 0
        return self.entries >= 0 and self.bytes >= 0


def copy_file(fd: int, name: str, size: int, dest: int, mode: int) -> None:
    """A regular file's first `size` bytes into a new file of the same name in `dest`; one the run made unreadable is
    opened again once its owner (the harness's user) has made it readable."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        source = os.open(name, flags, dir_fd=fd)
    except PermissionError:
        os.chmod(name, 0o600, dir_fd=fd, follow_symlinks=False)
        source = os.open(name, flags, dir_fd=fd)
    try:
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dest)
        try:
            while size > 0 and (sent := os.sendfile(target, source, None, min(size, SENT))):
                size -= sent
            os.fchmod(target, mode)
        finally:
            os.close(target)
    finally:
        os.close(source)


def copy_entry(fd: int, name: str, info: os.stat_result, dest: int, owner: int | None) -> None:
    """One entry of a tree into the folder `dest`: a folder (open to its owner while the copy fills it), a regular
    file, a symbolic link or a pipe, no setuid or setgid bit; a socket or a device is left out."""
    mode = stat.S_IMODE(info.st_mode) & 0o1777
    if stat.S_ISDIR(info.st_mode):
        os.mkdir(name, 0o700, dir_fd=dest)
        os.chmod(name, mode | 0o700, dir_fd=dest)
    elif stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=fd), name, dir_fd=dest)
    elif stat.S_ISREG(info.st_mode):
        copy_file(fd, name, info.st_size, dest, mode | 0o600)
    elif stat.S_ISFIFO(info.st_mode):
        os.mkfifo(name, mode, dir_fd=dest)
    else:
        return
    if owner is not None:
        os.chown(name, owner, owner, dir_fd=dest, follow_symlinks=False)


class Mirror:
    """Where a copy writes, kept beside the walk of its source one folder at a time: a folder's copy is entered from
    its parent's and left through its '..', so that one descriptor does at any depth (as soak.sandbox.rootfs.walk);
    a folder whose copy cannot be entered has its tree left out."""

    def __init__(self, fd: int) -> None:
        self.fd, self.depth = fd, 0
        self.skip: int | None = None
        """The depth from which entries are left out, inside a folder not entered."""

    def move(self, fd: int, depth: int) -> None:
        os.close(self.fd)
        self.fd, self.depth = fd, depth

    def at(self, here: tuple[str, ...]) -> int | None:
        """The copy of the folder `here` (the walk's, which enters only the folder it gave last), or None where its
        tree is left out."""
        if self.skip is not None and len(here) >= self.skip:
            return None
        self.skip = None
        while self.depth > len(here):
            self.move(os.open("..", FOLDER, dir_fd=self.fd), self.depth - 1)
        if len(here) == self.depth + 1:
            try:
                self.move(os.open(here[-1], FOLDER, dir_fd=self.fd), len(here))
            except OSError:
                self.skip = len(here)
                return None
        return self.fd


def copy_tree(source: str, source_fd: int | None, dest: str, dest_fd: int | None, budget: Budget,
              owner: int | None = None) -> bool:
    """Copy the tree in the folder `source` into the existing folder `dest` (each found from its `*_fd` folder when
    relative), each entry given to `owner` where one is named. An entry that cannot be copied is left out, but a full
    file system raises; False, the copy stopped, once the budget is spent."""
    mirror = Mirror(os.open(dest, FOLDER, dir_fd=dest_fd))
    try:
        for fd, here, name, info in walk(source, dir_fd=source_fd):
            if (folder := mirror.at(here)) is None:
                continue
            if not budget.take(info):
                return False
            try:
                copy_entry(fd, name, info, folder, owner)
            except OSError as error:
                if error.errno in FILLED:
                    raise
        return True
    finally:
        os.close(mirror.fd)


class SizedDisk:
    """The sized tmpfs of one jailed run of an agent: the workspace at its own path, HOME beside it (`home`, where the
    agent finds it), on a tmpfs over the workspace's parent inside the jail. Use: `mounts` and `harness` to wrap,
    `command` before the command, `passed` among the launch's inherited descriptors; the launch calls `fill` once
    started, `full` while it runs and `empty` once nothing of it is alive."""

    def __init__(self, workspace: Path, home: Path, size: int, kind: str) -> None:
        if workspace.name == HOME_NAME:
            raise ValueError(f"a workspace named {HOME_NAME!r} would be its own HOME on the tmpfs")
        self.top, self.size = workspace.parent, size
        self.folders = {workspace.name: workspace, HOME_NAME: home}
        """Name on the tmpfs: host folder; the workspace first, which gets the copy's budget first."""
        self.home = self.top / HOME_NAME
        # The jailed user is nobody when soak is root (soak.sandbox.jail): it must own what it finds.
        self.owner = NOBODY if os.geteuid() == 0 and kind in ("bwrap", "unshare") else None
        self.outer, self.inner = socket.socketpair()
        self.fd: int | None = None
        self.overflow = self.seen_full = False
        self.over = threading.Event()
        self.watcher: threading.Thread | None = None
        self.error: OSError | None = None
        self.harness = (HANDOFF,)

    def mounts(self) -> tuple[Mount, ...]:
        return sized(self.top, self.size, [self.top / name for name in self.folders])

    def command(self) -> list[str]:
        return [sys.executable, "-I", "-S", str(in_jail(HANDOFF)), str(self.inner.fileno()), str(self.top), "--"]

    @property
    def passed(self) -> tuple[int, ...]:
        return (self.inner.fileno(),)

    def fill(self, seconds: float) -> None:
        """Take the jail's descriptor within `seconds` (the run's wall clock), fill the tmpfs from the host's folders
        and let the command start. Folders that do not fit leave it full and the command unstarted (the run is over
        its cap from the first); no descriptor (the launcher failed first) leaves the run to end by itself."""
        self.inner.close()  # the jail holds the only other end now: it reads as closed once the jail is gone
        self.outer.settimeout(seconds)
        try:
            with contextlib.suppress(OSError):
                _, fds, _, _ = socket.recv_fds(self.outer, 1, 1)
                self.fd = fds[0] if fds else None
            if self.fd is None:
                return
            info = os.fstatvfs(self.fd)
            if not self.size <= info.f_blocks * info.f_frsize < self.size + info.f_frsize:
                raise OSError(errno.EINVAL, f"the jail handed over a file system of {info.f_blocks} blocks, not the "
                                            f"tmpfs of {self.size} bytes")
            for name, host in self.folders.items():
                if not copy_tree(str(host), None, name, self.fd, Budget(self.size), self.owner):
                    raise OSError(errno.ENOSPC, f"{host} holds more than {self.size} bytes")
            self.outer.sendall(GO)
            self.watcher = threading.Thread(target=self.watch, args=(self.fd,), name="soak-disk-watch", daemon=True)
            self.watcher.start()
        except OSError as error:
            self.overflow = error.errno in FILLED
            self.error = None if self.overflow else error
        finally:
            self.outer.close()

    def at_cap(self, fd: int) -> bool:
        """Not a block left on the tmpfs (a write failed, or would, with ENOSPC), or more entries than a run may
        make."""
        info = os.fstatvfs(fd)
        return info.f_bavail == 0 or info.f_files - info.f_ffree - 1 - len(self.folders) > MAX_ENTRIES

    def watch(self, fd: int) -> None:
        """Look at the tmpfs until it is found at its cap or the run is over (`over`, set before `fd` closes)."""
        while not self.over.wait(WATCH_SECONDS):
            if self.at_cap(fd):
                self.seen_full = True
                return

    def full(self) -> bool:
        """Whether the run reached its cap: folders that did not fit, or the tmpfs found at it, now or by `watch`."""
        return self.overflow or self.seen_full or (self.fd is not None and self.at_cap(self.fd))

    def empty(self) -> bool:
        """Once nothing of the run is alive: each host folder replaced by its copy from the tmpfs, and whether the run
        was at or over its cap (`full`, or folders that hold more than it at their files' lengths). A run that never
        started leaves the host's folders as they were; the harness's own failure to fill them is raised here, after
        the launch has cleaned up."""
        self.over.set()
        if self.watcher is not None:
            self.watcher.join()
        try:
            if self.error is not None:
                raise self.error
            if self.fd is None or self.overflow:
                return self.overflow
            over, budget = self.full(), Budget(self.size)
            for name, host in self.folders.items():
                remove_tree(host)
                host.mkdir(exist_ok=True)
                over = not copy_tree(name, self.fd, str(host), None, budget) or over
            return over
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
