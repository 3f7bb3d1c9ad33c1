"""The report folder: `index.html`, one page per problem (`problems/`) and per attempt (`attempts/`), raw copies of
transcripts too long for a page (`raw/`); every link relative, so the folder works from file:// anywhere."""

import hashlib
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jinja2

from soak.record.identity import AttemptId
from soak.record.layout import TRANSCRIPT
from soak.record.read import RunRecord
from soak.record.schema import CallRow, TaskRow
from soak.report import charts, revision
from soak.report.attempt import Transcript, read_conversation, read_rounds

SLUG = re.compile(r"[^A-Za-z0-9._-]+")
TIMELINE_WIDTH = 860


def slug(text: str) -> str:
    """A file name for any id: safe characters kept, anything else replaced, plus a short hash when changed."""
    safe = SLUG.sub("_", text)[:80].lstrip(".") or "_"
    return safe if safe == text else f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


@dataclass
class Site:
    """Where each page of a report folder lives, as paths relative to the folder; `pages` False for a single file
    (then nothing links anywhere)."""

    pages: bool
    runs: list[str] = field(default_factory=list)
    """Folder name per run (position = the run's index in the report)."""
    attempts: set[tuple[int, AttemptId]] = field(default_factory=set)
    """(run index, slot) of each attempt with a page."""
    problems: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, runs: list[RunRecord], pages: bool) -> "Site":
        names: list[str] = []
        for run in runs:
            name = slug(run.run_id)
            names.append(name if name not in names else f"{name}-{len(names) + 1}")
        site = cls(pages=pages, runs=names)
        if pages:
            for index, run in enumerate(runs):
                for attempt in run.attempt_ids():
                    site.attempts.add((index, attempt.slot))
                    site.problems.add(attempt.task_id)
        return site

    def attempt(self, run: int, task_id: Any, cycle: Any, repeat: Any = 1) -> str:
        """The page of an attempt as a table row of the report names it (the templates' `attempt_href`)."""
        try:
            index, slot = int(run), AttemptId(str(task_id), int(cycle), int(repeat))
        except (TypeError, ValueError):
            return ""
        return self.page(index, slot) if (index, slot) in self.attempts else ""

    def page(self, run: int, attempt: AttemptId) -> str:
        return f"attempts/{self.runs[run]}/{self.named(attempt)}.html"

    def problem(self, task_id: Any) -> str:
        return f"problems/{slug(str(task_id))}.html" if str(task_id) in self.problems else ""

    def raw(self, run: int, attempt: AttemptId) -> str:
        return f"raw/{self.runs[run]}/{self.named(attempt)}/{TRANSCRIPT}"

    @staticmethod
    def named(attempt: AttemptId) -> str:
        """The attempt's name with its task id made safe for a file name."""
        return replace(attempt.slot, task_id=slug(attempt.task_id)).name



def limit_text(value: float | None, unit: str = "") -> str:
    """A limit as the attempt's row recorded it; a folder older than schema 10 did not record it."""
    return "not recorded" if value is None else f"{value:g}{unit}"


def ended_by(row: TaskRow, calls: int) -> str:
    """The limit (or event) that ended the attempt, in a line, against the limit this attempt ran under."""
    outcome, rounds = row.outcome, row.rounds
    if outcome == "pass":
        return f"passed in round {rounds}"
    if outcome == "timeout":
        return f"wall budget: {row.duration_s:.0f} s spent of its {limit_text(row.limit_seconds, ' s')}"
    if outcome == "call_cap":
        return f"call cap: {calls} calls of its {limit_text(row.limit_calls)}"
    if outcome == "token_cap":
        return f"token cap: {row.completion_tokens} completion tokens of its {limit_text(row.limit_tokens)}"
    if outcome == "fail":
        return f"rounds: {rounds} of its {limit_text(row.limit_rounds)}, the last one failed its tests"
    if outcome == "tampered":
        return "tampering: the attempt ends at once with its evidence (no revision)"
    if outcome == "no_artifact":
        return f"no solution: the entry file was not written (round {rounds})"
    return f"{outcome}: {row.error_kind or 'see the error tail'}"


def timeline(calls: list[CallRow], start: float) -> dict[str, Any]:
    """Bars of an attempt's calls on one time axis: waiting for the first token, then the rest of the call."""
    if not calls:
        return {"bars": [], "height": 0, "span": 0.0}
    end = max(c.started_at + c.duration_s for c in calls)
    origin = min(start, min(c.started_at for c in calls))
    span = max(end - origin, 1e-6)
    scale = TIMELINE_WIDTH / span
    bars = []
    for i, c in enumerate(calls):
        x = (c.started_at - origin) * scale
        total = max(c.duration_s * scale, 1.0)
        first = min(total, (c.ttft_s or 0.0) * scale)
        kind = "ok" if c.status == "ok" else "stall" if c.status == "stalled" else "bad"
        bars.append({"y": i * 14 + 4, "x": round(x, 1), "first": round(first, 1), "rest": round(total - first, 1),
                     "kind": kind, "role": c.role})
    return {"bars": bars, "height": len(calls) * 14 + 8, "span": span}


