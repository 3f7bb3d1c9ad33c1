"""The parts of `--cluster` that need no cluster: a try lost with its node (recorded, retried once, superseded, redone
on resume, never the stack's fault), the work folder's trip back from a node, per-node figures, and bad input."""

import io
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import replace

import pytest

from soak.agent.attempt import AttemptContext, Ending, Finished, task_row
from soak.night.cluster import ATTEMPT_PREFIX, attempt_folder, packed, unpacked
from soak.night.loop import InfraWindow, finished_attempts
from soak.record.identity import AttemptId
from soak.record.read import load_run
from soak.record.schema import RunLimits, TaskRow
from soak.report import aggregate as agg
from soak.stack.servers import free_port
from tests.night.test_loop import FakeTasks, calls_of, events_of, make_tasks, new_folder, run, tasks_of


class LostOnce(FakeTasks):
    """On "node a", the first try of `lost` tasks makes its calls, then its node is lost; every other try runs on
    "node b" (as ClusterTasks reports a try cut short by its node)."""

    def __init__(self, lost: set[str], always: bool = False):
        super().__init__(calls=2, outcome=lambda task_id, n: "pass")
        self.lost, self.always, self.tries = lost, always, []

    async def __call__(self, task, attempt: AttemptContext) -> TaskRow:
        first = attempt.attempt.slot not in self.tries
        self.tries.append(attempt.attempt.slot)
        node = "a/0000aaaa" if task.id in self.lost and (first or self.always) else "b/0000bbbb"
        attempt.attempt = replace(attempt.attempt, node=node)
        row = await super().__call__(task, attempt)
        if node.startswith("a/"):
            ending = Ending("node_lost", "NodeDiedError", "the node died")
            return task_row(task, attempt, Finished(row.started_at, row.duration_s, ending))
        return row


def test_a_try_lost_with_its_node_is_recorded_then_retried_once_on_another_node_and_superseded(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=1), concurrency=2)
    end, _ = run(folder, info, config, LostOnce({"task-1", "task-4"}))
    assert end.reason == "cycles"
    rows = tasks_of(folder)
    lost = [r for r in rows if r.outcome == "node_lost"]
    assert sorted(r.task_id for r in lost) == ["task-1", "task-4"] and {r.node for r in lost} == {"a/0000aaaa"}
    assert len(rows) == 8 and all(r.session == 0 for r in rows)
    record = load_run(folder.path)
    assert len(record.tasks) == 6 and set(record.tasks["outcome"]) == {"pass"}
    retried = record.attempt(AttemptId("task-1", 1))
    assert retried.row.node == "b/0000bbbb" and [c.node for c in retried.calls] == ["b/0000bbbb"] * 2
    assert sum(c.task_id == "task-1" for c in calls_of(folder)) == 4  # the lost try's calls are kept, apart
    assert events_of(folder).count("node_lost") == 2
    nodes = agg.per_node(record.tasks, record.events).set_index("node")
    assert nodes.loc["b/0000bbbb", "attempts"] == 6 and nodes.loc["a/0000aaaa", "attempts"] == 0
    assert nodes.loc["a/0000aaaa", "lost"] == 2 and nodes.loc["b/0000bbbb", "pass_rate"] == 1.0


def test_a_try_lost_twice_is_not_tried_a_third_time_and_a_resume_redoes_it(tmp_path):
    folder, info, config = new_folder(tmp_path, RunLimits(max_cycles=1), concurrency=1)
    tasks = make_tasks(["task-0", "task-1"])
    run(folder, info, config, LostOnce({"task-1"}, always=True), tasks=tasks)
    assert [(r.task_id, r.outcome) for r in tasks_of(folder) if r.task_id == "task-1"] == [("task-1", "node_lost")] * 2
    assert finished_attempts(tasks_of(folder)) == {AttemptId("task-0", 1)}  # a resume runs task-1 again unasked
    record = load_run(folder.path)
    nodes = agg.per_node(record.tasks, record.events).set_index("node")
    assert (nodes.loc["a/0000aaaa", "lost"], nodes.loc["a/0000aaaa", "attempts"]) == (2, 0)
    assert list(record.events[record.events["kind"] == "node_lost"]["detail"].str.rsplit(": ", n=1).str[-1]) == [
        "retried on another node", "redone on resume"]


def test_a_lost_node_neither_fills_the_error_budget_nor_clears_a_failing_stack():
    from soak.config import ErrorBudget

    window = InfraWindow(ErrorBudget(window_tasks=4, max_infra_fraction=0.25))
    window.failing_since = 1.0
    assert not window.add("node_lost") and window.failing_since == 1.0 and not window.window


