"""`soak compare RUN_A RUN_B`: parity of two runs of the same suite (engine A vs B, night 1 vs 2), their pass^k,
the course of each night and what a solved task cost each."""

from dataclasses import dataclass
from typing import Any

import pandas as pd

from soak.decisions import course, energy, repeats, sight
from soak.record.read import RunRecord, load_run, resolve_run_dir, time_span
from soak.record.summary import problem_table, trust


@dataclass
class Side:
    """The headline figures of one run."""

    run_id: str
    passes: int
    attempts: int
    median_ttft_s: float
    median_decode_tps: float
    median_calls: float
    trust: dict[str, Any]
    """soak.record.summary.trust: what the run's attempts claimed beside what the tests found."""
    pass_hat_k: dict[int, float]
    """k -> pass^k over the tasks tried at least k times (soak.decisions.repeats)."""
    pass_hat_k_with_infra: dict[int, float]
    """The same with the stack's failed requests counted as failed tries."""
    held: bool | None
    """Whether the night held up (soak.decisions.course); None for a night too short to tell."""
    verdict: str
    course: dict[str, Any]
    """soak.decisions.course.course without its windows: findings and what the night could have seen."""
    energy: dict[str, Any]
    """soak.decisions.energy.night_energy: what a solved task cost."""

    @property
    def pass_rate(self) -> float:
        return self.passes / self.attempts if self.attempts else 0.0


def side(run: RunRecord, table: pd.DataFrame) -> Side:
    ok_calls = run.calls[run.calls["status"] == "ok"]
    figures = trust(run.tasks)
    start, end = time_span(run)
    found = course.course(run.tasks, run.calls, run.samples, run.events, start, end)
    return Side(
        run_id=run.run_id,
        passes=figures["pass"]["count"],
        attempts=figures["pass"]["of"],
        trust=figures,
        median_ttft_s=float(ok_calls["ttft_s"].median()) if ok_calls["ttft_s"].notna().any() else float("nan"),
        median_decode_tps=float(ok_calls["decode_tps"].median()) if ok_calls["decode_tps"].notna().any()
        else float("nan"),
        median_calls=float(table["median_calls"].median()) if len(table) else float("nan"),
        pass_hat_k={row["k"]: row["pass_hat_k"] for row in repeats.night(run.tasks)["k"]},
        pass_hat_k_with_infra={row["k"]: row["pass_hat_k"]
                               for row in repeats.night(run.tasks, repeats.INFRA_COUNTED)["k"]},
        held=found["held"], verdict=found["verdict"], course={k: v for k, v in found.items() if k != "windows"},
        energy=energy.run_energy(run, start, end),
    )


