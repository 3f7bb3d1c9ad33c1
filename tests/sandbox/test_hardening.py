"""The jail against a hostile solution that abuses the host rather than its verdict: kernel knobs, uid 0, memory the
address-space limit does not see, sized file systems, forks; each under every isolation kind that builds the
allow-listed root, and `soak check` run by an ordinary user as well as by root.

Each probe returns 'ok' when what it tried was contained and a description of the leak when not, so the verdict says
what held: a `pass` is containment, a `fail` shows the leak in its error tail."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from soak.sandbox import cgroup, jail
from soak.sandbox import judge as sandbox
from soak.sandbox.jail import MiB, ResourceLimits
from soak.sandbox.judge import judge
from soak.sandbox.visible import PRIVATE_TMP_BYTES
from tests.sandbox.test_jail import PROBE, make_task

IN_CI = os.environ.get("CI", "").lower() in ("1", "true")
JAILS = [kind for kind in ("bwrap", "unshare", "unshare-user") if jail.works(kind)]

KERNEL = """
import os

def probe():
    leaks = []
    if os.geteuid() == 0:
        leaks.append("runs as uid 0")
    for path in ("/proc/sys/vm/swappiness", "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
        try:
            with open(path, "r+") as knob:  # the value read is written back: nothing changes if it leaks
                value = knob.read()
                knob.seek(0)
                knob.write(value or "\\n")
                knob.flush()
            leaks.append("wrote " + path)
        except OSError:
            pass
    for path in ("/proc/kcore", "/proc/keys", "/proc/timer_list"):
        try:
            with open(path, "rb") as view:
                if view.read(64):
                    leaks.append("read " + path)
        except OSError:
            pass
    return "; ".join(leaks) or "ok"
"""

FILL_FUNCTION = """
import os

def fill(folder, cap):
    '''Write 1 MiB pieces into `folder` until a write fails; the bytes written (not past `cap`).'''
    written = 0
    with open(os.path.join(folder, "fill"), "wb") as out:
        while written < cap:
            try:
                out.write(bytes(1 << 20))
                out.flush()
            except OSError:
                break
            written += 1 << 20
    return written
"""
"""Fills a folder until a write fails: a solution's probe here, an agent's script in tests/agent/test_abuse.py."""

FILL = FILL_FUNCTION + """
def probe():
    for folder in ("/dev/shm", "/tmp"):
        written = fill(folder, {cap})
        if written > {limit}:
            return f"{{written >> 20}} MiB in {{folder}}"
    return "ok"
"""

UNLINKED = """
import os

def probe():
    '''Files opened in the workspace, unlinked, then written: the folder looks empty, the disk is not.'''
    written, held = 0, []
    try:
        for number in range(16):
            held.append(open(f"hidden{{number}}", "wb"))
            os.unlink(f"hidden{{number}}")
            for _ in range(16):
                held[-1].write(bytes(1 << 20))
                held[-1].flush()
                written += 1 << 20
    except OSError:
        pass
    return "ok" if written <= {limit} else f"{{written >> 20}} MiB in unlinked files"
"""

MEMFD = """
import os

def probe():
    '''Memory in memfd files (32 MiB each, under RLIMIT_FSIZE), written and never mapped: RLIMIT_AS does not see
    it.'''
    held = []
    for number in range({mib}):
        if number % 32 == 0:
            held.append(os.memfd_create("balloon"))
        os.write(held[-1], bytes(1 << 20))
    return "{mib} MiB of memfd files were held"
"""

FORKS = """
import os, signal, time

def probe():
    children = []
    try:
        for _ in range({tries}):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
    except OSError:
        pass
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return "ok" if len(children) < {tries} else f"{{len(children)}} processes forked"
"""


@pytest.fixture(params=JAILS)
def kind(request, monkeypatch) -> str:
    monkeypatch.setattr(sandbox, "isolation_kind", lambda: request.param)
    return request.param


def needs_cgroup() -> None:
    if cgroup.hierarchy() is None:
        if IN_CI and os.geteuid() == 0:
            pytest.fail("CI runs as root: soak must be able to make a cgroup there")
        pytest.skip("soak may not create a cgroup on this host (rlimits only)")


def probed(source: str, limits: ResourceLimits | None = None):
    return judge(make_task(PROBE.tests, PROBE.reference), textwrap.dedent(source), limits=limits)


def test_the_run_is_not_root_and_kernel_knobs_are_read_only(kind):
    verdict = probed(KERNEL)
    assert (verdict.result, verdict.isolation) == ("pass", kind), verdict.error_tail


def test_shm_and_tmp_are_sized(kind):
    verdict = probed(FILL.format(cap=PRIVATE_TMP_BYTES * 2, limit=PRIVATE_TMP_BYTES))
    assert verdict.result == "pass", verdict.error_tail


def test_unlinked_files_count_against_the_workspace(kind):
    limits = ResourceLimits(workspace_bytes=32 * MiB)
    verdict = probed(UNLINKED.format(limit=32 * MiB), limits)
    assert verdict.result == "pass", verdict.error_tail


def test_a_memfd_balloon_past_the_memory_limit_is_killed(kind):
    needs_cgroup()
    verdict = probed(MEMFD.format(mib=768), ResourceLimits(address_space_bytes=512 * MiB))
    assert (verdict.result, verdict.error_kind) == ("fail", "MemoryError"), verdict.error_tail
    assert "passed its limit and the kernel killed it" in verdict.error_tail


def test_a_fork_bomb_meets_pids_max(kind):
    needs_cgroup()
    verdict = probed(FORKS.format(tries=64), ResourceLimits(max_processes=24))
    assert verdict.result == "pass", verdict.error_tail


def as_ordinary_user(cmd: list[str], scratch: Path) -> list[str]:
    """`cmd` run by nobody, in a mount namespace of its own where a Python kept under /root (0700, as pyenv's is) can
    be reached: /root there is an open tmpfs holding only the Python's folder."""
    python = Path(sys.base_prefix).resolve()
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *cmd]
    if not python.is_relative_to("/root"):
        return user
    keep = scratch / "python"
    keep.mkdir()
    script = (f'mount --bind "{python}" "{keep}" && mount -t tmpfs -o mode=0755 tmpfs /root && '
              f'mkdir -p "{python}" && mount --move "{keep}" "{python}" && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *user]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="only root can start soak as another user, with setpriv (util-linux)")
def test_an_ordinary_user_running_soak_check_gets_the_same_jail():
    """soak started by nobody (bubblewrap then makes a user namespace; unshare maps the user): the knobs hold too."""
    folder = Path(tempfile.mkdtemp(prefix="soak-as-user-"))  # pytest's own folders are root's alone
    os.chmod(folder, 0o755)
    (folder / "solution.py").write_text(textwrap.dedent(KERNEL))
    (folder / "task.toml").write_text('id = "probe"\ntitle = "probe"\ndifficulty = "easy"\n')
    (folder / "prompt.md").write_text("Write probe().\n")
    (folder / "reference.py").write_text(PROBE.reference)
    (folder / "test_solution.py").write_text(PROBE.tests["test_solution.py"])
    for path in folder.iterdir():
        os.chmod(path, 0o644)
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "TMPDIR": str(folder)}
    check = [sys.executable, "-m", "soak.cli", "check", "--task", str(folder), "--solution",
             str(folder / "solution.py"), "--json"]
    try:
        done = subprocess.run(as_ordinary_user(check, folder), capture_output=True, text=True, env=env, cwd="/",
                              timeout=120)
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["result"] == "pass" and verdict["isolation"] != "session", verdict
