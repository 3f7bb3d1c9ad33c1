"""`soak route`: per-problem failure data -> a human-editable routing.toml the next night applies."""

import json
import math
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

from soak.decisions import repeats
from soak.errors import BadInput
from soak.files import write_atomic
from soak.record.info import Route
from soak.record.schema import MODEL_OUTCOMES
from soak.record.summary import problem_table, with_calls


class RouteRules(BaseModel):
    """Thresholds of the routing rules; each is explained in the file written."""

    min_attempts: int = 2
    """A problem is judged only after this many model-judged attempts."""
    max_pass_rate: float = 0.0
    """Problems passing at most this often are escalated (or skipped without a stronger endpoint)."""
    stronger: str | None = None
    """Endpoint name to escalate to; without one, failing problems are skipped."""
    over_factor: float = 3.0
    """Calls above this many times the median task's calls count as over-iteration."""
    late_fraction: float = 0.8
    """Passing attempts slower than this share of the budget get more time."""
    budget_seconds: float = 600
    extend_factor: float = 1.5


def typical_calls(tasks: pd.DataFrame) -> float:
    """What a task usually costs: the median calls of passing attempts (of all judged ones if none passed)."""
    judged = with_calls(tasks[tasks["outcome"].isin(MODEL_OUTCOMES)])
    passed = judged[judged["outcome"] == "pass"]
    sample = passed if len(passed) else judged
    return float(sample["calls"].median()) if len(sample) else 0.0


def revision_counts(tasks: pd.DataFrame) -> pd.DataFrame:
    """Per problem: model-judged attempts that went to a second round (round 1 failed) and how many of them passed;
    the report's "Did revision help?" reads the round files for the finer split."""
    revised = tasks[(tasks["rounds"] >= 2) & tasks["outcome"].isin(MODEL_OUTCOMES)]
    grouped = revised.assign(fixed=revised["outcome"] == "pass").groupby("task_id")
    return pd.DataFrame({"revised": grouped.size(), "revision_fixes": grouped["fixed"].sum()})


def decide(table: pd.DataFrame, rules: RouteRules, typical_calls: float) -> dict[str, tuple[Route, str]]:
    """Apply the rules; each route comes with the sentence that explains it."""
    routes: dict[str, tuple[Route, str]] = {}
    for index, row in table.iterrows():
        task_id = str(index)
        if row.model_attempts < rules.min_attempts:
            continue
        facts = f"{int(row.passes)}/{int(row.model_attempts)} passed, median {row.median_calls:g} calls"
        facts += f" and {row.median_s:.0f} s, mostly {row.dominant_outcome}"
        if row.tampered:  # a failure like any other, but one the reader should hear about
            facts += f", {int(row.tampered)} tampered with the judging"
        if row.suspicious_passes:
            facts += f", {int(row.suspicious_passes)} of the passes suspicious"
        if row.false_successes:  # a failure, and one the agent reported as a success
            facts += f", {int(row.false_successes)} claimed a success the tests did not find"
        if row.honest_aborts:
            facts += f", {int(row.honest_aborts)} said it cannot be done as asked"
        if row.tests_touched:
            facts += f", {int(row.tests_touched)} touched the tests (ignored by the judge)"
        if getattr(row, "flaky", False):
            facts += f", {flaky_words(row)}"
        revised = int(getattr(row, "revised", 0) or 0)
        if revised >= rules.min_attempts and not getattr(row, "revision_fixes", 0):
            facts += f", revision fixed none of its {revised} second rounds (more rounds would not help)"
        looping = typical_calls > 0 and row.median_calls > rules.over_factor * typical_calls
        if row.pass_rate <= rules.max_pass_rate:
            if looping:
                cap = max(1, math.ceil(2 * typical_calls))
                why = f"{facts}; loops at {row.median_calls:g} calls vs a typical {typical_calls:g}: fail fast"
                routes[task_id] = (Route(action="cap", max_calls=cap), why)
            elif rules.stronger:
                why = f"{facts}: needs a stronger coder"
                routes[task_id] = (Route(action="escalate", endpoint=rules.stronger), why)
            else:
                routes[task_id] = (Route(action="skip"), f"{facts}; no stronger endpoint given (--stronger): skipped")
        elif row.median_pass_s >= rules.late_fraction * (limit := own_limit(row, rules)):
            budget = round(limit * rules.extend_factor)
            why = f"{facts}; passing attempts take {row.median_pass_s:.0f} s of their {limit:.0f} s"
            routes[task_id] = (Route(action="extend", budget_seconds=budget), why)
    return routes


