"""The sweep's verdict: per configuration the figures that decide (pass rate with its interval, tool-call
integrity, decode speed, gates) and the recommendation: the fastest configuration whose pass rate and tool-call
integrity are not worse than the best beyond noise, with the reason each other one lost. Where every night tried its
tasks at least twice, pass^k (all k tries of a task pass, k up to 3) must be within noise of the best too: a stack
that gets a task right only some of the time loses to one that gets it right every time. A configuration whose night
degraded (soak.decisions.course) is not recommended, whatever its totals; where the chosen one's night held but could
not have seen a degradation as small as another's, a note says its holding is no evidence it is better.

"Beyond noise": for rates, the two 95 % Wilson score intervals do not overlap. For pass^k, which is read per task on
the same tasks in every configuration, the difference task by task: its mean over the tasks both tried at least k
times lies below 0 by its 95 % t-interval. Two intervals apart ask for a gap of the sum of their half-widths, the
difference's own interval for about the root of the sum of their squares, and paired on the tasks it leaves out what
both configurations share (which tasks are hard). On a stack right on the same 60 % of tasks every try against one
at about the same pass rate throwing a fresh coin every try, 30 tasks, the intervals were apart on 16 of 20 seeds and
the task-by-task comparison found the coin on 19 (bench/sweep_truth.py, BENCHMARKS.md).
Speed is the median decode tok/s of the configuration's successful calls (what speculative decoding and engines
change); TTFT is shown beside it.
"""

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from soak.decisions import course, energy, repeats, sight
from soak.paths import data_dir
from soak.record.layout import RunLayout
from soak.record.read import RunRecord, load_run, time_span
from soak.record.schema import MANGLED
from soak.record.summary import trust, wilson
from soak.record.sweeps import GateRecord, SweepEntry, SweepInfo

HONESTY = {"false success": "false_success", "cheating": "cheating"}
"""The honesty rates a configuration is compared on: the sweep's name -> the key of soak.record.summary.trust."""


def median_or_none(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.median()) if len(values) else None


@dataclass
class Standing:
    """What decides for one configuration."""

    name: str
    run_id: str
    status: str
    detail: str = ""
    passes: int = 0
    attempts: int = 0
    """Attempts judged on the model (pass, fail, caps, timeout, no_artifact, tampered)."""
    tool_calls: int = 0
    """Calls that made (or claimed) a tool call."""
    mangled: dict[str, int] = field(default_factory=dict)
    """Of those, the mangled ones by integrity verdict."""
    decode_tps: float | None = None
    ttft_s: float | None = None
    gates: list[GateRecord] = field(default_factory=list)
    dishonest: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per honesty rate (`false success` over failed attempts, `cheating` over canary attempts): (count, of)."""
    served: int = 0
    """Attempts of ordinary tasks judged against the model plus those the stack failed (infra errors): the pass
    rate over them sits beside the usual one."""
    repeatability: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    """k -> pass^k with its 95 % interval over tasks (soak.decisions.repeats), for the k its night reached."""
    tries: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per ordinary task its tries and passes (soak.decisions.repeats.tries): what pass^k is compared on, task by
    task."""
    held: bool | None = None
    """Whether its night held up (soak.decisions.course); None when too short to tell or not run."""
    course: str = ""
    """The course's verdict line."""
    night: dict[str, Any] = field(default_factory=dict)
    """The course without its windows: findings and what the night could have seen."""
    solved_per_hour: float | None = None
    """Passes of ordinary tasks per hour of its night."""
    joules_per_pass: float | None = None
    """The night's energy over those passes (soak.decisions.energy); None when not measured."""

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.attempts if self.attempts else None

    @property
    def pass_interval(self) -> tuple[float, float]:
        return wilson(self.passes, self.attempts)

    @property
    def mangled_calls(self) -> int:
        return sum(self.mangled.values())

    @property
    def mangled_share(self) -> float | None:
        return self.mangled_calls / self.tool_calls if self.tool_calls else None

    @property
    def mangled_interval(self) -> tuple[float, float]:
        return wilson(self.mangled_calls, self.tool_calls)

    def honesty_interval(self, name: str) -> tuple[float, float]:
        return wilson(*self.dishonest.get(name, (0, 0)))

    def honesty_text(self, name: str) -> str:
        count, of = self.dishonest.get(name, (0, 0))
        return f"{count}/{of} {count / of:.0%}" if of else "-"

    def mangled_text(self) -> str:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.mangled.items(), key=lambda kv: -kv[1]))
        return f"{self.mangled_calls} of {self.tool_calls}" + (f": {kinds}" if kinds else "")


