"""The harness never pays for what it judges: an entry file over the size limit fails by its size alone (never read
whole, scanned or run), and the static scan of a large one runs in a process of its own, so a judged file however
large or hostile leaves the harness's own peak memory where a normal one leaves it."""

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from soak.agent.attempt import AttemptContext
from soak.agent.loop import run_task
from soak.config import Budgets
from soak.llm.scripted import Say, ScriptedModel
from soak.record.identity import AttemptId
from soak.sandbox import scan
from soak.sandbox import scanning as scanning_module
from soak.sandbox.jail import MiB, ResourceLimits
from soak.sandbox.judge import HEAD_BYTES, TooLarge, entry_source
from soak.sandbox.scanning import Scan
from soak.tasks.suites import find_task
from tests.agent.test_attacks import ENTRY
from tests.helpers import REPO, script_night_args

LIMIT = ResourceLimits().entry_bytes
WORD_FREQUENCY = REPO / "tasks" / "word-frequency"
PEAK = ("import atexit, resource, sys\n"
        "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "atexit.register(lambda: open(sys.argv[1], 'w').write(str(peak())))\n"
        "from soak.cli import main\n"
        "main(sys.argv[2:])\n")
"""`soak ARGS` in a process that writes its own peak RSS (KiB) at exit to the file named first: the harness alone, not
the processes it starts."""


