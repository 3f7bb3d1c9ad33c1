"""The course of the night on the embedded default's real nights (no endpoint: soak's own llama.cpp server on the
bundled model, whose calls are not streamed). Two nights of the same attempts: on one, CPU-bound processes started
half-way (once half its attempts are recorded) slow the server severalfold, and the verdict names the slowdown in
call duration or seconds per token near their start (by two windows past the first they held whole); the other
holds. The server's memory, bounded by its prompt cache, reads alike on both and stays under that bound. A night is a
number of attempts, not minutes, so that on a slower or busier machine it still holds enough of them for the course's
windows; the coder alone (`mode = "direct"`) and one test round each make them short."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from soak.stack.servers import CACHE_MIB, embedded_threads
from tests.helpers import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(3600)]

SOAK = [sys.executable, "-m", "soak.cli"]
ATTEMPTS = 20
"""About 75 s unslowed on two quiet cores for each half; slowed about fourfold, the night's second half is 10-s
windows enough on both sides of the change (a night of 12 slowed tenfold left 5 windows with attempts, 6 needed)."""
HOGS = embedded_threads()
"""One per server thread, each in a session of its own, as the server is: where the kernel shares the CPU between
sessions first (sched_autogroup), hogs in the test's one session took no more than half of it and left the server as
fast as before. llama.cpp's threads wait for each other spinning, so a hog beside each slows its calls three- to
fourfold on two quiet cores (0.04 → 0.15 s per completion token), and the slowed half takes three times the quiet one,
leaving four windows or more before the change; three per thread slowed them tenfold on CI, and its 60-s windows then
left the change in the second, where no step can be dated."""
HOG = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass"
"""Busy until the test ends, and then too should the test be killed (its own session outlives it)."""
HOGGED = 1 / 2
"""Hogs once this share of the attempts is recorded: the slowed ones take several times as long."""
TORN = (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, KeyError, OSError)
"""A record read while its writer writes it, or before it exists."""
LATENCY = {"duration_p95", "s_per_token"}
BASE_MIB = 640
"""The server's memory besides its prompt cache: the model, the KV and compute buffers it touched, Python and
glibc's heaps (0.37 GiB at its start, up to ~0.47 GiB measured; llama-cpp-python's own cache took it past 2 GiB)."""


def attempts(folder: Path) -> int:
    return len(pd.read_csv(folder / "tasks.csv"))


def night(tmp_path: Path, run_id: str, slowed: bool) -> tuple[dict, float | None]:
    """A night of ATTEMPTS, reported: its summary's run, and when the hogs started (seconds from its start)."""
    env = {**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data")}
    folder = tmp_path / "data" / run_id
    config = tmp_path / "soak.toml"
    config.write_text('mode = "direct"\n[budgets]\nmax_rounds = 1\n')
    night_run = subprocess.Popen([*SOAK, "run", "--config", str(config), "--tasks", str(ATTEMPTS), "--quiet",
                                  "--run-id", run_id], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
    hogs: list[subprocess.Popen] = []
    hogged_at = None
    try:
        if slowed:
            wait_until(lambda: attempts(folder) >= ATTEMPTS * HOGGED, timeout=1200, interval=0.2,
                       what="half the attempts", process=night_run, ignoring=TORN)
            hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(HOGS)]
            hogged_at = time.time()
        _, errors = night_run.communicate(timeout=2400)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if night_run.poll() is None:
            night_run.terminate()
            night_run.wait(timeout=120)
    assert night_run.returncode == 0, errors[-2000:]
    report = tmp_path / f"report-{run_id}"
    reported = subprocess.run([*SOAK, "report", run_id, "--output", str(report)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    assert reported.returncode == 0, reported.stderr[-2000:]
    [run] = json.loads((report / "summary.json").read_text())["runs"]
    started = json.loads((folder / "run.json").read_text())["started_at"]
    return run, None if hogged_at is None else hogged_at - started


def memory(course: dict) -> tuple:
    """How the verdict describes the server's memory: its growth's shape (none, levelled off, a leak) and whether a
    finding named it."""
    grown = course["memory_growth"]
    named = sorted({f["measure"] for f in course["findings"] if f["measure"] == "server_rss_bytes"})
    return (None if grown is None else grown["levelled"]), named


def test_a_night_slowed_half_way_names_the_slowdown_near_its_start_and_the_same_night_without_it_holds(tmp_path):
    pytest.importorskip("llama_cpp")
    slowed, hogged_at = night(tmp_path, "slowed", slowed=True)
    quiet, _ = night(tmp_path, "quiet", slowed=False)
    course, width = slowed["course"], slowed["course"]["window_s"]
    assert hogged_at is not None and course["held"] is False, course["verdict"]
    assert set(course["latency"]) == LATENCY and "calls were not streamed" in course["verdict"]
    first = min((f for f in course["findings"] if f["degrades"]), key=lambda f: f["at_s"])
    assert first["measure"] in LATENCY, course["findings"]
    # Near its start: no earlier than the window the hogs started in, no later than two windows after the first one
    # they held whole (a call belongs to the window it started in; one started before them runs partly slowed).
    assert width * (hogged_at // width) <= first["at_s"] <= width * (math.ceil(hogged_at / width) + 2), \
        (first, hogged_at)
    assert course["verdict"].startswith(f"degraded from {first['clock']}: {first['said']}"), course["verdict"]
    assert quiet["course"]["held"] is True, quiet["course"]["verdict"]
    assert memory(course) == memory(quiet["course"]), (course["verdict"], quiet["course"]["verdict"])
    for run in (slowed, quiet):
        windows = pd.DataFrame(run["course"]["windows"])
        assert windows["server_rss_bytes"].max() < (BASE_MIB + CACHE_MIB) * 2**20, run["course"]["verdict"]
