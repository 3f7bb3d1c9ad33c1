"""Contained processes: the isolation kinds, rlimits, a scrubbed environment, capped output, a wall clock, and
cleanup that leaves no process of a run alive. The sandbox (soak.sandbox) runs pytest through it.

Isolation is the best the host offers, probed once per process (a kind counts only if its containment holds):

- `bwrap`: bubblewrap with new pid, network, ipc and uts namespaces, the root built from the allow-list
  (soak.sandbox.visible), read-only but for the workspace, a new session, and death with the harness. When soak is
  root, the command runs as nobody (util-linux's setpriv, inside, drops to it with every capability gone): as uid 0 it
  could write any root-owned 0644 file the jail shows, and own what it leaves behind.
- `unshare` (soak runs as root) / `unshare-user` (through a user namespace): the same namespaces and the same root,
  built by soak.sandbox.rootfs as the namespace's first process, which then runs the command as nobody (or, in a
  nested user namespace, as no root at all) without capabilities; a shell is the namespace's pid 1.
- `session`: a plain new session behind a shell, killed by group and by a per-run environment marker; the harness
  still never is the parent nor in the group of untrusted code, but reads, writes and network are not contained.
"""

import contextlib
import ctypes
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict

from soak.sandbox.cgroup import RunCgroup, run_cgroup
from soak.sandbox.disk import too_big
from soak.sandbox.reaping import RUN_MARKER, exited, finish, namespace_init, processes, run_pids, signal_all, wait_exit
from soak.sandbox.rootfs import give
from soak.sandbox.sized import SizedDisk
from soak.sandbox.visible import JailView, allow_listed, bwrap_args, jail_root

MiB = 1 << 20
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
ISOLATION_KINDS = ("bwrap", "unshare", "unshare-user", "session")
"""Strongest first."""
NOBODY = 65534
DROP_TO_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all", "--no-new-privs", "--"]
"""Run as bubblewrap's command when soak is root: from uid 0 to nobody, no capability left, ever."""
BWRAP_AS_ROOT = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
"""bubblewrap started by root: no user namespace (its uid 0 would still be the host's root), every capability dropped
but the three setpriv needs to become nobody, which drops those too."""
LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
CHANNEL_CAP = 16 * MiB
ROOTFS = Path(__file__).with_name("rootfs.py")
"""Builds the allow-listed root under `unshare`; run as a file, before anything untrusted."""


class ResourceLimits(BaseModel):
    """Resource ceilings of one test run."""

    model_config = ConfigDict(extra="forbid")

    address_space_bytes: int = 2048 * MiB
    """RLIMIT_AS of every sandboxed process: a memory bomb meets MemoryError, not the machine's RAM. Also the memory
    limit of the run's cgroup, where soak may create one (soak.sandbox.cgroup), which counts what RLIMIT_AS misses:
    memfd, /dev/shm and tmpfs pages never mapped."""
    file_size_bytes: int = 64 * MiB
    """RLIMIT_FSIZE: the largest file a run may write."""
    workspace_bytes: int = 512 * MiB
    """All files of the workspace (and an agent's HOME), unlinked ones held open included. In a jail a tmpfs of this
    size (soak.sandbox.visible.sized) that refuses the write past it, and a run found at it is killed (DiskQuota); in
    a plain session polled, and past it the run is killed."""
    max_processes: int = 256
    """pids.max of the run's cgroup (where soak may create one): a fork bomb meets it, not the host's limit."""
    cpu_seconds: int | None = None
    """RLIMIT_CPU per process; None means twice the task's wall timeout plus 10 s."""
    open_files: int = 512
    """RLIMIT_NOFILE."""
    output_bytes: int = 64 * 1024
    """Pytest output kept: the first and last halves; the middle is counted and dropped."""
    grace_seconds: float = 1.0
    """Between SIGTERM and SIGKILL when the wall timeout hits."""
    entry_bytes: int = 1 * MiB
    """The largest entry file judged: a larger one fails (TooLarge) without being read whole, scanned or run."""


