"""The course of the night at scale: a synthetic 8 h run folder (written through the real CSV writers) of 10,000
attempts and 100,000 calls with 5 s telemetry, loaded once (untimed); then timed, best of a few: the windows, the
change points and trends and the verdict (soak.decisions.course), pass^k and flaky tasks (soak.decisions.repeats), the
report's section with its charts, what a solved task cost (soak.decisions.energy, from the GPU's energy counter),
and for scale the whole one-file report that includes them, side by side in one run.

    .venv/bin/python bench/course_scale.py             # 10,000 attempts (the target: the analysis in <= 10 s)
    .venv/bin/python bench/course_scale.py --tasks 1000

It prints one table; BENCHMARKS.md keeps the runs.
"""

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the synthetic run folders are test code

from soak.config import Cost  # noqa: E402
from soak.decisions import course, energy, repeats  # noqa: E402
from soak.record.read import load_run, time_span  # noqa: E402
from soak.report import build, charts  # noqa: E402
from soak.report.render import render_report  # noqa: E402
from tests.synth import build_run  # noqa: E402

TARGET_SECONDS = 10.0


def best(work: Callable[[], object], times: int) -> float:
    """The best of a few runs: other processes on a shared machine only ever add time."""
    timings = []
    for _ in range(times):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_run(Path(tmp), run_id="course", tasks=args.tasks, calls_per_task=10, hours=8,
                           sample_seconds=5, vary_calls=False, seed=1)
        run = load_run(folder)
        start, end = time_span(run)
        found: dict = {}

        def analyse() -> None:
            found.update(course.course(run.tasks, run.calls, run.samples, run.events, start, end))
            found["repeats"] = repeats.night(run.tasks)

        analysis = best(analyse, args.repeat)
        windows = best(lambda: course.windows(run.tasks, run.calls, run.samples, start, end), args.repeat)
        pass_k = best(lambda: repeats.night(run.tasks), args.repeat)
        spent = best(lambda: energy.night_energy(run.samples, run.tasks, run.calls, start, end, Cost()), args.repeat)
        clock = charts.Clock.for_span(start, end)
        section = best(lambda: build.course_view(run, {}, start, end, clock), args.repeat)
        report = best(lambda: render_report([folder], Path(tmp) / "report.html"), args.repeat)
    print(f"{len(run.tasks):,} attempts, {len(run.calls):,} calls, {len(run.samples):,} sample rows; "
          f"{len(found['windows'])} windows of {found['window_s']:g} s")
    print(f"{'step':<34}{'seconds':>9}")
    for name, seconds in (("course + repeats (the analysis)", analysis), ("  of which the windows", windows),
                          ("  of which pass^k and flaky tasks", pass_k),
                          ("energy per solved task (beside it)", spent), ("the section, with its charts", section),
                          ("whole report (for scale)", report)):
        print(f"{name:<34}{seconds:>9.2f}")
    print(f"analysis / report: {analysis / report:.2f}; target: analysis <= {TARGET_SECONDS:g} s: "
          f"{'met' if analysis <= TARGET_SECONDS else 'NOT met'}")
    print(f"verdict: {found['verdict']}")


if __name__ == "__main__":
    main()
