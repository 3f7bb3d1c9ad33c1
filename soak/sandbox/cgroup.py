"""A cgroup per contained run, where soak may create one: its memory counted whatever form it takes (anonymous,
memfd, /dev/shm and tmpfs pages are charged to the cgroup that touched them; RLIMIT_AS sees none of the last three
unless mapped), its processes bounded (a fork bomb meets `pids.max`), an OOM kill seen, and every process in it
killed at the end whoever it became.

cgroup v2 where the unified hierarchy offers the memory and pids controllers to soak's own cgroup; else cgroup v1's
memory and pids hierarchies (hybrid hosts); else none, and the rlimits alone hold (`soak doctor` says which, the
docs/trust/sandbox.md states the gap). Creating one needs write access there: root, or a subtree delegated to soak's
user."""

import contextlib
import os
import signal
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Hierarchy:
    """Where soak's run cgroups go: the parent folder of each controller (one for v2, memory and pids for v1)."""

    version: int
    memory: Path
    pids: Path


def own_paths() -> dict[str, str]:
    """This process's cgroup path per controller list of /proc/self/cgroup ('' is the unified hierarchy)."""
    paths = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(","):
                paths[name] = path
    return paths


def mounts(fstype: str) -> list[tuple[str, str]]:
    """(mount point, options) of every mount of a file system type."""
    return [(part.mountpoint, part.opts) for part in psutil.disk_partitions(all=True) if part.fstype == fstype]


def writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def unified() -> Hierarchy | None:
    """cgroup v2: soak's own cgroup, when it may make children there with memory and pids enabled."""
    own = own_paths().get("")
    for mountpoint, _ in mounts("cgroup2"):
        parent = Path(mountpoint) / (own or "/").lstrip("/")
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            offered = (parent / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if not {"memory", "pids"} <= set(offered) or not writable_dir(parent):
            continue
        if not {"memory", "pids"} <= set(enabled):
            try:  # fails while soak's own cgroup holds processes and is not the root (no internal processes)
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError:
                continue
        return Hierarchy(2, parent, parent)
    return None


def legacy() -> Hierarchy | None:
    """cgroup v1: the memory and pids hierarchies, at soak's own place in each."""
    own, found = own_paths(), {}
    for mountpoint, options in mounts("cgroup"):
        for controller in ("memory", "pids"):
            if controller in options.split(","):
                found[controller] = Path(mountpoint) / own.get(controller, "/").lstrip("/")
    if set(found) == {"memory", "pids"} and all(writable_dir(path) for path in found.values()):
        return Hierarchy(1, found["memory"], found["pids"])
    return None


@cache
def hierarchy() -> Hierarchy | None:
    """The hierarchy soak's run cgroups go in on this host, found once per process; None: rlimits only."""
    return unified() or legacy()


def described() -> str:
    """What counts a run's memory here, for `soak doctor` and the verdicts."""
    found = hierarchy()
    if found is None:
        return ("rlimits only: no cgroup soak may create here (run as root, or delegate a cgroup v2 subtree with "
                "memory and pids to soak's user); memfd, /dev/shm and tmpfs pages are bounded by their sizes only")
    return (f"a cgroup v{found.version} per run ({found.memory}): anonymous, memfd, shm and tmpfs pages count "
            "against the memory limit, pids.max bounds forks")


class RunCgroup:
    """One run's cgroup: made before the launcher starts (which joins it before exec), removed after the run."""

    def __init__(self, memory_bytes: int, max_pids: int) -> None:
        found = hierarchy()
        assert found is not None
        self.version = found.version
        name = f"soak-{uuid.uuid4().hex[:16]}"
        self.folders = list(dict.fromkeys([found.memory / name, found.pids / name]))
        self.memory, self.pids = found.memory / name, found.pids / name
        self.procs = [str(folder / "cgroup.procs") for folder in self.folders]
        try:
            for folder in self.folders:
                folder.mkdir()
            self.limit(memory_bytes, max_pids)
        except OSError:
            self.remove()
            raise

    def limit(self, memory_bytes: int, max_pids: int) -> None:
        if self.version == 2:
            settings = {"memory.max": memory_bytes, "memory.swap.max": 0, "memory.oom.group": 1, "pids.max": max_pids}
            for key, value in settings.items():
                with contextlib.suppress(FileNotFoundError):  # memory.swap.max: absent without swap accounting
                    (self.memory / key).write_text(str(value))
        else:
            (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # memsw: only with swap accounting
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (self.pids / "pids.max").write_text(str(max_pids))

    def join(self) -> None:
        """Move the calling process in (a launcher's preexec function: everything it starts stays in). Under cgroup v1
        it moves its one thread, "0" written to `tasks`: the kernel then skips the global lock a whole process's move
        takes, and the RCU grace period that lock waits for (~6 ms of every run's start on a quiet host). The
        launcher is single-threaded there (just forked, before exec), so its thread is the whole process."""
        if self.version == 1:
            for folder in self.folders:
                with open(folder / "tasks", "w") as tasks:
                    tasks.write("0")
            return
        for path in self.procs:
            with open(path, "w") as procs:
                procs.write(str(os.getpid()))

    def members(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs:
            with contextlib.suppress(OSError):
                found.update(int(pid) for pid in Path(path).read_text().split())
        return sorted(found)

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in (self.memory / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def kill(self) -> list[psutil.Process]:
        """SIGKILL every process in the cgroup; the ones signalled, to wait for."""
        killed = []
        for pid in self.members():
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                process.send_signal(signal.SIGKILL)
                killed.append(process)
        return killed

    def remove(self) -> None:
        """Remove the folders once empty (a folder still busy is left: the kernel frees it with its last process)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()


def run_cgroup(memory_bytes: int, max_pids: int) -> RunCgroup | None:
    """A new cgroup for one run, or None where soak may not create one (the rlimits then hold alone)."""
    if hierarchy() is None:
        return None
    try:
        return RunCgroup(memory_bytes, max_pids)
    except OSError:
        return None
