"""The morning report: tolerant loading, aggregation formulas, escaping, empty runs, CLI and a real browser."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.record import series
from soak.record.folder import CsvLog
from soak.record.read import load_run
from soak.record.schema import CallRow, EventRow, SampleRow, TaskRow
from soak.record.summary import OUTCOMES
from soak.report import aggregate as agg
from soak.report import charts
from soak.report.render import render_report
from tests.synth import build_run

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOAK_REPORTS_DIR", str(tmp_path / "reports"))


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rich run: restarts, mangled calls, spec-decode samples, a torn last row and hostile text."""
    return build_run(tmp_path_factory.mktemp("runs"), tasks=120, hours=2, torn=True, hostile=True)


def task(run_id: str = "r", **fields) -> TaskRow:
    base = {"cycle": 0, "task_id": "t", "suite": "builtin", "started_at": 100.0, "ended_at": 110.0,
            "duration_s": 10.0, "outcome": "pass", "rounds": 1, "orchestrator_calls": 1, "coder_calls": 2}
    return TaskRow(run_id=run_id, **{**base, **fields})


def write(path: Path, model, rows) -> None:
    log = CsvLog(path, model)
    for row in rows:
        log.append(row)
    log.close()


def samples(values: list[tuple[float, str, float, str]]) -> pd.DataFrame:
    rows = [SampleRow(run_id="r", at=at, source="server:vllm", metric=m, value=v, labels=lb).model_dump()
            for at, m, v, lb in values]
    return pd.DataFrame(rows)


# --- loading ----------------------------------------------------------------------------------


def test_load_drops_torn_row_and_types_columns(night: Path) -> None:
    run = load_run(night)
    assert len(run.tasks) == 120
    assert any("torn" in note for note in run.notes)
    assert run.tasks["duration_s"].dtype == float and run.calls["reasoning_exhausted"].dtype == bool
    assert list(run.calls.columns) == list(CallRow.model_fields)
    assert not run.running


