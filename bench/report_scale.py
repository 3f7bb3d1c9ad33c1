"""Report scale: render synthetic 8 h runs (10 calls a task, 5 s samples); time and size.

Single file (`--sizes`, default 1k and 10k tasks): the one-file report. Report folder (`--folders`, default 480 and
10k attempts): every attempt with a full work folder (transcript, round files; one in 50 a transcript too long for a
page), rendered to index.html plus a page per problem and per attempt; the folder's size and its largest page."""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the synthetic run folders are test code

from soak.record.read import load_run  # noqa: E402
from soak.report.render import render_report  # noqa: E402
from tests.synth import build_run  # noqa: E402

TARGET_SECONDS, TARGET_MB, TARGET_RATIO = 15.0, 5.0, 12.0
FOLDER_SECONDS, FOLDER_MB, PAGE_MB = 60.0, 150.0, 5.0
"""The report folder of an 8 h night of 480 attempts: rendered within a minute, at most 150 MB, no page over 5 MB."""


def measure(root: Path, tasks: int, repeat: int) -> tuple[float, float, int, int]:
    """Build a run folder (untimed), then time renders; returns the best seconds, HTML MB, call and sample rows."""
    folder = build_run(root, run_id=f"scale-{tasks}", tasks=tasks, calls_per_task=10, hours=8, sample_seconds=5,
                       vary_calls=False, seed=1)
    run = load_run(folder)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        out = render_report([folder], root / f"scale-{tasks}.html")
        timings.append(time.perf_counter() - started)
    # The best of a few: other processes on a shared machine only ever add time.
    return min(timings), out.stat().st_size / 2**20, len(run.calls), len(run.samples)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_folder(root: Path, tasks: int, repeat: int) -> dict[str, float]:
    """Build a run with work folders (untimed), render its report folder; the best wall and CPU seconds, sizes."""
    run = build_run(root, run_id=f"night-{tasks}", tasks=tasks, calls_per_task=10, hours=8, sample_seconds=5,
                    vary_calls=False, seed=1, work=True)
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), cpu_seconds()
        index = render_report([run], root / f"report-{tasks}")
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu)
    files = [p for p in index.parent.rglob("*") if p.is_file()]
    pages = [p for p in files if p.suffix == ".html"]
    work = sum(p.stat().st_size for p in (run / "work").rglob("*") if p.is_file())
    return {"seconds": min(walls), "cpu": min(cpus), "folder_mb": sum(p.stat().st_size for p in files) / 2**20,
            "pages": len(pages), "largest_mb": max(p.stat().st_size for p in pages) / 2**20,
            "work_mb": work / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="Task counts of the single file; the first two are "
                        "compared ('' to skip).")
    parser.add_argument("--folders", default="480,10000", help="Attempt counts of the report folder ('' to skip).")
    parser.add_argument("--repeat", type=int, default=3, help="Renders per size; the fastest counts.")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            seconds, mb, calls, samples = measure(Path(tmp), n, args.repeat)
            results[n] = seconds
            verdict = "ok" if seconds <= TARGET_SECONDS and mb <= TARGET_MB else "OVER TARGET"
            print(f"{n:>6} tasks ({calls} calls, {samples} samples): {seconds:6.2f} s, HTML {mb:.2f} MB  [{verdict}]")
        if len(sizes) >= 2:
            ratio = results[sizes[1]] / results[sizes[0]]
            verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
            print(f"time ratio {sizes[1]}/{sizes[0]}: {ratio:.2f}  (target <= {TARGET_RATIO:.0f})  [{verdict}]")
        for n in [int(x) for x in args.folders.split(",") if x]:
            f = measure_folder(Path(tmp), n, args.repeat if n <= 1000 else 1)
            ok = f["seconds"] <= FOLDER_SECONDS and f["folder_mb"] <= FOLDER_MB and f["largest_mb"] <= PAGE_MB
            verdict = "ok" if ok else "OVER TARGET" if n <= 1000 else "renders"
            print(f"{n:>6} attempts, report folder: {f['seconds']:6.2f} s ({f['cpu']:.2f} s CPU), "
                  f"{f['pages']} pages, {f['folder_mb']:.1f} MB (work folders {f['work_mb']:.0f} MB), "
                  f"largest page {f['largest_mb']:.2f} MB  [{verdict}]")
    print(f"(on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