def test_an_attempts_folder_comes_back_from_its_node_without_what_must_not(tmp_path):
    """The node's tar of an attempt folder that hostile code made: files and links inside come back, a link out of the
    folder, a setuid bit and a FIFO do not, a deep tree does."""
    made = tmp_path / "node"
    (made / "workspace").mkdir(parents=True)
    (made / "workspace" / "solution.py").write_text("def add(a, b):\n    return a + b\n")
    (made / "workspace" / "shell").write_bytes(b"\x7fELF")
    os.chmod(made / "workspace" / "shell", 0o4755)
    (made / "workspace" / "passwd").symlink_to("/etc/passwd")
    (made / "workspace" / "again.py").symlink_to("solution.py")
    os.mkfifo(made / "workspace" / "pipe")
    deep = made.joinpath(*["d"] * 200)
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("down here")
    back = tmp_path / "head"
    back.mkdir()
    unpacked(packed(made), back)
    assert (back / "workspace" / "solution.py").read_text() == (made / "workspace" / "solution.py").read_text()
    assert os.readlink(back / "workspace" / "again.py") == "solution.py"
    assert not (back / "workspace" / "passwd").is_symlink() and not (back / "workspace" / "pipe").exists()
    assert not os.stat(back / "workspace" / "shell").st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert back.joinpath(*["d"] * 200, "bottom.txt").read_text() == "down here"


def crafted_tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member, content in members:
            member.size = len(content) if member.isreg() else 0
            tar.addfile(member, io.BytesIO(content) if member.isreg() else None)
    return buffer.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname, member.mode = kind, link, mode
    return member


def test_a_hand_made_tar_cannot_write_outside_the_folder_nor_past_its_size(tmp_path):
    """What `packed` never makes but a hostile node could send: absolute and climbing names, a link that climbs out
    and a file written through it, a hard link out, a device, a setgid file, more bytes than the bound."""
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    back = tmp_path / "head"
    back.mkdir()
    data = crafted_tar([
        (entry(str(tmp_path / "abs.txt")), b"x"),
        (entry("../climbed.txt"), b"x"),
        (entry("up", tarfile.SYMTYPE, "../"), b""),
        (entry("up/outside.txt"), b"overwritten"),
        (entry("hard", tarfile.LNKTYPE, "../outside.txt"), b""),
        (entry("dev", tarfile.CHRTYPE), b""),
        (entry("group", mode=0o2755), b"#!/bin/sh\n"),
        (entry("small.txt"), b"12345"),
        (entry("big.txt"), b"x" * 100),
        (entry("sub", tarfile.DIRTYPE, mode=0o755), b""),
        (entry("sub/near", tarfile.SYMTYPE, "../small.txt"), b""),
    ])
    unpacked(data, back, max_bytes=64)
    assert outside.read_text() == "untouched"
    assert not (tmp_path / "abs.txt").exists() and not (tmp_path / "climbed.txt").exists()
    assert sorted(p.name for p in back.iterdir()) == ["group", "small.txt", "sub", "up"]
    assert not (back / "up").is_symlink() and (back / "up" / "outside.txt").read_text() == "overwritten"
    assert not os.stat(back / "group").st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert (back / "sub" / "near").read_text() == "12345"


def test_a_nodes_next_attempt_clears_the_folders_of_workers_that_died_with_them(tmp_path, monkeypatch):
    """A folder whose worker is gone (a head killed with SIGKILL takes its workers down before their cleanup) goes,
    unwritable parts and all; a live worker's folder, one of another pid namespace (a container sharing /tmp) and
    any folder not named for a worker stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace = os.stat("/proc/self/ns/pid").st_ino
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{ATTEMPT_PREFIX}{namespace}.{gone.pid}-x1y2"
    (dead / "workspace").mkdir(parents=True)
    (dead / "workspace" / "solution.py").write_text("x = 1\n")
    os.chmod(dead / "workspace", 0o500)
    kept = [tmp_path / f"{ATTEMPT_PREFIX}{namespace}.{os.getppid()}-a1b2",
            tmp_path / f"{ATTEMPT_PREFIX}{namespace + 1}.{gone.pid}-c3d4", tmp_path / f"{ATTEMPT_PREFIX}k3j4l5"]
    for folder in kept:
        folder.mkdir()
    made = attempt_folder()
    assert not dead.exists() and all(folder.is_dir() for folder in kept)
    assert made.parent == tmp_path and made.name.startswith(f"{ATTEMPT_PREFIX}{namespace}.{os.getpid()}-")


@pytest.mark.parametrize("address", ["127.0.0.1:{closed}", "not an address"])
def test_a_cluster_that_does_not_answer_is_bad_input_before_any_folder(soak, data_dir, address):
    address, started = address.format(closed=free_port()), time.monotonic()
    result = soak("run", "--cluster", address, "--tasks", "1", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert result.exit_code == 2 and "no Ray cluster answers there" in result.output and address in result.output
    assert time.monotonic() - started < 30 and not data_dir.exists()


def test_without_ray_the_cluster_says_how_to_install_it(soak, data_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = soak("run", "--cluster", "auto", "--tasks", "1", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert result.exit_code == 2 and "pip install 'soak[cluster]'" in result.output and not data_dir.exists()


def test_a_resume_keeps_its_own_cluster(soak, data_dir):
    result = soak("run", "--resume", "r", "--cluster", "auto")
    assert result.exit_code == 2 and "--cluster" in result.output