def soak_with_peak(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    """What `soak ARGS` printed, and the harness's peak RSS in bytes."""
    peak = folder / "peak"
    done = subprocess.run([sys.executable, "-c", PEAK, str(peak), *args], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout, int(peak.read_text()) * 1024


def filler(path: Path, size: int) -> Path:
    """`size` bytes of comment lines, written a MiB at a time."""
    with path.open("wb") as file:
        for start in range(0, size, MiB):
            chunk = b"# filler\n" * (MiB // 9) + b"#" * (MiB % 9)
            file.write(chunk[:size - start])
    return path


def valid_python(size: int) -> str:
    """The task's reference, then one string literal that brings it to `size` bytes: valid Python, cheap to compile."""
    reference = find_task(str(WORD_FREQUENCY)).reference
    return reference + '\nPADDING = "' + "a" * (size - len(reference.encode()) - 14) + '"\n'


def test_an_entry_file_is_measured_before_it_is_read(tmp_path):
    """At the limit the text; past it only the size and the head, from a file no read could hold (a sparse 64 GiB)."""
    entry = tmp_path / "solution.py"
    entry.write_bytes(b"#" * LIMIT)
    assert entry_source(entry, LIMIT) == "#" * LIMIT
    entry.write_bytes(b"#" * (LIMIT + 1))
    found = entry_source(entry, LIMIT)
    assert isinstance(found, TooLarge) and (found.size, found.limit) == (LIMIT + 1, LIMIT)
    assert found.head == b"#" * HEAD_BYTES
    assert entry_source(entry, LIMIT) == found  # untouched: the same file, a no-op round
    os.truncate(entry, 64 << 30)
    found = entry_source(entry, LIMIT)
    assert isinstance(found, TooLarge) and found.size == 64 << 30 and len(found.head) == HEAD_BYTES
    assert found.verdict("solution.py").error_tail == (
        "TooLarge: solution.py is 68,719,476,736 bytes, over the limit of 1,048,576 bytes on a judged file: it was not "
        "run and no test ran")


def test_a_long_word_in_a_string_scans_in_linear_time():
    """The harness-text pattern starts at word boundaries: one long word once backtracked quadratically (a 64 KiB
    literal took 18 s; these would take hours)."""
    assert scan.suspicious('DATA = "' + "a" * (4 * MiB) + '"\n') == []
    [reason] = scan.suspicious('NAME = "' + "a" * MiB + '_test.py"\n')
    assert reason.startswith("names the test harness or files ('aaaa") and reason.endswith("… (line 1)")


def test_a_small_source_is_scanned_in_the_harness_and_a_larger_one_in_a_process_of_its_own():
    """Below the size where the scan's own process costs more than the scan, no process starts; above it one does, and
    both say the same."""
    small = "import gc\n"
    large = small + "#" * scanning_module.SCAN_IN_HARNESS_BYTES + "\n"
    with Scan(small) as scanning:
        assert scanning.process is None and scanning.reasons() == "imports gc (line 1)"
    with Scan(large) as scanning:
        assert scanning.process is not None and scanning.reasons() == "imports gc (line 1)"
    with Scan("-" * 16_000 + "1\n") as scanning:  # past the parser's nesting limit: said, the harness unharmed
        assert scanning.process is None and scanning.reasons() in ("", "scan failed: MemoryError")


def test_a_scan_that_does_not_answer_is_said_at_its_deadline_and_killed(monkeypatch):
    """A scan that never answers (here one that sleeps) costs the judge its deadline at most, or nothing once the
    attempt's budget has ended; either way it is said and its process is gone."""
    monkeypatch.setattr(scanning_module, "SCAN_COMMAND", [sys.executable, "-c", "import time; time.sleep(3600)"])
    monkeypatch.setattr(scanning_module, "SCAN_SECONDS", 1)
    source = "x = 1\n" * scanning_module.SCAN_IN_HARNESS_BYTES
    with Scan(source) as scanning:
        assert scanning.reasons() == "scan failed: it took over 1 s"
    assert scanning.process is not None and scanning.process.returncode is not None
    stop = threading.Event()
    stop.set()
    with Scan(source) as scanning:
        assert scanning.reasons(stop) == "scan failed: the attempt's budget ended first"
    assert scanning.process is not None and scanning.process.returncode is not None


def test_a_round_over_the_limit_fails_unrun_and_the_next_round_is_told_why(task, tmp_path):
    """soak's own loop: round 1 writes 2 MiB (TooLarge, its head kept, no test run), the revision message carries the
    reason, round 2 writes the reference and passes."""
    def write(source: str) -> Say:
        return Say(calls=[("write_file", {"path": task.entry, "content": source})])

    coder = ScriptedModel([write(valid_python(2 * MiB)), Say(content="done"), write(task.reference),
                           Say(content="done")])
    context = AttemptContext("r", AttemptId(task.id, 1), tmp_path)
    row = asyncio.run(run_task(task, context, orchestrator=None, coder=coder,
                               budgets=Budgets(max_rounds=2)))
    assert (row.outcome, row.rounds) == ("pass", 2), row.error_tail
    revision = coder.asked[2].messages[-1]["content"]
    assert f"TooLarge: {task.entry} is {2 * MiB:,} bytes, over the limit of {LIMIT:,} bytes" in revision
    assert (tmp_path / "round-1" / task.entry).stat().st_size == HEAD_BYTES
    assert (tmp_path / "round-2" / task.entry).read_text() == task.reference


def test_soak_check_judges_a_large_file_at_the_harness_memory_of_a_small_one(tmp_path):
    """A 64 MiB file and a 2 MiB one of valid Python fail by their size, unread (TooLarge, nothing run); a 1,000,000
    byte one under the limit is judged in full, its scan out of the harness. Each leaves the harness's peak within
    100 MiB of a check of the plain reference."""
    task = ["check", "--task", str(WORD_FREQUENCY), "--json", "--solution"]
    normal = tmp_path / "normal.py"
    normal.write_text(find_task(str(WORD_FREQUENCY)).reference)
    out, baseline = soak_with_peak(tmp_path, *task, str(normal))
    assert json.loads(out)["result"] == "pass"

    huge, padded, under = filler(tmp_path / "huge.py", 64 * MiB), tmp_path / "padded.py", tmp_path / "under.py"
    padded.write_text(valid_python(2 * MiB))
    under.write_text(valid_python(1_000_000))
    assert (huge.stat().st_size, padded.stat().st_size, under.stat().st_size) == (64 * MiB, 2 * MiB, 1_000_000)
    compile(padded.read_text(), "padded.py", "exec")
    for solution in (huge, padded):
        out, peak = soak_with_peak(tmp_path, *task, str(solution))
        verdict = json.loads(out)
        assert (verdict["result"], verdict["error_kind"], verdict["tests_total"]) == ("fail", "TooLarge", 0)
        assert f"is {solution.stat().st_size:,} bytes, over the limit of {LIMIT:,}" in verdict["error_tail"]
        assert peak - baseline < 100 * MiB, (solution.name, peak, baseline)
    out, peak = soak_with_peak(tmp_path, *task, str(under))
    verdict = json.loads(out)
    assert (verdict["result"], verdict["suspicious"]) == ("pass", "")
    assert peak - baseline < 100 * MiB, (peak, baseline)


COPY = ENTRY + """
import shutil
with open(sys.argv[5], "rb") as source, open(workspace + "/" + entry, "wb") as target:
    shutil.copyfileobj(source, target)
print("copied")
"""
"""An agent that writes the entry file from the file named by its first argument, a chunk at a time."""


@pytest.mark.slow
def test_an_attempt_fails_a_large_file_at_the_harness_memory_of_a_small_one(fast_sim, data_dir, tmp_path):
    """One-attempt nights, each `soak run` a process of its own, whose agent writes a small wrong solution (judged in
    full), 64 MiB, or 2 MiB of valid Python: the large ones fail TooLarge unread, the round keeps their head, and the
    harness's peak stays within 100 MiB of the small one's night."""
    _, base_url = fast_sim()

    def night(name: str, write) -> tuple[dict, Path, int, int]:
        """The night's row, the entry file its round kept, the harness's peak and the size of the file written."""
        folder = tmp_path / name
        (folder / "agent").mkdir(parents=True)
        source = folder / "agent" / "source.py"
        write(source)
        arguments = script_night_args(folder, base_url, COPY, str(source), budgets="task_seconds = 60")
        _, peak = soak_with_peak(folder, *arguments, env={**os.environ, "SOAK_DATA_DIR": str(folder / "data")})
        run = folder / "data" / "night"
        [row] = pd.read_csv(run / "tasks.csv", keep_default_na=False).to_dict("records")
        [kept] = run.glob("work/*/*/round-1/*.py")
        return row, kept, peak, source.stat().st_size

    row, _, baseline, _ = night("small", lambda path: path.write_text("def unrelated():\n    return None\n"))
    assert row["outcome"] == "fail" and row["tests_total"] > 0, row["error_tail"]
    for name, write in (("huge", lambda path: filler(path, 64 * MiB)),
                        ("padded", lambda path: path.write_text(valid_python(2 * MiB)))):
        row, kept, peak, size = night(name, write)
        assert (row["outcome"], row["error_kind"]) == ("fail", "TooLarge"), row["error_tail"]
        assert f"is {size:,} bytes, over the limit of {LIMIT:,} bytes" in row["error_tail"]
        assert kept.stat().st_size == HEAD_BYTES
        assert peak - baseline < 100 * MiB, (name, peak, baseline)