def test_load_torn_inside_a_quoted_multiline_field(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    write(folder / "tasks.csv", TaskRow, [task(task_id="a"), task(task_id="b", error_tail="line 1\nline 2")])
    with (folder / "tasks.csv").open("a") as handle:
        handle.write('1,r,0,0,c,builtin,,100,110,10,fail,1,1,1,0,0,0,0,0,0,0,0,0,AssertionError,"first line\nsecond')
    run = load_run(folder)
    assert list(run.tasks["task_id"]) == ["a", "b"]
    assert run.tasks["error_tail"].iloc[1] == "line 1\nline 2"
    assert {"run.json: missing", "calls.csv: missing"} <= set(run.notes)


def test_load_is_lenient_about_other_schema_versions(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "tasks.csv").write_text(
        "schema_version,run_id,cycle,task_id,suite,started_at,ended_at,duration_s,outcome,future_column\n"
        "0,old,0,a,builtin,1,5,4,pass,x\n0,old,1,a,builtin,6,not-a-number,4,weird_outcome,y\n")
    run = load_run(folder)
    assert len(run.tasks) == 1 and run.tasks["rounds"].tolist() == [0]
    assert "tasks.csv: skipped 1 rows with unreadable required fields" in run.notes
    assert run.run_id == "old"
    (folder / "tasks.csv").write_text(
        "schema_version,run_id,cycle,task_id,suite,started_at,ended_at,duration_s,outcome\n"
        "2,old,0,a,builtin,1,5,4,future_outcome\n")
    assert "future_outcome" in render_report([folder], tmp_path / "old.html").read_text()


# --- aggregation ------------------------------------------------------------------------------


def test_counter_reset_counts_the_new_value_as_the_increase() -> None:
    frame = samples([(t, "vllm:prefix_cache_queries_total", v, "") for t, v in
                     [(0, 100), (5, 110), (10, 120), (15, 5), (20, 15)]])
    assert series.counter_total(frame, "vllm:prefix_cache_queries_total")["delta"].sum() == 10 + 10 + 5 + 10


def test_prefix_hit_rate_is_delta_hits_over_delta_queries() -> None:
    frame = samples([(0, "vllm:prefix_cache_queries_total", 1000, ""), (0, "vllm:prefix_cache_hits_total", 900, ""),
                     (30, "vllm:prefix_cache_queries_total", 1100, ""), (30, "vllm:prefix_cache_hits_total", 925, "")])
    rate = series.ratio_over_time(frame, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", 0, 60)
    assert rate["value"].tolist() == [0.25]


def test_spec_decode_formulas() -> None:
    rows = []
    for at, drafts, draft_tokens, accepted, pos0, pos1 in [(0, 10, 30, 5, 4, 1), (5, 110, 330, 155, 84, 51)]:
        rows += [(at, "vllm:spec_decode_num_drafts_total", drafts, ""),
                 (at, "vllm:spec_decode_num_draft_tokens_total", draft_tokens, ""),
                 (at, "vllm:spec_decode_num_accepted_tokens_total", accepted, ""),
                 (at, "vllm:spec_decode_num_accepted_tokens_per_pos_total", pos0, "position=0"),
                 (at, "vllm:spec_decode_num_accepted_tokens_per_pos_total", pos1, "position=1")]
    frame = samples(rows)
    per_pos = series.spec_decode(frame)
    assert per_pos["position"].tolist() == [0, 1]
    assert per_pos["acceptance"].tolist() == pytest.approx([0.8, 0.5])
    summary = series.spec_decode_summary(frame).iloc[0]
    assert summary["acceptance_rate"] == pytest.approx(150 / 300)
    assert summary["mean_acceptance_length"] == pytest.approx(1 + 150 / 100)


def test_per_problem_sorted_by_failure_rate_with_last_error_and_route() -> None:
    tasks = pd.DataFrame([t.model_dump() for t in [
        task(task_id="easy"), task(task_id="easy", ended_at=120),
        task(task_id="hard", outcome="fail", error_kind="SyntaxError", ended_at=111),
        task(task_id="hard", outcome="timeout", error_kind="budget", ended_at=130, route="coder-only"),
        task(task_id="mid", outcome="fail", error_kind="AssertionError"), task(task_id="mid"),
        task(task_id="mid", outcome="infra_error", error_kind="ConnectionError"),
    ]])
    table = agg.per_problem(tasks)
    assert table["task_id"].tolist() == ["hard", "mid", "easy"]
    hard = table.iloc[0]
    assert (hard["failure_rate"], hard["last_error_kind"], hard["route"]) == (1.0, "budget", "coder-only")
    mid = table.iloc[1]
    assert (mid["attempts"], mid["infra_errors"], mid["failure_rate"]) == (3, 1, 0.5)


def test_over_iteration_flags_tasks_above_k_times_the_median() -> None:
    tasks = pd.DataFrame([task(coder_calls=c).model_dump() for c in [2, 3, 3, 4, 30]])
    flagged, threshold = agg.over_iteration(tasks, k=3)
    assert threshold == 12 and flagged["calls"].tolist() == [31]
    assert agg.over_iteration(tasks, k=20)[0].empty


def test_headline_counts_restarts_mangled_calls_and_pass_at_round(night: Path) -> None:
    run = load_run(night)
    head = agg.headline(run)
    assert head["restarts"] == 2 and head["tasks"] == 120
    assert head["mangled_tool_calls"] == int((~run.calls["integrity"].isin(["ok", "none"])).sum()) > 0
    passed = run.tasks[run.tasks["outcome"] == "pass"]
    assert head["pass_at_round_1"] == pytest.approx((passed["rounds"] == 1).sum() / head["model_attempts"])
    assert head["pass_at_round_2"] == pytest.approx(head["pass_rate"])
    assert head["memory_flat"] is True and any(line.startswith("memory flat: +") for line in head["verdicts"])
    assert "self-healing fired 2 times" in " ".join(head["verdicts"])


def test_headline_names_tampering_and_suspicious_passes(night: Path) -> None:
    run = load_run(night)
    head = agg.headline(run)
    tasks = run.tasks
    tampered = int((tasks["outcome"] == "tampered").sum())
    flagged_passes = int(((tasks["outcome"] == "pass") & (tasks["suspicious"] != "")).sum())
    assert tampered == head["tampered"] == head["outcomes"]["tampered"] >= 3
    assert flagged_passes == head["suspicious_passes"] >= 3
    assert head["suspicious_attempts"] == int((tasks["suspicious"] != "").sum()) > flagged_passes
    assert head["model_failures"] == head["model_attempts"] - head["passes"] >= tampered  # counts against the model
    assert head["trusted_pass_rate"] == pytest.approx((head["passes"] - flagged_passes) / head["model_attempts"])
    lines = " | ".join(head["verdicts"])
    assert f"{tampered} attempts tampered with their judging (counted as model failures" in lines
    assert f"{flagged_passes} passes to distrust" in lines
    touched = int((tasks["tests_touched"] != "").sum())
    assert touched == head["tests_touched"] >= 3
    assert f"{touched} attempts touched the tests" in lines


def test_tampered_and_suspicious_tables() -> None:
    tasks = pd.DataFrame([t.model_dump() for t in [
        task(task_id="a", outcome="tampered", error_kind="Tampering", ended_at=120, cycle=0,
             error_tail="Tampering: the solution changed the test files\n0 of 3 tests passed"),
        task(task_id="a", outcome="tampered", error_kind="Tampering", ended_at=130, cycle=1,
             error_tail="Tampering: hook pytest_runtest_makereport added"),
        task(task_id="a", outcome="pass", ended_at=140, cycle=2),
        task(task_id="b", outcome="fail", suspicious="imports gc (line 1)", ended_at=111),
        task(task_id="b", outcome="pass", suspicious="imports gc (line 1); module-level __getattr__ (line 4)",
             ended_at=150, cycle=1),
        task(task_id="c", outcome="tampered", error_kind="Tampering", ended_at=115),
        task(task_id="c", outcome="fail", tests_touched="conftest.py", ended_at=116, cycle=1),
        task(task_id="c", outcome="fail", tests_touched="pytest.ini; test_solution.py", ended_at=117, cycle=2),
    ]])
    tampered = agg.tampered_attempts(tasks)
    assert tampered["task_id"].tolist() == ["a", "a", "c"]
    assert tampered["evidence"].iloc[0].startswith("Tampering: the solution changed the test files")
    assert tampered["evidence"].iloc[2] == "(no evidence recorded)"
    flagged = agg.suspicious_attempts(tasks)
    assert flagged["outcome"].tolist() == ["pass", "fail"]  # the passes to distrust first
    assert flagged["reasons"].iloc[0] == ["imports gc (line 1)", "module-level __getattr__ (line 4)"]
    table = agg.per_problem(tasks).set_index("task_id")
    assert table.loc["a", "tampered"] == 2 and table.loc["a", "failure_rate"] == pytest.approx(2 / 3)
    assert table.loc["a", "tampering"] == "Tampering: hook pytest_runtest_makereport added"  # the latest
    assert table.loc["c", "failure_rate"] == 1.0 and table.loc["c", "tampered"] == 1
    assert (table.loc["b", "suspicious_passes"], table.loc["b", "tampered"]) == (1, 0)
    assert table.loc["b", "suspicion"].endswith("module-level __getattr__ (line 4)")
    assert table.loc["a", "suspicion"] == "" and table.loc["b", "tampering"] == ""
    touched = agg.touched_attempts(tasks)
    assert touched["files"].tolist() == [["conftest.py"], ["pytest.ini", "test_solution.py"]]
    assert (table.loc["c", "tests_touched"], table.loc["c", "touched"]) == (2, "pytest.ini; test_solution.py")
    assert table.loc["a", "tests_touched"] == 0 and table.loc["a", "touched"] == ""


def test_tampered_has_its_own_colour_in_schema_order() -> None:
    colours = charts.OUTCOME_COLOURS
    assert set(colours) == set(OUTCOMES)
    assert colours["tampered"] not in {c for o, c in colours.items() if o != "tampered"}
    assert charts.outcome_order(["infra_error", "tampered", "pass", "fail", "new"]) == [
        "pass", "fail", "tampered", "infra_error", "new"]


def test_memory_verdict_says_grew_past_the_threshold() -> None:
    frame = pd.DataFrame([SampleRow(run_id="r", at=t * 60.0, source="host", metric=m, value=v).model_dump()
                          for t in range(100) for m, v in [("mem_available_bytes", 8 * 2**30 - t * 20 * 2**20),
                                                           ("mem_total_bytes", 16 * 2**30)]])
    flat, line = agg.memory_verdict(series.memory_trend(frame), frame)
    assert flat is False and line.startswith("memory grew: +1800 MB over 1.6 h")
    short = frame[frame["at"] < 600]
    assert agg.memory_verdict(series.memory_trend(short), short)[0] is None


# --- rendering --------------------------------------------------------------------------------


def test_render_escapes_run_text_and_stays_offline(night: Path, tmp_path: Path) -> None:
    out = render_report([night], tmp_path / "out" / "night.html")
    html = out.read_text()
    assert "<script" not in html.lower() and "<b>not bold</b>" not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    assert "the call in the transcript" in html and "write_file(path=" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html) and "url(" not in html
    assert html.count('src="data:image/png;base64,') >= 10
    for name in ("Task durations", "Delegation counters", "Per problem", "Timeline", "Server",
                 "Tool-call integrity", "Errors", "Speculative decoding", "trie-autocomplete"):
        assert name in html
    assert plt.get_fignums() == []
    summary = json.loads((out.parent / "summary.json").read_text())
    assert summary["report"] == "night.html" and summary["runs"][0]["restarts"] == 2
    assert summary["runs"][0]["tampered"] >= 3 and summary["runs"][0]["suspicious_passes"] >= 3
    assert summary["runs"][0]["tests_touched"] == agg.headline(load_run(night))["tests_touched"] >= 3


def test_render_shows_tampering_and_suspicious_passes_escaped(night: Path, tmp_path: Path) -> None:
    head = agg.headline(load_run(night))
    html = render_report([night], tmp_path / "night.html").read_text()
    judging = html[html.index('id="r1-judging"'):html.index('id="r1-problems"')]
    assert f"{head['tampered']} attempts tampered with their judging</h3>" in judging
    assert f"{head['suspicious_passes']} suspicious passes (" in judging
    # the evidence and the reasons, escaped: a hostile tail cannot close the <pre> nor run a script
    assert "Tampering: conftest.py added: &lt;script&gt;alert(&#39;tamper&#39;)&lt;/script&gt;" in judging
    assert "&lt;/pre&gt;&lt;i&gt;not italic&lt;/i&gt;" in judging and "<i>not italic</i>" not in html
    assert "&lt;script&gt;alert(&#34;sus&#34;)&lt;/script&gt;" in judging
    assert "<li>imports pytest (line 1)</li>" in judging
    assert 'class="flag">pass ⚠</span>' in judging
    assert f"{head['tests_touched']} attempts touched the tests</h3>" in judging
    assert "<li><code>&lt;script&gt;alert(&#39;touched&#39;)&lt;/script&gt;.pth</code></li>" in judging
    headline = html[html.index('id="r1-headline"'):html.index('id="r1-durations"')]
    assert "tampered with their judging</a>" in headline and "suspicious passes</a>" in headline
    assert f"<b>{head['tests_touched']}</b><span><a href=\"#r1-judging\">touched the tests</a>" in headline
    assert f"<li>{head['tampered']} attempts tampered with their judging" in headline
    problems = html[html.index('id="r1-problems"'):html.index('id="r1-timeline"')]
    assert "<th>judging</th>" in problems and 'class="flag">tampered ' in problems
    assert "<summary>evidence</summary><pre>Tampering: conftest.py added: &lt;script&gt;" in problems
    assert 'class="flag">suspicious passes ' in problems
    assert 'class="flag">tests touched ' in problems and "<summary>files</summary>" in problems
    assert "<script" not in html.lower()


@pytest.mark.parametrize("n_tasks", [0, 1])
def test_render_runs_with_almost_no_data(tmp_path: Path, n_tasks: int) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "run.json").write_text('{"run_id": "tiny", "started_at": 100.0, "ended_at": null}')
    if n_tasks:
        write(folder / "tasks.csv", TaskRow, [task(run_id="tiny")])
        write(folder / "events.csv", EventRow, [EventRow(run_id="tiny", at=100.0, kind="run_start")])
    html = render_report([folder], tmp_path / "tiny.html").read_text()
    assert "no data" in html and "not ended" in html
    summary = json.loads((tmp_path / "summary.json").read_text())["runs"][0]
    assert summary["tasks"] == n_tasks and summary["pass_rate"] == (1.0 if n_tasks else None)