def attempt_context(run: RunRecord, index: int, key: AttemptId, site: Site,
                    out: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the attempt page shows, the attempt's summary for problem pages and the revision section) of the
    attempt `key`."""
    task_id, cycle, repeat = key.task_id, key.cycle, key.repeat
    attempt = run.attempt(key, strict=False)
    row, calls, work = attempt.row, attempt.calls, attempt.layout
    rounds = read_rounds(attempt)
    agent = bool(row.agent)
    transcript = Transcript() if agent else read_conversation(attempt.conversation)
    for item in rounds:
        item.fed_back = transcript.fed_back.get(item.number + 1, "")
    model = row.coder_model or row.agent or row.orchestrator_model or "?"
    href = site.page(index, key) if (index, key.slot) in site.attempts else ""
    raw = ""
    if transcript.truncated and out is not None and site.pages:
        raw = site.raw(index, key)
        (out / raw).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work.transcript, out / raw)
    n_calls = row.orchestrator_calls + row.coder_calls + row.agent_calls
    summary = {
        "run": index, "run_id": run.run_id, "task_id": task_id, "cycle": cycle, "repeat": repeat,
        "place": str(cycle) if repeat == 1 else f"{cycle} repeat {repeat}", "session": row.session,
        "outcome": row.outcome, "rounds": row.rounds, "calls": n_calls, "duration_s": row.duration_s,
        "model": str(model), "href": href, "error_kind": row.error_kind, "ended_at": row.ended_at,
        "per_round": [{"number": r.number, "counts": r.counts, "failing": r.failing} for r in rounds],
        "tests": f"{row.tests_passed}/{row.tests_total}",
        "revision": revision.category(attempt.rounds), "loop": revision.loop_reason(attempt.rounds, transcript.writes),
    }
    limits = {"wall": limit_text(row.limit_seconds, " s"), "calls": limit_text(row.limit_calls),
              "tokens": limit_text(row.limit_tokens), "rounds": limit_text(row.limit_rounds)}
    page = {
        "row": row, "summary": summary, "rounds": rounds, "transcript": transcript, "calls": calls, "agent": agent,
        "timeline": timeline(calls, row.started_at), "ended_by": ended_by(row, n_calls),
        "limits": limits, "raw": raw, "problem_href": site.problem(task_id), "workdir": str(work.path),
    }
    return page, summary


def write_page(path: Path, html: str) -> None:
    """A page of the folder (rewritten whole by the next render: no fsync, unlike index.html)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")


def attempts(runs: list[RunRecord], site: Site, env: jinja2.Environment, out: Path | None,
             generated_at: float) -> list[list[dict[str, Any]]]:
    """Read every attempt of every run; with a folder, write its page. Returns the summaries per run."""
    template = env.get_template("attempt.html.j2") if out is not None and site.pages else None
    found: list[list[dict[str, Any]]] = []
    for index, run in enumerate(runs):
        summaries = []
        for key in run.attempt_ids():
            page, summary = attempt_context(run, index, key, site, out)
            summaries.append(summary)
            if template is not None and out is not None and summary["href"]:
                html = template.render(root="../../../", run_id=run.run_id, generated_at=generated_at, **page)
                write_page(out / summary["href"], html)
        found.append(summaries)
    return found


def problem_pages(runs: list[RunRecord], summaries: list[list[dict[str, Any]]], site: Site, env: jinja2.Environment,
                  out: Path, generated_at: float) -> None:
    """One page per problem: every attempt of it across cycles and runs, oldest first."""
    template = env.get_template("problem.html.j2")
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for per_run in summaries:
        for summary in per_run:
            by_problem.setdefault(summary["task_id"], []).append(summary)
    for task_id, items in by_problem.items():
        items.sort(key=lambda s: (s["run"], s["ended_at"]))
        rounds = max((len(s["per_round"]) for s in items), default=0)
        view = revision.view(items)
        html = template.render(root="../", task_id=task_id, attempts=items, max_rounds=rounds, revision=view,
                               colours=charts.OUTCOME_COLOURS,
                               runs=[run.run_id for run in runs], generated_at=generated_at)
        write_page(out / site.problem(task_id), html)
