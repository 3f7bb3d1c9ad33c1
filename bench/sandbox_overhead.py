"""Sandbox overhead: the same tests run bare (`python -m pytest -q` in a temp dir) and through judge(), interleaved.

Usage: python bench/sandbox_overhead.py [--task ID_OR_DIR] [--runs N]
The sandbox turns pytest's plugin autoloading off, so a second bare series runs with `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`
too: the like-for-like ratio, the one with a target (<= 1.3). Prints the medians, their ratios and the median of the
ratios within each round (steadier where other work loads the machine unevenly), and the load average before and
after. One warm-up of each side is not counted, so the isolation probe and the trusted test collection (cached per
process) stay out.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soak.sandbox.judge import isolation_kind, judge
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import find_task

ROOT = Path(__file__).resolve().parents[1]


def bare_run(task: TaskSpec, autoload: bool = True) -> float:
    with tempfile.TemporaryDirectory(prefix="soak-bare-") as tmp:
        for name, text in task.tests.items():
            Path(tmp, name).write_text(text)
        Path(tmp, task.entry).write_text(task.reference)
        started = time.perf_counter()
        env = dict(os.environ) if autoload else {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q"], cwd=tmp, capture_output=True, env=env)
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bare run failed:\n{done.stdout.decode()[-2000:]}")
    return elapsed


def sandbox_run(task: TaskSpec) -> float:
    started = time.perf_counter()
    verdict = judge(task, task.reference)
    elapsed = time.perf_counter() - started
    if verdict.result != "pass":
        raise SystemExit(f"sandbox run did not pass: {verdict.error_kind}\n{verdict.error_tail}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=str(ROOT / "tasks" / "word-frequency"))
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    task = find_task(args.task)
    bare_run(task), sandbox_run(task)  # warm-up: probe, trusted collection, file caches
    load_before = os.getloadavg()
    bare, lean, sandboxed = [], [], []
    for _ in range(args.runs):
        bare.append(bare_run(task))
        lean.append(bare_run(task, autoload=False))
        sandboxed.append(sandbox_run(task))
    load_after = os.getloadavg()
    bare_median, lean_median = statistics.median(bare), statistics.median(lean)
    sandbox_median = statistics.median(sandboxed)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
          f"Python {platform.python_version()}")
    print(f"task: {task.id}, runs: {args.runs} each, interleaved, isolation: {isolation_kind()}")
    print(f"load average (1, 5, 15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.1f}' for x in load_after)}")
    print(f"bare pytest median:                    {bare_median * 1000:.0f} ms")
    print(f"bare pytest, no plugin autoload median: {lean_median * 1000:.0f} ms")
    print(f"sandbox median:                        {sandbox_median * 1000:.0f} ms")
    print(f"ratio sandbox / bare: {sandbox_median / bare_median:.2f} "
          f"(within rounds: {statistics.median(s / b for s, b in zip(sandboxed, bare, strict=True)):.2f})")
    print(f"ratio sandbox / bare without plugin autoload: {sandbox_median / lean_median:.2f} "
          f"(within rounds: {statistics.median(s / b for s, b in zip(sandboxed, lean, strict=True)):.2f}; "
          "target <= 1.3)")


if __name__ == "__main__":
    main()