@pytest.mark.parametrize("keep", [(), ("samples.csv",), ("calls.csv", "events.csv"), ("run.json",)])
def test_render_a_folder_with_only_some_files(night: Path, tmp_path: Path, keep: tuple[str, ...]) -> None:
    folder = tmp_path / "partial"
    folder.mkdir()
    for name in keep:
        shutil.copyfile(night / name, folder / name)
    html = render_report([folder], tmp_path / "partial.html").read_text()
    assert "no data" in html and plt.get_fignums() == []


@pytest.mark.slow  # seconds, not milliseconds: the default set stays under 5 minutes on 2 cores; CI runs it
def test_render_comparison_of_two_runs(night: Path, tmp_path: Path) -> None:
    other = build_run(tmp_path, run_id="llama", tasks=30, hours=1, engine="llama-server", seed=5, in_progress=True)
    html = render_report([night, other], tmp_path / "cmp.html").read_text()
    assert 'id="comparison"' in html and "Pass rate per problem" in html
    assert json.loads((tmp_path / "summary.json").read_text())["runs"][1]["run_id"] == "llama"


@pytest.mark.slow  # seconds, not milliseconds: the default set stays under 5 minutes on 2 cores; CI runs it
def test_cli_renders_by_run_id_and_latest(night: Path, tmp_path: Path) -> None:
    shutil.copytree(night, tmp_path / "data" / night.name)
    runner = CliRunner()
    result = runner.invoke(main, ["report", night.name])
    assert result.exit_code == 0, result.output
    assert Path(result.output.strip()) == tmp_path / "reports" / night.name / "index.html"
    assert (tmp_path / "reports" / night.name / "summary.json").is_file()
    assert (tmp_path / "reports" / night.name / "problems" / "dijkstra.html").is_file()
    assert runner.invoke(main, ["report"]).output.strip().endswith(f"{night.name}/index.html")
    single = runner.invoke(main, ["report", night.name, "-o", str(tmp_path / "mail" / "night.html")])
    assert single.exit_code == 0 and (tmp_path / "mail" / "night.html").is_file()
    assert sorted(p.name for p in (tmp_path / "mail").iterdir()) == ["night.html", "summary.json"]
    missing = runner.invoke(main, ["report", "no-such-run"])
    assert missing.exit_code == 2 and "no run 'no-such-run'" in missing.output


