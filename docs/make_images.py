"""The guides' images, rendered from real nights on `soak sim` so they follow the report:

- report-screenshot.png and report-attempt.png: `soak run --rehearse`, then the top of its report and the page of an
  attempt that a revision round fixed, shot by headless Chromium (`apt-get install -y chromium`; without it they are
  left as they are, and the script says so);
- course.png: the course-of-the-night chart of the report of a five-minute `degrade` night (the scenario's drift
  starts at 120 s and 150 s), the report's own PNG.

Run from the repository root, in the venv: `python docs/make_images.py` (about ten minutes on a 2-core machine). Each
image is reduced to a 256-colour PNG; the docs keep only images under 300 kB."""

import base64
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from PIL import Image

from soak.record.identity import AttemptId
from soak.stack.servers import free_port

DOCS = Path(__file__).resolve().parent
SOAK = [sys.executable, "-m", "soak.cli"]
MAX_BYTES = 300_000
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def soak(*args: str, env: dict[str, str]) -> None:
    print("$ soak", shlex.join(args), flush=True)
    subprocess.run([*SOAK, *args], env=env, check=True)


def small_png(source: Path, target: Path) -> None:
    """`source` as a 256-colour PNG at `target`, refused when still over MAX_BYTES."""
    Image.open(source).convert("RGB").quantize(256).save(target, optimize=True)
    size = target.stat().st_size
    if size > MAX_BYTES:
        target.unlink()
        raise SystemExit(f"{target.name}: {size} bytes after reduction, over {MAX_BYTES}: not kept")
    print(f"{target.name}: {size // 1000} kB")


def screenshot(browser: str, page: Path, target: Path, work: Path, height: int) -> None:
    shot = work / f"{target.stem}.raw.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={work / 'profile'}", "--hide-scrollbars", f"--screenshot={shot}",
                    f"--window-size=1280,{height}", page.as_uri()], check=True, capture_output=True, timeout=120)
    small_png(shot, target)


def revised_attempt(run: Path, report: Path) -> Path:
    """The page of an attempt that failed its first round and passed its second."""
    with (run / "tasks.csv").open() as rows:
        for row in csv.DictReader(rows):
            if row["outcome"] == "pass" and row["rounds"] == "2":
                return next(report.glob(f"attempts/*/{AttemptId.of(row).name}.html"))
    raise SystemExit(f"{run}: no attempt passed in its second round")


def course_chart(index: Path, target: Path, work: Path) -> None:
    match = re.search(r'<img alt="the night\'s windows[^"]*" src="data:image/png;base64,([^"]+)"', index.read_text())
    if match is None:
        raise SystemExit(f"{index}: no course chart")
    raw = work / "course.raw.png"
    raw.write_bytes(base64.b64decode(match[1]))
    small_png(raw, target)


def degrading_night(work: Path, env: dict[str, str]) -> Path:
    """Five minutes on the `degrade` scenario, its sim started and stopped by soak's stack; the report's index."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = "exec " + shlex.join([*SOAK, "sim", "--port", str(port), "--scenario", "degrade"])
    config = work / "soak.toml"
    config.write_text(textwrap.dedent(f"""
        concurrency = 4
        [endpoints.default]
        base_url = "{base_url}"
        model = "soak-sim"
        [[stack.servers]]
        name = "sim"
        up = {json.dumps(up)}
        base_url = "{base_url}"
        start_timeout_seconds = 30
        [sampling]
        interval_seconds = 1
        """))
    soak("run", "--config", str(config), "--minutes", "5", "--quiet", "--run-id", "degrade", env=env)
    soak("report", "degrade", "--output", str(work / "degrade-report"), env=env)
    return work / "degrade-report" / "index.html"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        env = {**os.environ, "SOAK_DATA_DIR": str(work / "data"),
               "SOAK_REPORTS_DIR": str(work / "reports")}
        started = time.monotonic()
        soak("run", "--rehearse", "--quiet", "--run-id", "rehearsal", env=env)
        print(f"the rehearsal took {time.monotonic() - started:.0f} s")
        report = work / "reports" / "rehearsal"
        browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
        if browser is None:
            print("no chromium on PATH (apt-get install -y chromium): the report screenshots are left as they are")
        else:
            screenshot(browser, report / "index.html", DOCS / "report-screenshot.png", work, height=900)
            screenshot(browser, revised_attempt(work / "data" / "rehearsal", report), DOCS / "report-attempt.png",
                       work, height=1100)
        course_chart(degrading_night(work, env), DOCS / "course.png", work)


if __name__ == "__main__":
    main()
