"""An agent's workspace and HOME on one sized tmpfs in the jail (soak.sandbox.sized), under bubblewrap and under the
unshare fallback alike: a process that writes files and unlinks them while it holds them open meets ENOSPC at the
cap, measured from inside, in the workspace, in HOME and in both together, and the run ends over its cap; the
folders reach the host as the run left them, and no run can make the harness copy more than the cap back out."""

import os
import resource
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.sandbox import jail
from soak.sandbox.disk import remove_tree
from soak.sandbox.jail import MiB, ResourceLimits
from soak.sandbox.sized import SizedDisk
from soak.sandbox.visible import JailView, sized

ROOTED = [kind for kind in ("bwrap", "unshare", "unshare-user") if jail.works(kind)]
pytestmark = pytest.mark.skipif(not ROOTED, reason="a sized tmpfs in the jail needs bubblewrap or unshare")
CAP = 16 * MiB

# argv: pairs of (folder, MiB at most), then "wait" or "exit". In each folder, 1 MiB pieces are written into files
# unlinked at once and all held open, until the MiB are written or a write fails; it prints what it held then, in
# bytes written and not refused, and the error, and at the end waits to be killed or exits.
BALLOON = '''
import errno, os, sys, time
held, total = [], 0
args = sys.argv[1:]
for folder, mib in zip(args[:-1:2], args[1:-1:2]):
    for piece in range(int(mib)):
        path = os.path.join(folder, f"piece{len(held)}")
        held.append(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.unlink(path)
        try:
            total += os.write(held[-1], bytes(1 << 20))
        except OSError as error:
            print("refused", errno.errorcode[error.errno], flush=True)
            break
    print("held", folder, total, flush=True)
if args[-1] == "wait":
    time.sleep(120)
'''


@pytest.fixture(params=ROOTED)
def kind(request) -> str:
    return request.param


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """An attempt's workspace (soak.record.layout's name) and a HOME beside it on the host, removed as the harness
    removes them: pytest's own cleanup of old temporary folders walks them recursively, and a chain 2,000 deep stops
    it (a RecursionError at exit) and stays in /tmp."""
    ws, home = tmp_path / "attempt" / "workspace", tmp_path / "home"
    ws.mkdir(parents=True)
    (home / "tmp").mkdir(parents=True)
    yield ws, home
    remove_tree(tmp_path / "attempt")


class Unwatched(SizedDisk):
    """The tmpfs alone, never found full: a run that fills it goes on, to report from inside what the kernel let it
    hold (the launch's poll would kill it at the cap, perhaps before it can say so)."""

    def full(self) -> bool:
        return False


def run(
    kind: str, ws: Path, home: Path, code: str, *args: str, watched: bool = True
) -> tuple[jail.Contained, SizedDisk]:
    """`code` run by the jail's Python in the workspace, its HOME on the sized tmpfs, as soak runs an agent."""
    disk = (SizedDisk if watched else Unwatched)(ws, home, CAP, kind)
    cmd = jail.wrap(kind, ws, [*disk.command(), sys.executable, "-I", "-c", code, *args],
                    JailView(harness=disk.harness, disk=disk.mounts()))
    limits = ResourceLimits(workspace_bytes=CAP, output_bytes=1 << 20)
    done = jail.launch(cmd, ws, limits, 60, kind,
                       jail.Wiring(env={"HOME": str(disk.home), "TMPDIR": str(disk.home / "tmp")}, disk=disk))
    return done, disk


def held(output: str) -> dict[str, int]:
    return {line.split()[1]: int(line.split()[2]) for line in output.splitlines() if line.startswith("held ")}


@pytest.mark.parametrize("where", ["workspace", "home", "tmp"])
def test_unlinked_files_held_open_meet_enospc_at_the_cap(kind, folders, where):
    ws, home = folders
    disk = SizedDisk(ws, home, CAP, kind)
    folder = {"workspace": ws, "home": disk.home, "tmp": disk.home / "tmp"}[where]
    done, _ = run(kind, ws, home, BALLOON, str(folder), "64", "exit", watched=False)
    assert done.returncode == 0 and "refused ENOSPC" in done.output, done.output
    assert CAP - 2 * MiB <= held(done.output)[str(folder)] <= CAP, done.output


def test_the_workspace_and_home_share_one_cap(kind, folders):
    ws, home = folders
    disk = SizedDisk(ws, home, CAP, kind)
    done, _ = run(kind, ws, home, BALLOON, str(ws), "10", str(disk.home), "64", "exit", watched=False)
    totals = held(done.output)
    assert "refused ENOSPC" in done.output and totals[str(ws)] == 10 * MiB, done.output
    assert CAP - 2 * MiB <= totals[str(disk.home)] <= CAP, done.output


@pytest.mark.parametrize("then", ["wait", "exit"])
@pytest.mark.parametrize("files", ["kept", "unlinked"])
def test_a_run_at_its_cap_is_over_it(kind, folders, files, then):
    """Killed once found at its cap where it waits; over it all the same where it exits at the refused write, even
    where its exit frees all it held (its files unlinked)."""
    ws, home = folders
    code = BALLOON.replace("os.unlink(path)", "pass") if files == "kept" else BALLOON
    done, _ = run(kind, ws, home, code, str(ws), "64", then)
    assert done.over_quota and not done.timed_out and done.duration_s < 30, done
    assert all(total <= CAP for total in held(done.output).values()), done.output
    assert sum(path.stat().st_size for path in ws.iterdir()) <= CAP


