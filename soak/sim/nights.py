"""Nights of known truth: run folders written through soak.record, as a real night writes them, from a stack whose
every figure is drawn from a stated distribution and that changes once (or never) at a stated time. They measure
the course of the night (soak.decisions.course) against the truth: how often a quiet night is called degraded, how
large a change must be before it is seen, where its onset is placed (bench/course_calibration.py).

A quiet night is noisy the way real ones are: TTFT heavy-tailed (lognormal with a Pareto tail), decode speed with
slow outliers, tasks of their own difficulty (a window's pass rate is a mix of Bernoulli tasks taken in shuffled
cycles, not one coin), the server's RSS with a GC sawtooth, restarts that empty it and let it fill back to where it
was (changing nothing), an idle stretch with no attempts, and an attempt rate that rises and falls through the
night."""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from soak.config import Endpoint, SoakConfig
from soak.files import write_atomic
from soak.record.folder import CsvLog
from soak.record.layout import RunLayout
from soak.record.schema import CallRow, EventRow, RoundRow, Row, RunInfo, RunLimits, SampleRow, TaskRow

START = 1_767_222_000.0
"""Every night starts here (only offsets matter)."""
TASKS = 40
SAMPLE_S = 10.0
"""The samplers' interval."""
GIB = 2**30
MIB = 2**20
Change = Literal["pass_rate", "ttft", "decode", "leak"]
CHANGES: tuple[Change, ...] = ("pass_rate", "ttft", "decode", "leak")
MEASURE: dict[Change, str] = {"pass_rate": "pass_rate", "ttft": "ttft_p95", "decode": "decode_tps",
                              "leak": "server_rss_bytes"}
"""The course's measure each change should be found in."""


@dataclass(frozen=True)
class Night:
    """What a night is, in truth: its length, its mean attempts an hour, the seed of all its noise, and its one
    change (None: a quiet night) of `size` (pass-rate points lost; TTFT's factor; decode speed's divisor; MB a
    minute of leak) from `onset_s`. `streamed` False writes calls as a non-streaming endpoint records them: no TTFT,
    no decode speed, only their duration."""

    hours: float
    rate: float
    seed: int
    change: Change | None = None
    size: float = 0.0
    onset_s: float = 0.0
    streamed: bool = True

    @property
    def length_s(self) -> float:
        return self.hours * 3600

    @property
    def measure(self) -> str | None:
        return MEASURE[self.change] if self.change else None


def attempt_times(night: Night, rng: np.random.Generator) -> np.ndarray:
    """Start offsets of the night's attempts: a Poisson process whose rate swings ±40 % through the night (thinned
    from its peak), silent over one idle stretch of 3 % of the night."""
    length = night.length_s
    peak = night.rate * 1.4 / 3600
    times = np.sort(rng.uniform(0, length, rng.poisson(peak * length)))
    phase = rng.uniform(0, 2 * math.pi)
    swing = 1 + 0.4 * np.sin(2 * math.pi * times / length * rng.uniform(0.5, 2.0) + phase)
    kept = times[rng.uniform(0, 1.4, len(times)) < swing]
    idle_from = rng.uniform(0, 0.97 * length)
    return kept[(kept < idle_from) | (kept >= idle_from + 0.03 * length)]