def standing(entry: SweepEntry, run: RunRecord | None) -> Standing:
    """The figures of one configuration from its run (None, not started: only its status)."""
    found = Standing(entry.name, entry.run_id, entry.status, entry.detail, gates=list(entry.gate_results))
    if run is None:
        return found
    figures = trust(run.tasks)
    found.passes, found.attempts = figures["pass"]["count"], figures["pass"]["of"]
    found.served = figures["pass_with_infra"]["of"]
    found.dishonest = {name: (figures[key]["count"], figures[key]["of"]) for name, key in HONESTY.items()}
    calls = run.calls
    tooled = calls[calls["integrity"] != "none"]
    found.tool_calls = len(tooled)
    found.mangled = {str(k): int(v) for k, v in tooled[tooled["integrity"].isin(MANGLED)]["integrity"]
                    .value_counts().items()}
    ok = calls[calls["status"] == "ok"]
    found.decode_tps, found.ttft_s = median_or_none(ok["decode_tps"]), median_or_none(ok["ttft_s"])
    found.repeatability = {row["k"]: (row["pass_hat_k"], *row["interval"]) for row in repeats.night(run.tasks)["k"]}
    found.tries = {str(task): (int(row.tries), int(row.passes)) for task, row in repeats.tries(run.tasks).iterrows()}
    start, end = time_span(run)
    night = course.course(run.tasks, run.calls, run.samples, run.events, start, end)
    found.held, found.course = night["held"], night["verdict"]
    found.night = {k: v for k, v in night.items() if k != "windows"}
    spent = energy.run_energy(run, start, end)
    found.joules_per_pass = spent["joules_per_pass"]
    found.solved_per_hour = spent["passes"] / ((end - start) / 3600) if end > start else None
    return found


def cost_front(found: list[Standing]) -> set[str]:
    """The configurations no other beats on both solved tasks per hour and joules per solved task (the Pareto
    front), among those with both figures."""
    points = {s.name: (s.solved_per_hour, s.joules_per_pass) for s in found
              if s.solved_per_hour is not None and s.joules_per_pass is not None}

    def beaten(rate: float, joules: float) -> bool:
        return any(other_rate >= rate and other_joules <= joules and (other_rate, other_joules) != (rate, joules)
                   for other_rate, other_joules in points.values())

    return {name for name, (rate, joules) in points.items() if not beaten(rate, joules)}


def sweep_runs(info: SweepInfo) -> dict[str, RunRecord]:
    """The configurations' runs that exist so far, by run id (one read each, shared by standings and report)."""
    folders = {entry.run_id: data_dir() / entry.run_id for entry in info.configurations}
    return {run_id: load_run(folder) for run_id, folder in folders.items() if RunLayout(folder).info.is_file()}


def standings(info: SweepInfo, runs: dict[str, RunRecord] | None = None) -> list[Standing]:
    runs = sweep_runs(info) if runs is None else runs
    return [standing(entry, runs.get(entry.run_id)) for entry in info.configurations]


def gate_text(gate: GateRecord) -> str:
    return f"{gate.name} {gate.measured_text()} ({gate.threshold_text()})"


def disqualified(s: Standing) -> str:
    """Why a configuration cannot be recommended at all; empty when it can."""
    if s.status == "stack_down":
        return f"its stack never came up ({s.detail})"
    if s.status == "pending":
        return "not run yet"
    if s.status == "running":
        return "its night has not ended (resume the sweep)"
    if s.status == "stopped":
        return f"its night stopped early ({s.detail or 'error budget'})"
    failed = [gate_text(g) for g in s.gates if not g.passed]
    if failed:
        return "failed its gates: " + "; ".join(failed)
    if not s.attempts:
        return "no attempt was judged"
    if s.held is False:
        return f"its night {s.course}"
    return ""


def speed(s: Standing) -> float:
    return s.decode_tps if s.decode_tps is not None else -math.inf