# Reads what the host put in its folders, writes its own: a file, a link, a folder, a setuid file, a pipe, a file it
# makes unreadable; removes one it was given.
WORKER = '''
import os, sys
ws, home = sys.argv[1], os.environ["HOME"]
print("given", open(os.path.join(ws, "given.txt")).read(), open(os.path.join(home, "prompt.md")).read(), flush=True)
print("uid", os.geteuid(), oct(os.stat(ws).st_mode), os.access(os.path.join(ws, "given.txt"), os.W_OK), flush=True)
os.makedirs(os.path.join(ws, "deep", "er"))
open(os.path.join(ws, "deep", "er", "solution.py"), "w").write("ANSWER = 42\\n")
os.symlink("/etc/passwd", os.path.join(ws, "link"))
os.chmod(os.path.join(ws, "deep"), 0o500)
shell = os.path.join(ws, "rootshell")
open(shell, "w").write("#!/bin/sh\\n")
os.chmod(shell, 0o4755)
os.mkfifo(os.path.join(ws, "pipe"))
secret = os.path.join(home, "tmp", "secret")
open(secret, "w").write("kept")
os.chmod(secret, 0)
os.unlink(os.path.join(ws, "gone.txt"))
'''


def test_the_folders_reach_the_host_as_the_run_left_them(kind, folders):
    ws, home = folders
    (ws / "given.txt").write_text("task")
    (ws / "gone.txt").write_text("old")
    (home / "prompt.md").write_text("prompt")
    done, _ = run(kind, ws, home, WORKER, str(ws))
    assert done.returncode == 0 and not done.over_quota, done.output
    assert "given task prompt" in done.output and "True" in done.output, done.output
    assert sorted(path.name for path in ws.iterdir()) == ["deep", "given.txt", "link", "pipe", "rootshell"]
    assert stat.S_ISFIFO((ws / "pipe").lstat().st_mode)
    assert (ws / "deep" / "er" / "solution.py").read_text() == "ANSWER = 42\n"
    assert os.readlink(ws / "link") == "/etc/passwd"
    assert not (ws / "rootshell").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert (home / "tmp" / "secret").read_text() == "kept"
    for path in [*ws.rglob("*"), *home.rglob("*")]:
        assert path.lstat().st_uid == os.geteuid(), path


# A 4 MiB file hard-linked 16 times (or made sparse at 8 MiB 8 times): little on the tmpfs, far more at length.
LINKS = '''
import os, sys
ws = sys.argv[1]
if sys.argv[2] == "links":
    open(os.path.join(ws, "big"), "wb").write(bytes(4 << 20))
    for number in range(16):
        os.link(os.path.join(ws, "big"), os.path.join(ws, f"link{number}"))
else:
    for number in range(8):
        with open(os.path.join(ws, f"sparse{number}"), "wb") as sparse:
            sparse.truncate(8 << 20)
print("made", flush=True)
'''


@pytest.mark.parametrize("how", ["links", "sparse"])
def test_no_run_makes_the_harness_copy_more_than_the_cap(kind, folders, how):
    ws, home = folders
    done, _ = run(kind, ws, home, LINKS, str(ws), how)
    assert "made" in done.output and done.over_quota, done.output
    copied = sum(path.lstat().st_size for path in [*ws.rglob("*"), *home.rglob("*")] if path.is_file())
    assert copied <= CAP, copied


def test_folders_too_big_for_the_cap_never_start_the_run(kind, folders):
    ws, home = folders
    (ws / "big").write_bytes(bytes(CAP + MiB))
    done, _ = run(kind, ws, home, "print('started')")
    assert done.over_quota and "started" not in done.output, done.output
    assert (ws / "big").stat().st_size == CAP + MiB  # the host's folders as they were


# A chain of folders far deeper than the harness has descriptors to spare.
CHAIN = """
import os, sys
os.chdir(sys.argv[1])
for _ in range(2000):
    os.mkdir("d")
    os.chdir("d")
open("bottom", "w").write("reached")
"""


def test_a_deep_tree_comes_back_whole_with_few_descriptors(kind, folders):
    ws, home = folders
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        done, _ = run(kind, ws, home, CHAIN, str(ws))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert done.returncode == 0 and not done.over_quota, done.output
    fd = os.open(ws, os.O_RDONLY)
    try:
        for _ in range(2000):
            fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
            os.close(parent)
        assert os.stat("bottom", dir_fd=fd).st_size == len("reached")
    finally:
        os.close(fd)


def test_a_file_system_not_of_the_cap_s_size_is_refused(kind, folders):
    """The harness checks what the jail handed over: a tmpfs of another size (or none) never runs the command."""
    ws, home = folders
    (ws / "given.txt").write_text("task")
    disk = SizedDisk(ws, home, CAP, kind)
    cmd = jail.wrap(kind, ws, [*disk.command(), sys.executable, "-I", "-c", "print('started')"],
                    JailView(harness=disk.harness, disk=sized(disk.top, 2 * CAP, [ws, disk.home])))
    with pytest.raises(OSError, match="not the tmpfs of"):
        jail.launch(cmd, ws, ResourceLimits(workspace_bytes=CAP), 60, kind, jail.Wiring(disk=disk))
    assert [path.name for path in ws.iterdir()] == ["given.txt"]