@dataclass
class Contained:
    """One contained process, finished."""

    returncode: int | None = None
    timed_out: bool = False
    over_quota: bool = False
    out_of_memory: bool = False
    """The run's cgroup saw the kernel kill a process for memory; the rest of the run was killed with it."""
    duration_s: float = 0.0
    output: str = ""
    stopped: bool = False
    """Ended early because the caller asked (an external agent whose budget the proxy saw spent, an attempt whose wall
    budget ended while its tests ran)."""
    channel: bytes = b""
    """What came through the result channel (`Wiring.channel`), capped at CHANNEL_CAP."""
    channel_overflow: bool = False


# --- isolation ---------------------------------------------------------------------------------------------------


def wrap(kind: str, ws: Path, cmd: list[str], view: JailView | None = None) -> list[str]:
    """The launcher command line of an isolation kind around the sandboxed command. Every kind but a plain session
    builds the same root from the allow-list and `view` (what the jail shows besides, soak.sandbox.visible): bubblewrap
    itself, `unshare` through soak.sandbox.rootfs."""
    if kind == "session":
        # A shell in between: a solution that kills its parent hits the shell, never the harness.
        return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *cmd]
    root = jail_root(ws, view or JailView())
    if kind == "bwrap":
        # bubblewrap started by root keeps every capability for the command unless told: a solution could unmount
        # the masks or mount the host's disk.
        if os.geteuid() == 0:
            unshare, cmd = BWRAP_AS_ROOT, [*DROP_TO_NOBODY, *cmd]
        else:
            unshare = ["--unshare-all", "--cap-drop", "ALL"]
        return ["bwrap", *bwrap_args(root), *unshare, "--die-with-parent", "--new-session", "--chdir", str(ws), "--",
                *cmd]
    user = ["--map-root-user"] if kind == "unshare-user" else []
    return ["unshare", *user, "--pid", "--fork", "--kill-child", "--net", "--mount", "--mount-proc", "--ipc", "--uts",
            "--", sys.executable, "-I", "-S", str(ROOTFS), kind, str(ws), json.dumps(root), "--", *cmd]


def works(kind: str) -> bool:
    """Whether an isolation kind can start the sandbox's Python on this host, and for those that build the
    allow-listed root, whether it holds: a file beside the workspace is absent, the root and the kernel's knobs are
    read-only, and the command is not root."""
    if kind != "session" and shutil.which(kind.split("-")[0]) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="soak-probe-") as tmp:
        ws, planted = Path(tmp).resolve() / "ws", Path(tmp).resolve() / "planted"
        ws.mkdir()
        planted.touch()
        check = (f"import os, sys; sys.exit(os.path.exists({str(planted)!r}) or os.access('/', os.W_OK) or "
                 "os.access('/proc/sys/kernel/core_pattern', os.W_OK) or os.geteuid() == 0)")
        cmd = wrap(kind, ws, [sys.executable, "-I", "-c", check if allow_listed(kind) else "pass"])
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(cmd, capture_output=True, timeout=30, cwd=ws).returncode == 0
    return False


@cache
def isolation_kind() -> str:
    """The strongest isolation that works on this host, probed once per process."""
    return next((kind for kind in ISOLATION_KINDS[:-1] if works(kind)), "session")