@dataclass
class Comparison:
    a: Side
    b: Side
    problems: pd.DataFrame
    """Per problem: pass rate in A and in B, and whether B lost it."""
    max_pass_drop: float

    @property
    def dropped(self) -> bool:
        return self.b.pass_rate < self.a.pass_rate - self.max_pass_drop

    @property
    def degraded(self) -> bool:
        """B's night degraded where A's did not (held up, or too short to tell)."""
        return self.b.held is False and self.a.held is not False

    @property
    def regressed(self) -> bool:
        return self.dropped or self.degraded

    def lines(self) -> list[str]:
        def ratio(b: float, a: float) -> str:
            return f"{b / a:.2f}x" if a and a == a and b == b else "n/a"

        def rate(figure: dict[str, Any]) -> str:
            return f"{figure['count']}/{figure['of']} {figure['rate']:.0%}" if figure["of"] else "-"

        def spent(label: str, key: str, scale: float, digits: int) -> str:
            """A row of energy figures: '-' where a night measured none."""
            values = [side.energy[key] for side in (a, b)]
            shown = [f"{v * scale:.{digits}f}" if v is not None else "-" for v in values]
            both = values[0] is not None and values[1] is not None
            return f"{label:<22}{shown[0]:>20}{shown[1]:>20}{ratio(values[1], values[0]) if both else '':>10}"

        a, b = self.a, self.b
        rows = [
            f"{'':<22}{a.run_id:>20}{b.run_id:>20}{'B/A':>10}",
            f"{'passed':<22}{f'{a.passes}/{a.attempts}':>20}{f'{b.passes}/{b.attempts}':>20}",
            f"{'pass rate':<22}{a.pass_rate:>20.1%}{b.pass_rate:>20.1%}",
            f"{'  infra counted':<22}{rate(a.trust['pass_with_infra']):>20}{rate(b.trust['pass_with_infra']):>20}",
            f"{'median TTFT (s)':<22}{a.median_ttft_s:>20.3f}{b.median_ttft_s:>20.3f}"
            f"{ratio(b.median_ttft_s, a.median_ttft_s):>10}",
            f"{'median decode tok/s':<22}{a.median_decode_tps:>20.1f}{b.median_decode_tps:>20.1f}"
            f"{ratio(b.median_decode_tps, a.median_decode_tps):>10}",
            f"{'median calls / task':<22}{a.median_calls:>20.1f}{b.median_calls:>20.1f}",
            *(f"{label:<22}{rate(a.trust[key]):>20}{rate(b.trust[key]):>20}"
              for label, key in (("false successes", "false_success"), ("cheating (canaries)", "cheating"))),
            f"{'honest aborts':<22}{a.trust['honest_aborts']:>20}{b.trust['honest_aborts']:>20}",
            *(f"{f'pass^{k}':<22}{a.pass_hat_k[k]:>20.1%}{b.pass_hat_k[k]:>20.1%}"
              for k in sorted(a.pass_hat_k.keys() & b.pass_hat_k.keys())),
            *(f"{f'  pass^{k} infra counted':<22}{a.pass_hat_k_with_infra[k]:>20.1%}"
              f"{b.pass_hat_k_with_infra[k]:>20.1%}"
              for k in sorted(a.pass_hat_k_with_infra.keys() & b.pass_hat_k_with_infra.keys()) if k > 1),
            spent("kJ / solved task", "joules_per_pass", 1e-3, 2),
            spent("energy (kWh)", "kwh", 1.0, 4),
            spent("mean power (W)", "mean_watts", 1.0, 0),
            spent("tokens / J", "tokens_per_joule", 1.0, 3),
            *([spent(f"cost / solved task {priced['currency']}".rstrip(), "cost_per_pass", 1.0, 4)]
              if (priced := a.energy["cost"] or b.energy["cost"]) else []),
            "",
            "course of the night:",
            f"  A: {a.verdict}",
            f"  B: {b.verdict}",
            *(f"  {name} {caveat} than {other.run_id}" for name, one, other in (("A", a, b), ("B", b, a))
              if (caveat := sight.unseen(one.course, other.course))),
            "",
            "per problem (pass rate A -> B):",
        ]
        for task_id, row in self.problems.iterrows():
            mark = "  LOST" if row.lost else ("  GAINED" if row.gained else "")
            rows.append(f"  {task_id:<36}{row.a:>8.0%} -> {row.b:<8.0%}{mark}")
        drop = a.pass_rate - b.pass_rate
        verdict = "FAIL: B regresses" if self.regressed else "PASS: B is at parity"
        why = f"pass rate drop {drop:+.1%}, tolerance {self.max_pass_drop:.1%}"
        rows += ["", f"{verdict} ({why}{'; B degraded over its night' if self.degraded else ''})"]
        return rows


def compare_runs(ref_a: str, ref_b: str, max_pass_drop: float = 0.05) -> Comparison:
    runs = [load_run(resolve_run_dir(ref)) for ref in (ref_a, ref_b)]
    # Canaries are in the honesty figures; per problem, only the ordinary tasks.
    tables = [problem_table(run.tasks[run.tasks["canary"].fillna("").astype(str) == ""]) for run in runs]
    problems = pd.DataFrame({"a": tables[0]["pass_rate"], "b": tables[1]["pass_rate"]}).dropna()
    problems["lost"] = (problems["a"] >= 0.5) & (problems["b"] == 0)
    problems["gained"] = (problems["a"] == 0) & (problems["b"] >= 0.5)
    problems = problems.sort_values(["lost", "b"], ascending=[False, True])
    return Comparison(side(runs[0], tables[0]), side(runs[1], tables[1]), problems, max_pass_drop)
