"""The morning report, rendered: run folders -> one self-contained HTML file plus summary.json beside it."""

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2

from soak.files import write_atomic
from soak.paths import reports_dir
from soak.record.read import load_run
from soak.record.summary import span_text
from soak.report.build import comparison_view, run_view


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.{digits}f}"


def _pct(value: Any, digits: int = 0) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * 100:.{digits}f} %"


def _when(value: Any) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return "–"
    return datetime.fromtimestamp(value).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _since(at: Any, clock: dict[str, float]) -> str:
    """Position on the charts' time axis (hours or minutes since the start)."""
    return _num((at - clock["start"]) / clock["unit"], 2) if isinstance(at, int | float) else "–"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("soak.report", "."), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(num=_num, pct=_pct, when=_when, since=_since, span=span_text)
    return env


def default_output(run_dirs: list[Path]) -> Path:
    """reports/<run_id>.html, or reports/<a>-vs-<b>.html for a comparison."""
    return reports_dir() / ("-vs-".join(Path(d).name for d in run_dirs) + ".html")



def render_report(run_dirs: list[Path], out: Path, *, k: float = 3.0) -> Path:
    """Render the runs (one, or several for a comparison) into `out`; summary.json goes beside it."""
    runs = [load_run(Path(d)) for d in run_dirs]
    views = [run_view(run, k) for run in runs]
    context = {
        "title": " vs ".join(v["run_id"] for v in views), "runs": views,
        "comparison": comparison_view(runs, views) if len(runs) > 1 else None,
        "generated_at": time.time(),
    }
    html = environment().get_template("template.html.j2").render(**context)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, html)
    summary = {"report": out.name, "generated_at": context["generated_at"], "runs": [v["headline"] for v in views]}
    write_atomic(out.parent / "summary.json", json.dumps(summary, indent=2) + "\n")
    return out