def scrubbed_env(ws: Path, token: str) -> dict[str, str]:
    """An allowlisted environment: no keys or tokens ever reach the solution."""
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    env = {name: value for name, value in env.items() if not any(m in name.upper() for m in SECRET_MARKERS)}
    env.update(HOME=str(ws / "home"), TMPDIR=str(ws / "tmp"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env[RUN_MARKER] = token
    return env


def rlimit_setter(limits: ResourceLimits, cpu_seconds: int, group: RunCgroup | None = None) -> Callable[[], None]:
    """A preexec function moving the launcher into the run's cgroup and setting the rlimits on it; every sandboxed
    process inherits both."""
    wanted = [
        (resource.RLIMIT_AS, limits.address_space_bytes),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_NOFILE, limits.open_files),
    ]

    def apply() -> None:
        # The launcher dies with the harness (bwrap and unshare then take the whole namespace down with them).
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if group is not None:
            group.join()
        for which, value in wanted:
            _, hard = resource.getrlimit(which)
            # CPU: SIGXCPU at the soft limit, SIGKILL a few seconds later for processes that catch it.
            ceiling = value + 5 if which == resource.RLIMIT_CPU else value
            if hard != resource.RLIM_INFINITY:
                value, ceiling = min(value, hard), min(ceiling, hard)
            resource.setrlimit(which, (value, ceiling))

    return apply


# --- running -----------------------------------------------------------------------------------------------------


class CappedOutput:
    """Keeps the head and the tail of a stream; the middle is only counted."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes of output omitted ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode(errors="replace")


@dataclass(frozen=True)
class Wiring:
    """What a caller connects to a run besides its command and limits.

    `env` is added to the scrubbed environment (an agent's endpoint and HOME); a set `stop` ends the run at once
    (SIGKILL, no grace: the caller's budget is spent). `pass_fds` are inherited by the sandboxed process (and closed
    by `launch`); `channel`, the harness's end of a socket whose other end is among them, is read beside the output,
    as it comes, until the run ends (descendants that kept the other end open cannot hold the harness).

    `writable`: the host's paths a run in a plain session writes (the workspace, an agent's HOME), polled against
    `limits.workspace_bytes`, every setuid and setgid bit cleared after the run. A jail has its writable folders on a
    sized tmpfs instead: a judged run's, or an agent's `disk`, filled once the run has started, watched for being full,
    and copied back once nothing of the run is alive."""

    env: dict[str, str] = field(default_factory=dict)
    stop: threading.Event | None = None
    channel: socket.socket | None = None
    pass_fds: tuple[int, ...] = ()
    writable: tuple[Path, ...] = ()
    disk: SizedDisk | None = None


class ChannelReader:
    """The harness's end of the result channel, read as it comes, up to CHANNEL_CAP."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.data, self.overflow = sock, bytearray(), False

    def read(self) -> str:
        """Take what the channel holds now: 'more', 'empty' (nothing yet) or 'closed' (also past its cap)."""
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return "empty"
        except OSError:
            return "closed"
        if len(self.data) + len(chunk) > CHANNEL_CAP:
            self.overflow = True
            return "closed"
        self.data.extend(chunk)
        return "more" if chunk else "closed"


@dataclass
class Running:
    """A started run: its launcher, the marker its processes carry, its cgroup where soak made one, bubblewrap's
    status pipe, and its wall clock."""

    proc: subprocess.Popen[bytes]
    stdout: IO[bytes]
    token: str
    kind: str
    group: RunCgroup | None
    status: int | None
    limits: ResourceLimits
    wiring: Wiring
    started: float
    deadline: float

    def watch(self, run: Contained, out: CappedOutput, channel: ChannelReader | None) -> None:
        """Pump the output (and the channel) until the run ends, its wall clock runs out, the caller stops it, or it
        breaks its memory or disk limit; `run` says which."""
        stdout, stop = self.stdout, self.wiring.stop
        next_quota, drain_until = self.started + 0.25, None
        os.set_blocking(stdout.fileno(), False)
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if channel is not None:
                channel.sock.setblocking(False)
                selector.register(channel.sock, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if now >= self.deadline:
                    run.timed_out = True
                    break
                if stop is not None and stop.is_set():
                    run.stopped = True
                    break
                if now >= next_quota:
                    next_quota = now + 0.25
                    if self.over_limit(run):
                        break
                ready = {key.fileobj for key, _ in selector.select(timeout=min(0.1, self.deadline - now))}
                if channel is not None and channel.sock in ready and channel.read() == "closed":
                    selector.unregister(channel.sock)
                if stdout in ready:
                    chunk = os.read(stdout.fileno(), 65536)
                    if not chunk:
                        break
                    out.add(chunk)
                # Left-over descendants (plain session) may hold the pipe open after the launcher is gone.
                if drain_until is None and exited(self.proc):
                    drain_until = now + 0.2
                if drain_until is not None and now >= drain_until:
                    break

    def over_limit(self, run: Contained) -> bool:
        """Whether the run's cgroup saw the kernel kill a process for memory, or what the run wrote is past its size
        (marked on `run`)."""
        group, disk, writable = self.group, self.wiring.disk, self.wiring.writable
        if group is not None and group.oom_kills():
            run.out_of_memory = True
            return True
        if (disk is not None and disk.full()
                or writable and too_big(writable, self.limits.workspace_bytes,
                                        run_pids(self.proc, self.token, self.kind, group))):
            run.over_quota = True
            return True
        return False

    def end(self, run: Contained) -> None:
        """Take the run down (SIGTERM and a grace first where it ran out of time or disk, then SIGKILL to the last
        process), then settle its record: a kill for memory, a full disk, what it wrote given back."""
        proc, group, disk = self.proc, self.group, self.wiring.disk
        if not (run.timed_out or run.over_quota or run.stopped):
            wait_exit(proc, self.deadline - time.monotonic())
            run.timed_out = not exited(proc)
        seen = processes(proc, self.token, self.kind) if self.kind == "session" or not exited(proc) else []
        if run.timed_out or run.over_quota:
            signal_all(seen, signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            wait_exit(proc, self.limits.grace_seconds)
        if group is not None:
            seen += group.kill()
        finish(proc, self.token, self.kind, seen + namespace_init(self.status))
        if group is not None:
            run.out_of_memory = run.out_of_memory or group.oom_kills() > 0
            group.remove()
        if disk is not None:
            run.over_quota = disk.empty() or run.over_quota
        # Nothing of the run is alive now: what it wrote is the harness's user's, no setuid bit left.
        give([str(path) for path in self.wiring.writable], os.geteuid(), os.getegid())


def start(cmd: list[str], ws: Path, limits: ResourceLimits, timeout_s: float, kind: str, wiring: Wiring) -> Running:
    """Start the launcher in the run's cgroup (where soak may create one) under the rlimits; the descriptors it
    inherits are closed here."""
    token = uuid.uuid4().hex
    cpu = limits.cpu_seconds or int(2 * timeout_s) + 10
    group = run_cgroup(limits.address_space_bytes, limits.max_processes)
    started = time.monotonic()
    status, pass_fds, disk = None, wiring.pass_fds, wiring.disk
    if kind == "bwrap":  # it reports its namespace's init, which outlives the launcher by a moment (see finish)
        status, status_w = os.pipe()
        cmd, pass_fds = [cmd[0], "--json-status-fd", str(status_w), *cmd[1:]], (*pass_fds, status_w)
    try:
        proc = subprocess.Popen(
            cmd, cwd=ws, env={**scrubbed_env(ws, token), **wiring.env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=rlimit_setter(limits, cpu, group), pass_fds=(*pass_fds, *(disk.passed if disk else ())),
        )
    except BaseException:
        if group is not None:  # nothing started in it
            group.remove()
        raise
    finally:
        for fd in pass_fds:
            os.close(fd)  # The child's copies only: an end left open here would never read as closed.
    assert proc.stdout is not None
    return Running(proc, proc.stdout, token, kind, group, status, limits, wiring, started, started + timeout_s)


def launch(cmd: list[str], ws: Path, limits: ResourceLimits, timeout_s: float, kind: str, wiring: Wiring) -> Contained:
    """Run the sandbox command in a cgroup of its own where soak may create one, pump its output through a cap,
    enforce the wall clock, the memory and the size of what it writes; `wiring` says what else the run is given."""
    running = start(cmd, ws, limits, timeout_s, kind, wiring)
    if wiring.disk is not None:
        wiring.disk.fill(timeout_s)
    run, out = Contained(), CappedOutput(limits.output_bytes)
    channel = ChannelReader(wiring.channel) if wiring.channel is not None else None
    running.watch(run, out, channel)
    running.end(run)
    running.stdout.close()
    if channel is not None:
        while channel.read() == "more":
            pass
        run.channel, run.channel_overflow = bytes(channel.data), channel.overflow
    run.returncode, run.duration_s, run.output = running.proc.returncode, time.monotonic() - running.started, out.text()
    return run
