"""Attack agents that abuse the host rather than their verdict, under bubblewrap and the unshare fallback: a setuid
shell left in the run folder, kernel knobs, and memory and disk the address-space limit and a walk of the folders do
not see (memfd, /dev/shm, HOME, files unlinked but held open). Each ends its attempt within its budgets with a clear
reason, and the night keeps what every night keeps (tests.agent.test_attacks.night)."""

import os
import stat

import pytest

from soak.sandbox.visible import PRIVATE_TMP_BYTES
from tests.agent.test_attacks import night
from tests.sandbox.test_hardening import FILL_FUNCTION, needs_cgroup

# Copies a shell into the workspace and HOME with the setuid bit, a folder with setgid; tries the kernel's knobs.
SETUID = '''
import os, shutil, sys
workspace = sys.argv[2]
print("euid", os.geteuid(), flush=True)
for folder in (workspace, os.environ["HOME"]):
    shell = shutil.copy("/bin/sh", os.path.join(folder, "rootshell"))
    os.chmod(shell, 0o4755)
    print("setuid", oct(os.stat(shell).st_mode), flush=True)
os.mkdir(os.path.join(workspace, "shared"))
os.chmod(os.path.join(workspace, "shared"), 0o2775)
for knob in ("/proc/sys/vm/swappiness", "/proc/sys/kernel/core_pattern"):
    try:
        with open(knob, "r+") as file:
            value = file.read()
            file.seek(0)
            file.write(value)
        print("wrote", knob, flush=True)
    except OSError as error:
        print("refused", knob, error.strerror, flush=True)
'''

# Memory in memfd files (32 MiB each, under RLIMIT_FSIZE), written, never mapped, held.
MEMFD = '''
import os, time
held = []
for number in range(1024):
    if number % 32 == 0:
        held.append(os.memfd_create("balloon"))
    os.write(held[-1], bytes(1 << 20))
print("held a GiB of memfd", flush=True)
time.sleep(60)
'''

# Fills /dev/shm and /tmp until a write fails; prints how much each took.
SHM = FILL_FUNCTION + '''
for folder in ("/dev/shm", "/tmp"):
    print(folder, fill(folder, 256 << 20) >> 20, "MiB", flush=True)
'''

# 8 MiB files in HOME (`home`) or in the workspace opened, unlinked and held (`unlinked`), 256 MiB in all, then waits.
BALLOON = '''
import os, sys, time
where = os.environ["HOME"] if sys.argv[5] == "home" else sys.argv[2]
held = []
for number in range(32):
    path = os.path.join(where, f"piece{number}")
    held.append(open(path, "wb"))
    if sys.argv[5] == "unlinked":
        os.unlink(path)
    held[-1].write(bytes(8 << 20))
    held[-1].flush()
print("wrote 256 MiB", flush=True)
time.sleep(60)
'''


def test_no_setuid_file_survives_and_the_kernel_knobs_hold(jail, fast_sim, data_dir, tmp_path):
    _, base_url = fast_sim()
    done = night(tmp_path, base_url, SETUID)
    output = done.output()
    assert "setuid" in output and "wrote /proc" not in output and output.count("refused") == 2, output
    if os.geteuid() == 0:
        assert "euid 0" not in output, output
    left = [path for path in done.path.rglob("*") if not path.is_symlink()]
    assert any(path.name == "rootshell" for path in left)
    for path in left:
        info = path.lstat()
        assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(info.st_mode))
        assert info.st_uid == os.geteuid(), (path, info.st_uid)
    assert done.row["outcome"] == "no_artifact", done.row["error_tail"]


def test_a_memfd_balloon_ends_the_attempt_at_the_memory_limit(jail, fast_sim, data_dir, tmp_path):
    needs_cgroup()
    _, base_url = fast_sim()
    done = night(tmp_path, base_url, MEMFD, agent=f"address_space_bytes = {512 << 20}")
    assert "held a GiB" not in done.output()
    assert (done.row["outcome"], done.row["error_kind"]) == ("agent_error", "MemoryLimit"), done.row["error_tail"]
    assert "passed its limit of 512 MiB" in done.row["error_tail"] and done.seconds < 60


def test_shm_and_tmp_hold_no_more_than_their_size(jail, fast_sim, data_dir, tmp_path):
    _, base_url = fast_sim()
    done = night(tmp_path, base_url, SHM)
    sizes = {line.split()[0]: int(line.split()[1]) for line in done.output().splitlines() if "MiB" in line}
    assert set(sizes) == {"/dev/shm", "/tmp"} and max(sizes.values()) <= PRIVATE_TMP_BYTES >> 20, sizes


@pytest.mark.parametrize("where", ["home", "unlinked"])
def test_a_disk_balloon_in_home_or_in_unlinked_files_ends_the_attempt(jail, where, fast_sim, data_dir, tmp_path):
    _, base_url = fast_sim()
    done = night(tmp_path, base_url, BALLOON, where, agent=f"disk_bytes = {64 << 20}")
    assert "wrote 256 MiB" not in done.output() and done.seconds < 60  # the write past the cap failed
    # The tmpfs is looked at every 2 ms; on a starved machine a look can miss a run that fills it and exits at once
    # on ENOSPC, its unlinked files freed with it: that run ends as the agent's exit, the kernel's refusal in its tail.
    missed = (where == "unlinked" and done.row["outcome"] == "agent_error"
              and "No space left on device" in done.row["error_tail"])
    if not missed:
        assert (done.row["outcome"], done.row["error_kind"]) == ("agent_error", "DiskQuota"), done.row["error_tail"]
        assert "filled their limit of 64 MiB" in done.row["error_tail"]
