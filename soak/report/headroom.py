"""Headroom against the watchdogs that cut a silent stream: the night's longest waits beside soak's stale budget and
the agent's own watchdog, as verdict lines, and the turns that prefilled their whole history again, as a listing."""

from typing import Any

import pandas as pd

from soak.record.read import RunRecord
from soak.record.summary import WATCHDOG_SHARE, reprefilled_turns

SILENCES = {"first_byte": "longest wait for a first byte", "gap": "longest gap between bytes"}
"""The silences of soak.record.summary.headroom, by their names on the headline."""


def watchdogs(run: RunRecord) -> tuple[float | None, str, float | None]:
    """The night's stale budget (its config) and its agent's own stale-stream watchdog with the agent's name, as the
    night recorded them in run.json (host, from the agent's adapter); None where not recorded."""
    return (run.config.budgets.stale_seconds if run.config else None, run.host.agent_name or "",
            run.host.agent_stale_seconds)


def seconds_text(seconds: float | None) -> str:
    """142 s, 14.2 s, 0.35 s: whole seconds once they are many, three figures below."""
    if seconds is None:
        return "–"
    return f"{seconds:,.0f} s" if seconds >= 100 else f"{seconds:.3g} s"


def watchdog_names(h: dict[str, Any]) -> list[tuple[float, str]]:
    """(seconds, `hermes' 900 s watchdog` / `the 360 s stale budget`) of each watchdog the night recorded."""
    names = []
    if h["agent_watchdog"]:
        owner = h["agent"] + ("'" if h["agent"].endswith("s") else "'s")
        names.append((h["agent_watchdog"], f"{owner} {seconds_text(h['agent_watchdog'])} watchdog"))
    if h["stale_budget"]:
        names.append((h["stale_budget"], f"the {seconds_text(h['stale_budget'])} stale budget"))
    return names


def watchdog_text(h: dict[str, Any]) -> str:
    """`of hermes' 900 s watchdog and of the 360 s stale budget`: what a silence is measured against; empty when the
    night recorded neither."""
    return " and ".join(f"of {name}" for _, name in watchdog_names(h))


def smallest_text(h: dict[str, Any]) -> str:
    """`of hermes' 180 s watchdog`: the watchdog that cuts first, as the headline's figures name it."""
    names = watchdog_names(h)
    return f"of {min(names)[1]}" if names else ""


def call_text(figure: dict[str, Any]) -> str:
    repeat = f" repeat {figure['repeat']}" if figure.get("repeat", 1) > 1 else ""
    return f"{figure['task_id']} cycle {figure['cycle']}{repeat}, call {figure['call_index']}, {figure['role']}"


def headroom_lines(h: dict[str, Any], prefills: dict[str, Any]) -> list[str]:
    """How close the night came to a stream cut for silence (soak.record.summary.headroom), and the turns that
    prefilled their whole history again (soak.record.summary.reprefill), the usual cause of a long wait late in a
    conversation."""
    lines = []
    for key, name in SILENCES.items():
        figure = h[key]
        if figure is None:
            lines.append(f"{name}: none recorded")
            continue
        against = f" {watchdog_text(h)}".rstrip()
        lines.append(f"{name}: {seconds_text(figure['seconds'])}{against} ({call_text(figure)})")
        if figure["tight"]:
            lines.append(f"little headroom: the {name} took {figure['share']:.0%} {smallest_text(h)} "
                         f"(over {WATCHDOG_SHARE:.0%}); a longer history or an evicted prefix cache could get a "
                         "stream cut")
    if h["stalled"]:
        lines.append(f"calls cut for silence (status stalled) after the stale budget: {h['stalled']}")
    if prefills["count"] is None:
        lines.append("re-prefilled turns: unknown (the server reported no cached tokens; vLLM reports them with "
                     "--enable-prompt-tokens-details)")
    else:
        unreported = f"; {prefills['unreported']} more without cached tokens" if prefills["unreported"] else ""
        lines.append(f"re-prefilled turns: {prefills['count']} of {prefills['of']} later turns with a prompt of "
                     f"{prefills['min_prompt_tokens']:,}+ tokens got under {prefills['max_hit']:.0%} of it from the "
                     f"prefix cache{unreported}")
    return lines


def listing(calls: pd.DataFrame) -> pd.DataFrame:
    """The re-prefilled turns as the report lists them: each with the share of its prompt the cache served."""
    found = reprefilled_turns(calls)
    return found.assign(hit=found["cached_tokens"] / found["prompt_tokens"])
