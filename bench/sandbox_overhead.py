"""Sandbox overhead: the same tests run bare (`python -m pytest -q` in a temp dir) and through judge(), interleaved.

Usage: python bench/sandbox_overhead.py [--task ID_OR_DIR] [--runs N] [--baseline CHECKOUT]
The sandbox turns pytest's plugin autoloading off, so a second bare series runs with `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`
too: the like-for-like ratio, the one with a target (<= 1.3). Prints the medians, their ratios and the median of the
ratios within each round (steadier where other work loads the machine unevenly), and the load average before and
after. One warm-up of each side is not counted, so the isolation probe and the trusted test collection (cached per
process) stay out. `--baseline` judges in another checkout's soak as well (a git worktree of an older commit, say:
this script in a process of its own with that checkout first on the path, `--serve`), a fourth series in the same
rounds, for a before and after that a busy machine does not skew.
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


def serve(task: TaskSpec) -> None:
    """The baseline's side: a judged run for each line read, its seconds written back."""
    sandbox_run(task)
    print("ready", flush=True)
    for _ in sys.stdin:
        print(sandbox_run(task), flush=True)


class Baseline:
    """Another checkout's judge(), run by this script with `--serve` in a process with that checkout first on the
    path (its soak, its plugin, its jail)."""

    def __init__(self, checkout: Path, task: str) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", "--task", task], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, "PYTHONPATH": str(checkout.resolve())})
        if self.line() != "ready":
            raise SystemExit(f"the baseline did not start (exit code {self.process.wait()})")

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def run(self) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        line = self.line()
        if not line:
            raise SystemExit(f"the baseline's run failed (exit code {self.process.wait()})")
        return float(line)

    def close(self) -> None:
        self.process.communicate(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=str(ROOT / "tasks" / "word-frequency"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--baseline", metavar="CHECKOUT", type=Path,
                        help="a checkout of soak whose judge() runs beside this one's in the same rounds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    task = find_task(args.task)
    if args.serve:
        serve(task)
        return
    baseline = Baseline(args.baseline, args.task) if args.baseline else None
    bare_run(task), sandbox_run(task)  # warm-up: probe, trusted collection, file caches
    load_before = os.getloadavg()
    bare, lean, sandboxed, before = [], [], [], []
    for _ in range(args.runs):
        bare.append(bare_run(task))
        lean.append(bare_run(task, autoload=False))
        sandboxed.append(sandbox_run(task))
        if baseline is not None:
            before.append(baseline.run())
    load_after = os.getloadavg()
    if baseline is not None:
        baseline.close()
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
    if before:
        print(f"baseline sandbox ({args.baseline}) median: {statistics.median(before) * 1000:.0f} ms, "
              f"ratio to bare without plugin autoload {statistics.median(before) / lean_median:.2f} "
              f"(within rounds: {statistics.median(s / b for s, b in zip(before, lean, strict=True)):.2f})")


if __name__ == "__main__":
    main()