# --- a real browser ---------------------------------------------------------------------------


def browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def open_in_browser(page: Path, png: Path, profile: Path, height: int = 3000) -> list[str]:
    """Load the page in headless Chromium, screenshot it, return the console messages it logged."""
    exe = browser()
    assert exe is not None
    command = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", f"--screenshot={png}",
               f"--window-size=1280,{height}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert png.is_file(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


needs_browser = pytest.mark.skipif(browser() is None, reason="no chromium on PATH (apt-get install chromium)")


@needs_browser
def test_console_check_catches_a_script_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    assert open_in_browser(page, tmp_path / "broken.png", tmp_path / "profile")


@needs_browser
def test_report_in_a_real_browser(night: Path, tmp_path: Path) -> None:
    """No console message at all (an injected script would trip the CSP and log one); charts are painted, the course
    of the night's too (its lines and strip in Okabe–Ito blue)."""
    page = render_report([night], tmp_path / "night.html")
    png = tmp_path / "night.png"
    assert open_in_browser(page, png, tmp_path / "profile", height=10500) == []  # down to the timeline's bars
    pixels = matplotlib.image.imread(png)[..., :3]

    def painted(colour: int) -> int:
        rgb = [(colour >> shift & 0xFF) / 255 for shift in (16, 8, 0)]
        return int((abs(pixels - rgb).max(axis=-1) < 0.03).sum())

    hist_blue, pass_green, course_blue = painted(0x6A8CAF), painted(0x2E9D4A), painted(0x0072B2)
    assert hist_blue > 24_000 and pass_green > 12_000 and course_blue > 24_000, (hist_blue, pass_green, course_blue)


