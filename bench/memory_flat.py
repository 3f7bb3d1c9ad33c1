"""Harness memory over a long run: 5,000 task attempts against the zero-latency sim, RSS sampled throughout.

The sim runs in its own process so only the harness is measured; solutions are judged against the reference
(no pytest) so the run is about the runner, recorder, LLM layer and delegation loop. Growth is end minus the
RSS after a warm-up (imports, first connections, caches); the target is <= 25 MB.

    .venv/bin/python bench/memory_flat.py [--tasks 5000] [--concurrency 4]
"""

import argparse
import io
import tempfile
import threading
import time
from pathlib import Path

import psutil
from rich.console import Console

from soak.config import Endpoint, SoakConfig, redact
from soak.night.wiring import SessionOptions, run_night
from soak.record.folder import RunFolder
from soak.record.read import read_rows
from soak.record.schema import RunInfo, RunLimits, TaskRow
from soak.sandbox.judge import Verdict
from soak.sim.server import start_subprocess
from soak.tasks.suites import load_suites

MB = 2**20
BANK = ("word-frequency", "luhn-checksum", "balanced-brackets", "pascal-row", "fizzbuzz-rules", "isbn-validate")


def reference_judge(task, source: str, *, keep_dir: Path | None = None) -> Verdict:
    ok = source.strip() == task.reference.strip()
    return Verdict(outcome="pass" if ok else "fail", tests_passed=int(ok), tests_total=1)


class RssSampler(threading.Thread):
    """RSS of this process every `interval` seconds, with the number of finished tasks at that moment."""

    def __init__(self, tasks_csv: Path, interval: float = 0.5):
        super().__init__(daemon=True)
        self.tasks_csv, self.interval = tasks_csv, interval
        self.samples: list[tuple[float, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        start = time.monotonic()
        while not self.done.wait(self.interval):
            rows = self.tasks_csv.read_bytes().count(b"\n") - 1 if self.tasks_csv.exists() else 0
            self.samples.append((time.monotonic() - start, rows, me.memory_info().rss))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--warmup-tasks", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        suite = f"dir:{Path(__file__).resolve().parent.parent / 'tasks'}"
        tasks = [t for t in load_suites(suite) if t.id in BANK]
        sim, url = start_subprocess("zero", suite=suite)
        try:
            config = SoakConfig(
                endpoints={"sim": Endpoint(base_url=url, model="soak-sim", calls_per_second=1000, retries=1,
                                        retry_backoff_seconds=0.01)},
                roles={"orchestrator": "sim", "coder": "sim"}, suite=suite, concurrency=args.concurrency,
                sampling={"interval_seconds": 5},
            )
            folder = RunFolder(Path(tmp) / "bench")
            folder.path.mkdir()
            info = RunInfo(run_id="bench", created_at=time.time(), config=redact(config.model_dump(mode="json")),
                           limits=RunLimits(max_tasks=args.tasks))
            folder.write_info(info)
            sampler = RssSampler(folder.path / "tasks.csv")
            sampler.start()
            started = time.monotonic()
            run_night(folder, info, config, tasks,
                      SessionOptions(judge=reference_judge, quiet=True, console=Console(file=io.StringIO())))
            seconds = time.monotonic() - started
            sampler.done.set()
            sampler.join()
        finally:
            sim.terminate()
            sim.wait()
        rows = list(read_rows(folder.path / "tasks.csv", TaskRow))
        calls = (folder.path / "calls.csv").read_bytes().count(b"\n") - 1

    samples = sampler.samples
    warm = next((s for s in samples if s[1] >= args.warmup_tasks), samples[0])
    start_rss, end_rss = warm[2], samples[-1][2]
    peak = max(s[2] for s in samples)
    print(f"tasks {len(rows)} ({sum(r.outcome == 'pass' for r in rows)} passed), calls {calls}, "
          f"{seconds:.0f} s ({len(rows) / seconds:.1f} tasks/s), concurrency {args.concurrency}")
    print(f"RSS first sample {samples[0][2] / MB:.1f} MB; after {warm[1]} tasks (warm) {start_rss / MB:.1f} MB; "
          f"end {end_rss / MB:.1f} MB; peak {peak / MB:.1f} MB")
    print(f"growth after warm-up: {(end_rss - start_rss) / MB:+.1f} MB over {len(rows) - warm[1]} tasks "
          f"(target <= 25 MB): {'OK' if end_rss - start_rss <= 25 * MB else 'OVER'}")
    for at, done, rss in samples[:: max(1, len(samples) // 10)]:
        print(f"  {at:6.0f} s  {done:5d} tasks  {rss / MB:7.1f} MB")


if __name__ == "__main__":
    main()
