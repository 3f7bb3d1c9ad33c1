"""The morning report, rendered: run folders -> a report folder (index.html, a page per problem and per attempt,
summary.json), or one self-contained HTML file plus summary.json beside it."""

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2

from soak.decisions.sweep import Recommendation, Standing, recommend, standings, sweep_runs
from soak.files import write_atomic
from soak.paths import reports_dir
from soak.record.layout import RunLayout
from soak.record.read import RunRecord, load_run, load_sweep, resolve_run_dir, sweep_folder
from soak.record.summary import span_text
from soak.report import pages, revision
from soak.report.aggregate import jsonable
from soak.report.build import comparison_view, run_view, sweep_view
from soak.report.capacity import capacity_summary, capacity_view
from soak.report.headroom import SILENCES, seconds_text


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.{digits}f}"


def _pct(value: Any, digits: int = 0) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * 100:.{digits}f} %"


def _bytes(value: Any) -> str:
    return "–" if not isinstance(value, int | float) or not math.isfinite(value) else f"{value / 2**30:.2f} GiB"


def _when(value: Any) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return "–"
    return datetime.fromtimestamp(value).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _since(at: Any, clock: dict[str, float]) -> str:
    """Position on the charts' time axis (hours or minutes since the start)."""
    return _num((at - clock["start"]) / clock["unit"], 2) if isinstance(at, int | float) else "–"


def environment(site: "pages.Site | None" = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("soak.report", "."), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(num=_num, pct=_pct, bytes=_bytes, when=_when, since=_since, span=span_text, seconds=seconds_text)
    site = site or pages.Site(pages=False)
    env.globals.update(attempt_href=site.attempt, problem_href=site.problem, silences=SILENCES)
    return env


def default_output(run_dirs: list[Path]) -> Path:
    """reports/<run_id>/ (a folder), or reports/<a>-vs-<b>/ for a comparison."""
    return reports_dir() / "-vs-".join(Path(d).name for d in run_dirs)


def single_file(out: Path) -> bool:
    """An output named *.html is one self-contained file (no pages); anything else is a report folder."""
    return Path(out).suffix.lower() in (".html", ".htm")


def render_sweep(ref: str | Path, out: Path | None, *, k: float = 3.0) -> Path:
    """A sweep (soak.night.sweep): its configurations' runs compared, with the recommendation on top; default
    output reports/<sweep_id>/."""
    _, info = load_sweep(ref)
    runs = sweep_runs(info)
    if info.levels:
        return render_runs(list(runs.values()), out or reports_dir() / info.sweep_id, k=k,
                           capacity=capacity_view(info, runs), title=f"capacity {info.sweep_id}")
    found = standings(info, runs)
    return render_runs(list(runs.values()), out or reports_dir() / info.sweep_id, k=k,
                       sweep=(found, recommend(found)), title=f"sweep {info.sweep_id}")


def render_report(run_dirs: list[Path], out: Path, *, k: float = 3.0) -> Path:
    """Render the runs (one, or several for a comparison) into `out`: a folder (returns its index.html) or, for a
    name ending in .html, one file; summary.json goes beside index.html or the file."""
    return render_runs([load_run(Path(d)) for d in run_dirs], out, k=k)


def report_command(refs: list[str], out: Path | None, *, k: float = 3.0) -> Path:
    """`soak report`: one sweep id renders the sweep, run ids or folders the runs (none: the latest run)."""
    if len(refs) == 1 and sweep_folder(refs[0]) and not RunLayout(Path(refs[0])).info.is_file():
        return render_sweep(refs[0], out, k=k)
    dirs = [resolve_run_dir(ref) for ref in refs] if refs else [resolve_run_dir(None)]
    return render_report(dirs, out or default_output(dirs), k=k)


def render_runs(runs: list[RunRecord], out: Path, *, k: float = 3.0,
                sweep: tuple[list[Standing], Recommendation] | None = None, title: str | None = None,
                capacity: dict[str, Any] | None = None) -> Path:
    """`render_report` of runs already read; `sweep` adds a sweep's standings and recommendation, `capacity` a
    capacity sweep's levels and knee (soak.report.capacity)."""
    out = Path(out)
    folder = None if single_file(out) else out
    page = out if folder is None else folder / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    site = pages.Site.of(runs, pages=folder is not None)
    env = environment(site)
    generated_at = time.time()
    summaries = pages.attempts(runs, site, env, folder, generated_at)
    views = [run_view(run, k) for run in runs]
    for view, found in zip(views, summaries, strict=True):
        view["revision"] = revision.view(found)
    if folder is not None:
        pages.problem_pages(runs, summaries, site, env, folder, generated_at)
    swept = sweep_view(*sweep, runs, views) if sweep else None
    context = {
        "title": title or " vs ".join(v["run_id"] for v in views), "runs": views, "sweep": swept, "capacity": capacity,
        "comparison": comparison_view(runs, views) if len(runs) > 1 else None,
        "generated_at": generated_at, "root": "",
    }
    html = env.get_template("template.html.j2").render(**context)
    write_atomic(page, html)
    summary = {"report": page.name, "generated_at": generated_at,
               "runs": [{**v["headline"], "revision": revision_figures(v["revision"])} for v in views]}
    if swept:
        summary["sweep"] = {"recommendation": swept["choice"], "why": swept["why"],
                            "configurations": [jsonable(row) for row in swept["rows"]],
                            "sessions": jsonable(swept["sessions"])}
    if capacity:
        summary["capacity"] = capacity_summary(capacity)
    write_atomic(page.parent / "summary.json", json.dumps(summary, indent=2) + "\n")
    return page


def revision_figures(view: dict[str, Any]) -> dict[str, Any]:
    """The revision section's totals for summary.json."""
    return {"failed_round_1": view["failed_round_1"], **view["totals"], "looping": len(view["looping"])}
