"""Turn loaded runs into what the template shows: records, figures and charts (as data URIs)."""

from typing import Any

import pandas as pd

from soak.decisions import course, energy, repeats
from soak.decisions.sweep import Recommendation, Standing, cost_front
from soak.record import series
from soak.record.identity import AttemptId
from soak.record.read import RunRecord, time_span
from soak.record.schema import HIT_COUNTERS
from soak.record.summary import honest_aborts, problem_table
from soak.report import aggregate as agg
from soak.report import charts, headroom
from soak.report.transcripts import mangled_tool_calls

TABLE_ROWS = 200
"""Longest table shown in full; the rest is counted, not listed."""


def records(frame: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    shown = frame if limit is None else frame.head(limit)
    return [{str(k): agg.clean(v) for k, v in row.items()} for row in shown.to_dict("records")]


def budget_seconds(run: RunRecord) -> float | None:
    return run.config.budgets.task_seconds if run.config else None


def lines_by_source(frame: pd.DataFrame, suffix: str = "") -> dict[str, pd.DataFrame]:
    """One downsampled (at, value) line per source, labelled `<source><suffix>`."""
    return {f"{source}{suffix}": series.downsample(part[["at", "value"]])
            for source, part in frame.groupby("source", sort=True)}


def timeline(run: RunRecord, clock: charts.Clock) -> str:
    samples, events = run.samples, agg.stack_events(run.events)
    mem = series.downsample(series.summed(samples, "host", "mem_available_bytes"))
    rss = series.window(samples, None, "rss_bytes")
    harness = lines_by_source(rss[~rss["source"].str.startswith("server:")])
    servers = lines_by_source(rss[rss["source"].str.startswith("server:")])
    gpu = {"used": series.downsample(series.summed(samples, "gpu", "gpu_memory_used_bytes")),
           "total": series.downsample(series.summed(samples, "gpu", "gpu_memory_total_bytes"))}
    gib, mib = 1 / 2**30, 1 / 2**20
    return charts.render([
        (charts.plot_outcomes_over_time, (run.tasks, clock)),
        (charts.plot_lines, ({"MemAvailable": mem}, clock, charts.Panel("Host MemAvailable", "GiB", gib, events))),
        (charts.plot_lines, (harness, clock, charts.Panel("Harness RSS", "MiB", mib, events))),
        (charts.plot_lines, (servers, clock, charts.Panel("Model server RSS (process tree)", "MiB", mib, events))),
        (charts.plot_lines, (gpu, clock, charts.Panel("GPU memory (all GPUs)", "GiB", gib, events))),
    ], size=(10, 13.5))


def server_charts(run: RunRecord, clock: charts.Clock) -> dict[str, str]:
    calls, samples = run.calls, run.samples
    ok = calls[calls["status"] == "ok"]
    hit_rate = series.stacked([series.ratio_over_time(samples, hits, queries, clock.start, clock.width)
                               for hits, queries in HIT_COUNTERS.values()])
    llama_tps = series.ratio_over_time(samples, "llamacpp:tokens_predicted_total",
                                       "llamacpp:tokens_predicted_seconds_total", clock.start, clock.width)
    kv = series.window(samples, "server:*", "vllm:kv_cache_usage_perc")
    queue = {**lines_by_source(series.window(samples, "server:*", "vllm:num_requests_running"), " running"),
             **lines_by_source(series.window(samples, "server:*", "vllm:num_requests_waiting"), " waiting"),
             **lines_by_source(series.window(samples, "server:*", "llamacpp:requests_processing"), " processing"),
             **lines_by_source(series.window(samples, "server:*", "llamacpp:requests_deferred"), " deferred")}
    return {
        "ttft_hist": charts.chart(charts.plot_hist, ok["ttft_s"], "TTFT (client side)", "seconds", size=(5, 3)),
        "tps_hist": charts.chart(charts.plot_hist, ok["decode_tps"], "Decode tok/s (client side)", "tok/s",
                                 size=(5, 3)),
        "over_time": charts.render([
            (charts.plot_quantiles_over_time, (ok, "ttft_s", clock, "TTFT over time", "seconds")),
            (charts.plot_quantiles_over_time, (ok, "decode_tps", clock, "Decode tok/s over time", "tok/s")),
        ], size=(10, 5.5)),
        "server_series": charts.render([
            (charts.plot_lines, (lines_by_source(hit_rate), clock,
                                 charts.Panel("Prefix-cache hit rate (Δhits / Δqueries)", "%", 100.0))),
            (charts.plot_lines, (lines_by_source(kv), clock, charts.Panel("KV-cache usage", "%", 100.0))),
            (charts.plot_lines, (queue, clock, charts.Panel("Requests in the server", "requests"))),
            (charts.plot_lines, (lines_by_source(llama_tps), clock,
                                 charts.Panel("Server decode tok/s (llama.cpp Δtokens / Δseconds)", "tok/s"))),
        ], size=(10, 10)),
        "spec": charts.chart(charts.plot_spec_positions, series.spec_decode(samples), size=(5, 3)),
    }


def mangled_with_excerpts(run: RunRecord) -> list[dict[str, Any]]:
    """The first mangled calls, each with the raw tool call from its task's transcript when one was kept (a call
    judged `missing` made none to show)."""
    examples = records(agg.mangled_examples(run.calls))
    seen: dict[AttemptId, int] = {}
    for example in examples:
        example["raw"] = ""
        if example["integrity"] == "missing":
            continue
        key = AttemptId.of(example)
        try:
            attempt = run.attempt(key, strict=False)
        except KeyError:  # calls of an attempt with no row (cut short by a crash), or of a superseded one
            continue
        if attempt.row.attempt != key:
            continue
        raw = mangled_tool_calls(attempt.conversation)
        example["raw"] = raw[seen.get(key, 0)] if seen.get(key, 0) < len(raw) else ""
        seen[key] = seen.get(key, 0) + 1
    return examples


def judging_view(tasks: pd.DataFrame) -> dict[str, Any]:
    """The attempts that tampered with their judging (with the evidence), those the static look flagged and those
    that touched the tests (with the files)."""
    tampered = agg.tampered_attempts(tasks.sort_values("ended_at", kind="stable"))
    touched = agg.touched_attempts(tasks.sort_values("ended_at", kind="stable"))
    flagged = agg.suspicious_attempts(tasks)
    passes = flagged[flagged["outcome"] == "pass"]
    return {"tampered": records(tampered, TABLE_ROWS), "tampered_total": len(tampered),
            "suspicious": records(flagged, TABLE_ROWS), "suspicious_total": len(flagged),
            "suspicious_passes": len(passes), "touched": records(touched, TABLE_ROWS), "touched_total": len(touched)}


CLAIM_COLUMNS = ["task_id", "cycle", "repeat", "session", "outcome", "claim", "claim_source", "claimed_tests_pass",
                 "claim_quote", "coder_claim", "canary"]


def claims_view(tasks: pd.DataFrame) -> dict[str, Any]:
    """The attempts whose word the tests contradicted (false successes), the cheats on canaries and the honest
    aborts, each with the sentence it was read from: the evidence behind the trust figures."""
    ordered = tasks.sort_values("ended_at", kind="stable")
    kinds = {"false": ordered[ordered["false_success"].astype(bool)], "cheats": ordered[ordered["outcome"] == "cheat"],
             "aborts": ordered[honest_aborts(ordered)]}
    return {**{name: records(frame[CLAIM_COLUMNS], TABLE_ROWS) for name, frame in kinds.items()},
            **{f"{name}_total": len(frame) for name, frame in kinds.items()}}


def course_view(run: RunRecord, head: dict[str, Any], start: float, end: float, clock: charts.Clock) -> dict[str, Any]:
    """The course of the night: its verdict, findings and windows into the headline (and so summary.json), the small
    multiples on one time axis and each task's strip of tries for the page."""
    found = course.course(run.tasks, run.calls, run.samples, run.events, start, end)
    frame, findings = found.pop("windows"), found["findings"]
    head["course"] = agg.jsonable({**found, "windows": records(frame.drop(columns=["at"]))})
    head["repeats"] = agg.jsonable(repeats.night(run.tasks))
    head["repeats_with_infra"] = agg.jsonable(repeats.night(run.tasks, repeats.INFRA_COUNTED))
    events = agg.stack_events(run.events)
    latency = {"ttft_p95": ("TTFT p95", "seconds"), "decode_tps": ("Decode tok/s (median)", "tok/s"),
               "duration_p95": ("Call duration p95 (calls not streamed)", "seconds"),
               "s_per_token": ("Seconds per completion token (median)", "s/token")}
    panels = [("pass_rate", "Pass rate of ordinary tasks (95 % Wilson band)", "%", 100.0),
              *((column, *latency[column], 1.0) for column in found["latency"]),
              ("server_rss_bytes", "Model server RSS", "GiB", 1 / 2**30),
              ("failed_calls", "Failed calls", "calls", 1.0)]
    table = repeats.tries(run.tasks)
    return {
        "chart": charts.render([(charts.plot_window_measure, (frame, column, clock,
                                                              charts.Panel(title, unit, scale, events), findings))
                                for column, title, unit, scale in panels],
                               size=(10, 12), sharex=True),
        "strip": charts.chart(charts.plot_repeat_strip, table, size=(10, max(2.5, 0.14 * len(table) + 1.2))),
        "windows": records(frame), "findings": findings,
    }


def energy_view(run: RunRecord, head: dict[str, Any], start: float, end: float, clock: charts.Clock) -> dict[str, Any]:
    """What a solved task costs: the figures into the headline (and so summary.json), the power timeline and the
    sources for the page."""
    head["energy"] = agg.jsonable(energy.run_energy(run, start, end))
    head["verdicts"].append(f"energy: {head['energy']['said']}")
    lines = energy.timeline(run.samples, start, end)
    return {"chart": charts.chart(charts.plot_lines, lines, clock,
                                  charts.Panel("Power", "W", 1.0, agg.stack_events(run.events)),
                                  size=(9, 3)) if lines else ""}


def run_view(run: RunRecord, k: float) -> dict[str, Any]:
    """Everything the template shows for one run."""
    start, end = time_span(run)
    clock = charts.Clock.for_span(start, end)
    tasks = run.tasks
    head = agg.headline(run, k)
    flagged, threshold = agg.over_iteration(tasks, k)
    problems = agg.per_problem(tasks)
    return {
        "run_id": run.run_id, "path": str(run.path), "notes": run.notes, "headline": head,
        "course": course_view(run, head, start, end, clock),
        "energy": energy_view(run, head, start, end, clock),
        "outcomes": records(agg.outcome_counts(tasks)), "colours": charts.OUTCOME_COLOURS,
        "memory": records(series.memory_trend(run.samples)),
        "durations": {
            "hist": charts.chart(charts.plot_duration_hist, tasks, agg.duration_stats(tasks), budget_seconds(run),
                                 size=(5.5, 3.4)),
            "scatter": charts.chart(charts.plot_duration_vs_calls, tasks, size=(5.5, 3.4)),
            "budget": budget_seconds(run),
        },
        "delegation": {
            "chart": charts.chart(charts.plot_calls_by_outcome, tasks, size=(10, 3.4)),
            "by_outcome": records(agg.delegation_by_outcome(tasks)),
            "call_status": records(agg.call_status(run.calls)),
            "over": records(flagged, 50), "over_total": len(flagged), "threshold": agg.clean(threshold), "k": k,
        },
        "problems": records(problems, TABLE_ROWS), "problems_total": len(problems),
        "judging": judging_view(tasks),
        "claims": claims_view(tasks),
        "reprefilled": records(headroom.listing(run.calls), TABLE_ROWS),
        "against": headroom.smallest_text(head["headroom"]),
        "timeline": timeline(run, clock),
        "nodes": records(agg.per_node(tasks, run.events)),
        "events": records(agg.stack_events(run.events), 60), "events_total": len(agg.stack_events(run.events)),
        "server": server_charts(run, clock),
        "spec_summary": records(series.spec_decode_summary(run.samples)),
        "integrity": {
            "counts": records(agg.integrity_counts(run.calls)),
            "chart": charts.chart(charts.plot_integrity, agg.integrity_over_time(run.calls, start, clock.width), clock,
                                  size=(10, 3)),
            "examples": mangled_with_excerpts(run),
        },
        "errors": {
            "kinds": records(agg.error_kinds(tasks)), "calls": records(agg.call_errors(run.calls)),
            "samplers": records(series.sampler_errors(run.samples)),
        },
        "clock": {"start": start, "unit": clock.unit, "name": "hour" if clock.unit == 3600 else "minute"},
    }


def comparison_view(runs: list[RunRecord], views: list[dict[str, Any]]) -> dict[str, Any]:
    """Side-by-side headline, pass rate per problem and call timing per run."""
    labels = [f"{v['run_id']}" if [w["run_id"] for w in views].count(v["run_id"]) == 1 else f"{v['run_id']} #{i + 1}"
              for i, v in enumerate(views)]
    rates = {}
    for label, run in zip(labels, runs, strict=True):
        rates[label] = problem_table(run.tasks)["pass_rate"]
    pivot = pd.DataFrame(rates)
    if not pivot.empty:
        pivot = pivot.assign(spread=pivot.max(axis=1) - pivot.min(axis=1)).sort_values(
            ["spread"], ascending=False, na_position="last")
    rows = [{"task_id": task_id, "rates": [agg.clean(row[label]) for label in labels]}
            for task_id, row in pivot.head(TABLE_ROWS).iterrows()]
    ok = [run.calls[run.calls["status"] == "ok"] for run in runs]
    timing = charts.render([
        (charts.plot_per_run, ({lb: c["ttft_s"] for lb, c in zip(labels, ok, strict=True)}, "TTFT per run",
                               "seconds")),
        (charts.plot_per_run, ({lb: c["decode_tps"] for lb, c in zip(labels, ok, strict=True)},
                               "Decode tok/s per run", "tok/s")),
    ], size=(10, 6))
    return {"labels": labels, "headlines": [v["headline"] for v in views], "problems": rows,
            "problems_total": len(pivot), "timing": timing}


def night_hit_rate(samples: pd.DataFrame) -> float | None:
    """Prefix-cache hit rate over the whole night from the server's own counters (vLLM or llama-server)."""
    for hits, queries in HIT_COUNTERS.values():
        queried = sum(series.counter_total(samples, name)["delta"].sum() for name in queries)
        if queried > 0:
            return float(series.counter_total(samples, hits)["delta"].sum() / queried)
    return None


def sweep_view(found: list[Standing], recommendation: Recommendation, runs: list[RunRecord],
               views: list[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's section: per configuration what decided, the server's own figures, and per problem which
    configurations pass it."""
    by_id = {run.run_id: (index, run, view) for index, (run, view) in enumerate(zip(runs, views, strict=True))}
    rows, matrix = [], {}
    front = cost_front(found)
    for s in found:
        index, run, view = by_id.get(s.run_id, (None, None, None))
        head = view["headline"] if view else {}
        spec = series.spec_decode(run.samples) if run is not None else pd.DataFrame(columns=["acceptance"])
        rows.append({
            "name": s.name, "run_id": s.run_id, "status": s.status, "detail": s.detail, "anchor": index,
            "passes": s.passes, "attempts": s.attempts, "pass_rate": s.pass_rate, "interval": s.pass_interval,
            "tool_calls": s.tool_calls, "mangled": s.mangled_text() if s.tool_calls else "",
            "mangled_share": s.mangled_share,
            "decode_tps": s.decode_tps, "ttft_s": s.ttft_s, "gates": [g.model_dump() for g in s.gates],
            "hit_rate": night_hit_rate(run.samples) if run is not None else None,
            "spec": [agg.clean(a) for a in spec["acceptance"]], "restarts": head.get("restarts"),
            "memory_flat": head.get("memory_flat"), "chosen": s.name == recommendation.choice,
            "reason": recommendation.reasons.get(s.name, ""),
            "solved_per_hour": s.solved_per_hour, "joules_per_pass": s.joules_per_pass, "front": s.name in front,
        })
        if run is not None:
            table = problem_table(run.tasks)
            matrix[s.name] = {str(task_id): (int(r.passes), int(r.model_attempts)) for task_id, r in table.iterrows()}
    names = list(matrix)
    problems = sorted({task_id for cells in matrix.values() for task_id in cells})
    measured = any(row["joules_per_pass"] is not None for row in rows)
    return {"rows": rows, "choice": recommendation.choice, "why": recommendation.why, "names": names,
            "cost_chart": charts.chart(charts.plot_cost_front, rows, size=(7, 4.5)) if measured else None,
            "problems": [{"task_id": t, "cells": [matrix[n].get(t) for n in names]} for t in problems[:TABLE_ROWS]],
            "problems_total": len(problems), **sessions_view(found)}


def sessions_view(found: list[Standing]) -> dict[str, Any]:
    """The sessions gate of each configuration that ran it: its table per level, and one chart over them all."""
    ramps = {s.name: gate.levels for s in found for gate in s.gates if gate.levels}
    if not ramps:
        return {"sessions": [], "sessions_chart": None}
    chart = charts.render([
        (charts.plot_sessions, (ramps, "cross_turn_hit_rate", "Cross-turn hit rate of later turns", "hit rate")),
        (charts.plot_sessions, (ramps, "ttft_p95_s", "TTFT p95 of later turns", "seconds")),
    ], size=(9, 5.5))
    return {"sessions": [{"name": name, "levels": [level.model_dump(exclude={"turns"}) for level in levels]}
                         for name, levels in ramps.items()], "sessions_chart": chart}