def outcomes(night: Night, times: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(task index, passed) per attempt: tasks taken in a fresh shuffled order each cycle, each passing with its own
    difficulty (Beta, mean about 0.6); after a pass-rate change every task's chance is scaled so the mean falls by
    `size` points."""
    chance = rng.beta(1.5, 1.0, TASKS)
    cycles = math.ceil(len(times) / TASKS) + 1
    order = np.concatenate([rng.permutation(TASKS) for _ in range(cycles)])[: len(times)]
    p = chance[order]
    if night.change == "pass_rate":
        p = np.where(times >= night.onset_s, p * max(0.0, 1 - night.size / chance.mean()), p)
    return order, rng.uniform(size=len(times)) < p


def call_figures(night: Night, at: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per call: TTFT (lognormal around 0.4 s, one call in 30 from a Pareto tail up to ten times slower), decode
    speed (lognormal around 40 tok/s, one call in 50 at a third), completion tokens and the duration they make."""
    n = len(at)
    ttft = 0.4 * rng.lognormal(0, 0.45, n) * np.where(rng.uniform(size=n) < 1 / 30, 1 + rng.pareto(1.5, n), 1)
    decode = 40 * rng.lognormal(0, 0.12, n) * np.where(rng.uniform(size=n) < 1 / 50, 1 / 3, 1)
    after = at >= night.onset_s
    if night.change == "ttft":
        ttft = np.where(after, ttft * night.size, ttft)
    if night.change == "decode":
        decode = np.where(after, decode / night.size, decode)
    tokens = rng.integers(30, 600, n)
    return {"ttft": ttft, "decode": decode, "tokens": tokens, "duration": ttft + tokens / decode}


def restarts(night: Night, rng: np.random.Generator) -> np.ndarray:
    """One restart per four hours or so, none in the first or last tenth of the night."""
    return np.sort(rng.uniform(0.1, 0.9, rng.poisson(night.hours / 4)) * night.length_s)


def resident(night: Night, at: np.ndarray, restarted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The server's RSS: a level of 1–4 GiB with a GC sawtooth (2–6 % of it, every 3–15 min) and reading noise; it
    starts from a quarter of its level and fills up within a few minutes (weights, caches), and again after each
    restart; a leak adds `size` MB a minute from its onset (a restart does not clear it: the leak is in what the
    server keeps)."""
    level = rng.uniform(1, 4) * GIB
    period = rng.uniform(180, 900)
    saw = rng.uniform(0.02, 0.06) * level * ((at / period + rng.uniform()) % 1.0)
    since = at.copy()
    for r in restarted:
        since = np.where(at >= r, at - r, since)
    fill = 1 - 0.75 * np.exp(-since / rng.uniform(30, 90))
    leak = night.size * 1e6 / 60 * np.maximum(0, at - night.onset_s) if night.change == "leak" else 0
    return level * fill + saw + leak + rng.normal(0, 4 * MIB, len(at))


def task_rows(night: Night, times: np.ndarray, rng: np.random.Generator) -> tuple[list[Row], list[Row]]:
    """An attempt's row and its one judged round's."""
    order, passed = outcomes(night, times, rng)
    durations = rng.lognormal(math.log(90), 0.5, len(times))
    tasks: list[Row] = []
    rounds: list[Row] = []
    for n, (at, task, ok, d) in enumerate(zip(times, order, passed, durations, strict=True)):
        task_id, cycle, result = f"task-{task:02d}", n // TASKS + 1, "pass" if ok else "fail"
        tasks.append(TaskRow(run_id="night", task_id=task_id, cycle=cycle, suite="builtin", started_at=START + at,
                             ended_at=START + at + d, duration_s=d, outcome="pass" if ok else "fail", rounds=1,
                             tests_passed=5 if ok else 2, tests_total=5))
        rounds.append(RoundRow(run_id="night", task_id=task_id, cycle=cycle, round=1, result=result,
                               tests_passed=5 if ok else 2, tests_total=5))
    return tasks, rounds


def call_rows(night: Night, times: np.ndarray, rng: np.random.Generator) -> list[Row]:
    """One to six calls per attempt (1 + Poisson(1.5)), one after another from its start."""
    per = 1 + rng.poisson(1.5, len(times))
    owner = np.repeat(np.arange(len(times)), per)
    index = np.arange(len(owner)) - np.repeat(np.cumsum(per) - per, per)
    at = times[owner] + index * rng.uniform(5, 20, len(owner))
    figures = call_figures(night, at, rng)
    streamed = night.streamed
    return [CallRow(run_id="night", task_id=f"task-{o % TASKS:02d}", cycle=int(o // TASKS) + 1, call_index=int(i),
                    role="coder", endpoint="default", model="model", stream=streamed, started_at=START + a,
                    ttft_s=float(t) if streamed else None, decode_tps=float(d) if streamed else None,
                    duration_s=float(s), prompt_tokens=2000, completion_tokens=int(k))
            for o, i, a, t, d, k, s in zip(owner, index, at, figures["ttft"], figures["decode"], figures["tokens"],
                                           figures["duration"], strict=True)]


def write_rows(path: Path, model: type[Row], rows: list[Row]) -> None:
    log = CsvLog(path, model)
    try:
        for row in rows:
            log.append(row)
    finally:
        log.close()


def write(night: Night, folder: Path) -> Path:
    """The night's run folder (run.json, the tables the course reads and the attempts' rounds), as `soak run`
    leaves it."""
    rng = np.random.default_rng(night.seed)
    layout = RunLayout(folder)
    folder.mkdir(parents=True, exist_ok=True)
    times = attempt_times(night, rng)
    restarted = restarts(night, rng)
    sampled = np.arange(0, night.length_s, SAMPLE_S)
    rss = resident(night, sampled, restarted, rng)
    tasks, rounds = task_rows(night, times, rng)
    write_rows(layout.tasks, TaskRow, tasks)
    write_rows(layout.rounds, RoundRow, rounds)
    write_rows(layout.calls, CallRow, call_rows(night, times, rng))
    write_rows(layout.samples, SampleRow, [
        SampleRow(run_id="night", at=START + at, source="server:sim", metric="rss_bytes", value=float(value))
        for at, value in zip(sampled, rss, strict=True)])
    events = [EventRow(run_id="night", at=START, kind="run_start")]
    events += [EventRow(run_id="night", at=START + r, kind="restart", source="sim", detail="exit code -9")
               for r in restarted]
    write_rows(layout.events, EventRow, [*events, EventRow(run_id="night", at=START + night.length_s,
                                                          kind="run_end")])
    info = RunInfo(run_id="night", created_at=START, started_at=START, ended_at=START + night.length_s,
                   limits=RunLimits(duration_seconds=night.length_s),
                   config=SoakConfig(endpoints={"default": Endpoint(base_url="http://127.0.0.1:8000/v1", model="model",
                                                                    stream=night.streamed)}))
    write_atomic(layout.info, info.model_dump_json(indent=2))
    return folder