def own_limit(row: pd.Series, rules: RouteRules) -> float:
    """The wall budget the task's passes ran under (its own budget_seconds, an earlier extension), as their rows
    recorded it; the night's budget for a folder that did not record it."""
    limit = getattr(row, "pass_limit_s", None)
    return float(limit) if limit is not None and pd.notna(limit) else rules.budget_seconds


def flaky_words(row: pd.Series) -> str:
    """`flaky: passed 3 of its 5 tries, all of 3 tries pass 10 % of the time` (pass^3, or pass^k at its tries)."""
    tries, passes = int(row.tries), int(row.passes)
    k = min(3, tries)
    return (f"flaky: passed {passes} of its {tries} tries, all of {k} tries pass "
            f"{repeats.pass_hat_k(tries, passes, k):.0%} of the time")


def unrouted_flaky(table: pd.DataFrame, routes: dict[str, tuple[Route, str]]) -> dict[str, str]:
    """Flaky problems no rule routed: task -> why they are worth a look (a pass there is luck, not a skill)."""
    if "flaky" not in table:
        return {}
    return {str(task_id): f"{flaky_words(row)}; a pass here is luck: escalate it by hand if it matters"
            for task_id, row in table[table["flaky"].astype(bool)].iterrows() if str(task_id) not in routes}


def render_routing(routes: dict[str, tuple[Route, str]], rules: RouteRules, sources: list[str],
                   flaky: dict[str, str] | None = None) -> str:
    """TOML with a comment per entry saying why; strings are JSON-quoted, which TOML reads as basic strings. Flaky
    problems no rule routed are listed as comments at the end."""
    lines = [
        "# soak routing file: `soak run --routing <this file>` applies it. Edit freely.",
        f"# From runs: {', '.join(sources)}",
        f"# Rules: judged after >= {rules.min_attempts} attempts; pass rate <= {rules.max_pass_rate:g} -> escalate"
        f" to a stronger endpoint ({rules.stronger or 'none given: skip'});",
        f"# median calls > {rules.over_factor:g} x the typical task's and never passing -> cap calls (fail fast);",
        f"# passing but slower than {rules.late_fraction:g} x {rules.budget_seconds:g} s -> more time.",
        "",
    ]
    for task_id, (route, why) in routes.items():
        lines += [f"# {why}", f"[tasks.{json.dumps(task_id)}]", f'action = "{route.action}"']
        for key in ("endpoint", "max_calls", "budget_seconds"):
            value = getattr(route, key)
            if value is not None:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    if not routes:
        lines.append("# No problem met a rule: nothing to route.")
    for task_id, why in (flaky or {}).items():
        lines.append(f"# flaky, not routed: {task_id}: {why}")
    return "\n".join(lines) + "\n"


def route_runs(run_refs: list[str], rules: RouteRules) -> tuple[str, pd.DataFrame, dict[str, tuple[Route, str]]]:
    """Read the runs, apply the rules; returns the routing file text, the problem table and the routes."""
    from soak.record.read import load_run, resolve_run_dir

    runs = [load_run(resolve_run_dir(ref)) for ref in run_refs]
    tasks = pd.concat([run.tasks for run in runs], ignore_index=True)
    if tasks.empty:
        raise BadInput(f"no finished tasks in {', '.join(run_refs)}: nothing to route yet")
    budgets = [run.config.budgets.task_seconds if run.config else None for run in runs]
    if "budget_seconds" not in rules.model_fields_set and budgets[0]:
        rules = rules.model_copy(update={"budget_seconds": float(budgets[0])})
    # A canary measures the model's honesty, not a problem to route (its cheats are in the report and compare).
    tasks = tasks[tasks["canary"].fillna("").astype(str) == ""]
    table = problem_table(tasks)
    table = table[table["model_attempts"] > 0]  # infra errors count against the stack, not the problem
    table = table.join(revision_counts(tasks)).fillna({"revised": 0, "revision_fixes": 0})
    table = table.join(repeats.tries(tasks)[["tries", "flaky"]]).fillna({"tries": 0, "flaky": False})
    routes = decide(table, rules, typical_calls(tasks))
    flaky = unrouted_flaky(table, routes)
    return render_routing(routes, rules, [run.run_id for run in runs], flaky), table, routes


def route_command(run_refs: list[str], rules: RouteRules, output: Path) -> None:
    """`soak route`: write the routing file, then say what it routes and why."""
    text, table, routes = route_runs(run_refs, rules)
    write_atomic(output, text)
    print(f"{len(table)} problems, {len(routes)} routed -> {output}")
    for task_id, (entry, why) in routes.items():
        print(f"  {entry.label():<16} {task_id}: {why}")
    for task_id, why in unrouted_flaky(table, routes).items():
        print(f"  {'flaky':<16} {task_id}: {why}")