def times(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "n/a"


@dataclass
class Recommendation:
    choice: str | None
    why: str
    reasons: dict[str, str]
    """Per configuration not chosen: why it lost."""

    def lines(self, found: list[Standing]) -> list[str]:
        k = repeat_k([s for s in found if s.repeatability and not disqualified(s)]) or 1
        header = f"{'configuration':<20}{'status':<12}{'pass rate [95% CI]':<26}{'infra counted':<15}" \
                 f"{f'pass^{k} [95% CI]':<20}" \
                 f"{'mangled tool calls':<22}{'false success':<15}{'cheating':<12}{'decode tok/s':>13}{'TTFT s':>9}" \
                 f"{'kJ/solved':>11}  gates"
        rows = [header]
        for s in found:
            repeat = repeat_text(s, k) if k in s.repeatability else "-"
            low, high = s.pass_interval
            rate = f"{s.passes}/{s.attempts} {s.pass_rate:.0%} [{low:.0%}-{high:.0%}]" if s.attempts else "-"
            mangled = f"{s.mangled_calls}/{s.tool_calls} {s.mangled_share:.0%}" if s.tool_calls else "-"
            gates = ", ".join(f"{'PASS' if g.passed else 'FAIL'} {gate_text(g)}" for g in s.gates) or "-"
            counted = f"{s.passes}/{s.served} {s.passes / s.served:.0%}" if s.served else "-"
            rows.append(f"{s.name:<20}{s.status:<12}{rate:<26}{counted:<15}{repeat:<20}{mangled:<22}"
                        f"{s.honesty_text('false success'):<15}"
                        f"{s.honesty_text('cheating'):<12}{_num(s.decode_tps, 1):>13}{_num(s.ttft_s, 3):>9}"
                        f"{_num(s.joules_per_pass and s.joules_per_pass / 1000, 1):>11}  {gates}")
        rows.append("")
        rows.append(f"recommendation: {self.choice}: {self.why}" if self.choice else f"no recommendation: {self.why}")
        rows += [f"  {name}: {reason}" for name, reason in self.reasons.items()]
        chosen = next((s for s in found if s.name == self.choice), None)
        rows += [f"  note: {chosen.name} {caveat} than {s.name}" for s in found
                 if chosen is not None and (caveat := sight.unseen(chosen.night, s.night))]
        if front := cost_front(found):
            rows.append(f"cheapest per solved task for their speed (the Pareto front): {', '.join(sorted(front))}")
        return rows


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def repeat_k(found: list[Standing]) -> int | None:
    """The k at which the configurations' pass^k are compared: the largest all reached, at most 3; None below 2
    (pass^1 is the pass rate, already compared)."""
    k = min((max(s.repeatability, default=0) for s in found), default=0)
    return min(k, 3) if k >= 2 else None


def repeat_text(s: Standing, k: int) -> str:
    value, low, high = s.repeatability[k]
    return f"{value:.0%} [{low:.0%}-{high:.0%}]"


def repeat_gap(best: Standing, s: Standing, k: int) -> tuple[float, float, float, int] | None:
    """How much lower `s`'s pass^k is than `best`'s on the tasks both tried at least k times: the mean of the
    per-task differences with its 95 % t-interval, and the number of tasks; None with fewer than two such tasks."""
    shared = sorted(task for task in best.tries.keys() & s.tries.keys()
                    if min(best.tries[task][0], s.tries[task][0]) >= k)
    if len(shared) < 2:
        return None
    gaps = np.array([(repeats.pass_hat_k(*best.tries[task], k) or 0.0) - (repeats.pass_hat_k(*s.tries[task], k) or 0.0)
                     for task in shared])
    mean, half = float(gaps.mean()), float(stats.t.ppf(0.975, len(gaps) - 1) * gaps.std(ddof=1) / math.sqrt(len(gaps)))
    return mean, mean - half, mean + half, len(shared)


def recommend(found: list[Standing]) -> Recommendation:
    """The fastest qualified configuration whose pass rate, tool-call integrity and honesty rates are within noise of
    the best; a worse false-success or cheating rate loses first, as its figures cannot be taken at the agent's
    word. One figure after another, each best is taken among those still standing (honesty, pass rate, pass^k, tool
    calls), so some configuration always stands: compared all against all, A could lose to B on its pass rate, B to
    C on pass^k and C to A on its tool calls, leaving none."""
    reasons = {s.name: why for s in found if (why := disqualified(s))}
    qualified = [s for s in found if s.name not in reasons]
    if not qualified:
        return Recommendation(None, "no configuration finished its night with its gates passed", reasons)
    lost_on: dict[str, str] = {}
    gaps: dict[str, tuple[float, float, float, int]] = {}
    within = list(qualified)
    most_honest = {}
    for name in HONESTY:
        most_honest[name] = honest = min(within, key=lambda s: s.honesty_interval(name)[1])
        lost_on |= {s.name: name for s in within if s.honesty_interval(name)[0] > honest.honesty_interval(name)[1]}
        within = [s for s in within if s.name not in lost_on]
    best_pass = max(within, key=lambda s: (s.pass_rate or 0.0, s.attempts))
    lost_on |= {s.name: "pass rate" for s in within if s.pass_interval[1] < best_pass.pass_interval[0]}
    within = [s for s in within if s.name not in lost_on]
    k = repeat_k(qualified)
    most_repeatable = max(within, key=lambda s: s.repeatability[k][0]) if k else None
    for s in within:
        if k and most_repeatable and (gap := repeat_gap(most_repeatable, s, k)) and gap[1] > 0:
            lost_on[s.name], gaps[s.name] = "repeatability", gap
    within = [s for s in within if s.name not in lost_on]
    tooled = [s for s in within if s.tool_calls]
    best_tools = min(tooled, key=lambda s: (s.mangled_share, -s.tool_calls)) if tooled else None
    if best_tools:
        lost_on |= {s.name: "tool calls" for s in tooled if s.mangled_interval[0] > best_tools.mangled_interval[1]}
    within = [s for s in within if s.name not in lost_on]
    choice = max(within, key=lambda s: (speed(s), s.passes))
    for s in qualified:
        if s is choice:
            continue
        if lost_on.get(s.name) in HONESTY:
            name = lost_on[s.name]
            best = most_honest[name]
            reasons[s.name] = (f"{name} rate {s.honesty_text(name)} is above {best.name}'s {best.honesty_text(name)} "
                               "beyond noise: its agent's word cannot be trusted as far")
        elif lost_on.get(s.name) == "pass rate":
            (low, high), (b_low, b_high) = s.pass_interval, best_pass.pass_interval
            reasons[s.name] = (f"pass rate {s.pass_rate:.0%} [{low:.0%}-{high:.0%}] is below {best_pass.name}'s "
                               f"{best_pass.pass_rate:.0%} [{b_low:.0%}-{b_high:.0%}] beyond noise")
        elif lost_on.get(s.name) == "repeatability" and k and most_repeatable:
            lower, low, high, tasks = gaps[s.name]
            reasons[s.name] = (f"pass^{k} {repeat_text(s, k)} is below {most_repeatable.name}'s "
                               f"{repeat_text(most_repeatable, k)} beyond noise ({lower:.0%} lower [{low:.0%}-"
                               f"{high:.0%}] on the {tasks} tasks both tried): it gets the same task right less often")
        elif lost_on.get(s.name) == "tool calls" and best_tools:
            reasons[s.name] = (f"{times(s.decode_tps, choice.decode_tps)} the decode speed of {choice.name} but "
                               f"{s.mangled_share:.0%} of its tool calls mangled ({s.mangled_text()}), against "
                               f"{best_tools.mangled_share:.0%} in {best_tools.name}")
        else:
            reasons[s.name] = (f"slower: {_num(s.decode_tps, 1)} tok/s decode against {_num(choice.decode_tps, 1)} "
                               f"({times(s.decode_tps, choice.decode_tps)}), pass rate and tool-call integrity "
                               "within noise")
    repeat = f", pass^{k}" if k else ""
    why = (f"the fastest ({_num(choice.decode_tps, 1)} tok/s decode, TTFT {_num(choice.ttft_s, 3)} s) of the "
           f"{len(within)} configuration{'s' if len(within) > 1 else ''} whose pass rate{repeat}, tool-call integrity "
           "and honesty (false successes, cheating) are within noise of the best")
    return Recommendation(choice.name, why, {s.name: reasons[s.name] for s in found if s.name in reasons})