# --- a run recorded by the real runner against the simulator ----------------------------------

FAULTY = """
[timing]
ttft_seconds = [0.01, 0.05]
decode_tokens_per_second = 2000
[coder]
p_correct = 0.5
p_fix = 0.7
[spec_decode]
enabled = true
[[faults]]
kind = "name_absorbs_args"
rate = 0.15
roles = ["coder"]
[[faults]]
kind = "http_500"
rate = 0.1
[[faults]]
kind = "reasoning_budget"
rate = 0.1
"""


@pytest.mark.slow
def test_report_of_a_run_recorded_by_the_runner_against_the_sim(tmp_path: Path) -> None:
    from soak.sim.server import SimServer, load_scenario

    scenario_file = tmp_path / "faulty.toml"
    scenario_file.write_text(FAULTY)
    sim = SimServer(load_scenario(scenario_file), seed=3)
    url = sim.start()
    env = {**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data"), "SOAK_REPORTS_DIR": str(tmp_path / "reports")}
    soak = [sys.executable, "-c", "from soak.cli import main; main()"]
    try:
        done = subprocess.run([*soak, "run", "--base-url", url, "--model", "soak-sim", "--tasks", "8",
                               "--run-id", "recorded", "--quiet"], env=env, capture_output=True, text=True,
                              timeout=240)
    finally:
        sim.stop()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rendered = subprocess.run([*soak, "report", "recorded"], env=env, capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    page = Path(rendered.stdout.strip())
    folder = tmp_path / "data" / "recorded"
    summary = json.loads((page.parent / "summary.json").read_text())["runs"][0]
    tasks, calls = pd.read_csv(folder / "tasks.csv"), pd.read_csv(folder / "calls.csv")
    assert summary["tasks"] == len(tasks) == 8 and summary["calls"] == len(calls)
    assert summary["outcomes"] == tasks["outcome"].value_counts().to_dict()
    assert summary["mangled_tool_calls"] == int((~calls["integrity"].isin(["ok", "none"])).sum())
    html = page.read_text()
    assert all(task_id in html for task_id in tasks["task_id"])
    if browser():
        assert open_in_browser(page, tmp_path / "recorded.png", tmp_path / "profile") == []
