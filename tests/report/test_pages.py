"""The report folder: every attempt reachable from index.html, its page (threads, verdicts, rounds, the diff, the
error fed back) escaped and offline, the revision statistics against counts made from tasks.csv and the round files;
nights on soak sim loaded in a real browser."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.llm.integrity import path_escapes
from soak.report.attempt import MESSAGE_CHARS
from soak.report.pages import slug
from soak.report.render import render_report
from tests.helpers import EXERCISM_SUITE
from tests.report.test_render import browser, needs_browser, open_in_browser
from tests.synth import build_run

SUITE = EXERCISM_SUITE
MARKER = "broken on purpose"
"""What the sim's coder writes into a wrong solution (soak.sim.reply.broken_variant)."""
PAGE_LIMIT = 5 * 2**20


class Page(HTMLParser):
    """The links of a page, and its text with whether each piece is hidden in a closed <details>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.details: list[bool] = []
        self.in_summary = 0
        self.visible: list[str] = []
        self.hidden: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))
        if tag == "details":
            self.details.append("open" in values)
        if tag == "summary":
            self.in_summary += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self.details:
            self.details.pop()
        if tag == "summary":
            self.in_summary -= 1

    def handle_data(self, data: str) -> None:
        shown = all(self.details) or (self.in_summary and all(self.details[:-1]))
        (self.visible if shown else self.hidden).append(data)

    @property
    def text(self) -> str:
        return "".join(self.visible)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text())
    return page


def crawl(index: Path) -> set[Path]:
    """Every page reachable from index.html by relative links; each link must resolve to a file in the folder."""
    root = index.parent.resolve()
    seen, todo = set(), [index.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for href in parse(path).links:
            target, _ = urldefrag(href)
            if not target:
                continue
            assert not re.match(r"^[a-z]+:|^//", target), f"{path.name}: external link {href}"
            resolved = (path.parent / unquote(target)).resolve()
            assert resolved.is_file() and resolved.is_relative_to(root), f"{path}: broken link {href}"
            if resolved.suffix == ".html":
                todo.append(resolved)
    return seen


def attempt_page(folder: Path, run_id: str, task_id: str, cycle: int) -> Path:
    return folder / "attempts" / slug(run_id) / slug(task_id) / f"{cycle}.html"


def counts(path: Path) -> tuple[int, bool]:
    """(tests passing, every test passed) from a round's test_output.txt, read without soak's parser."""
    text = path.read_text() if path.is_file() else ""
    summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|errors?) in ", line)]
    words = dict((w, int(n)) for n, w in re.findall(r"(\d+) (passed|failed|error)", summary[-1])) if summary else {}
    passed = words.get("passed", 0)
    return passed, passed > 0 and not words.get("failed") and not words.get("error")


def expected_revision(run: Path) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Round 1 against round 2 of each attempt in tasks.csv whose round 1 failed: totals and per problem."""
    tasks = pd.read_csv(run / "tasks.csv", keep_default_na=False)
    tasks = tasks[tasks["session"] == tasks.groupby(["task_id", "cycle"])["session"].transform("max")]
    totals = dict.fromkeys(["fixed", "better", "unchanged", "worse", "no_round_2"], 0)
    per_problem: dict[str, dict[str, int]] = {}
    for task_id, cycle in zip(tasks["task_id"], tasks["cycle"], strict=True):
        work = run / "work" / str(task_id) / str(cycle)
        if not (work / "round-1").is_dir():
            continue
        first, first_ok = counts(work / "round-1" / "test_output.txt")
        if first_ok:
            continue
        if not (work / "round-2").is_dir():
            kind = "no_round_2"
        else:
            second, second_ok = counts(work / "round-2" / "test_output.txt")
            kind = "fixed" if second_ok else "better" if second > first else "worse" if second < first else "unchanged"
        totals[kind] += 1
        per_problem.setdefault(str(task_id), dict.fromkeys(totals, 0))[kind] += 1
    return totals, per_problem


def check_revision(index: Path, run: Path, position: int = 0) -> dict[str, int]:
    totals, per_problem = expected_revision(run)
    figures = json.loads((index.parent / "summary.json").read_text())["runs"][position]["revision"]
    assert {k: figures[k] for k in totals} == totals
    assert figures["failed_round_1"] == sum(totals.values())
    html = index.read_text()
    section = re.sub(r"\s+", "", html[html.index(f'id="r{position + 1}-revision"'):])
    for task_id, row in per_problem.items():
        classes = {"fixed": "n fixed", "worse": "n worse"}
        cells = "".join(f'<td class="{classes.get(k, "n")}">{n}</td>' for k, n in row.items())
        expected = re.sub(r"\s+", "", f'>{task_id}</a></td><td class="n">{sum(row.values())}</td>{cells}')
        assert expected in section, (task_id, row)
    return totals


# --- synthetic nights (fast) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("runs"), tasks=60, hours=1, hostile=True, work=True, seed=3)


@pytest.fixture(scope="module")
def folder(night: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_report([night], tmp_path_factory.mktemp("reports") / "night")


def test_every_attempt_has_a_page_reachable_from_the_index(night: Path, folder: Path) -> None:
    reached = crawl(folder)
    tasks = pd.read_csv(night / "tasks.csv")
    pages = {attempt_page(folder.parent, "night-1", t, c).resolve() for t, c in zip(tasks["task_id"], tasks["cycle"],
                                                                                      strict=True)}
    assert len(pages) == len(tasks) and pages <= reached
    assert {(folder.parent / "problems" / f"{slug(t)}.html").resolve() for t in tasks["task_id"]} <= reached
    for page in folder.parent.rglob("*.html"):
        assert page.stat().st_size < PAGE_LIMIT


def test_attempt_page_shows_rounds_diff_feedback_and_verdicts_escaped(night: Path, folder: Path) -> None:
    tasks = pd.read_csv(night / "tasks.csv", keep_default_na=False)
    revised = tasks[(tasks["rounds"] == 2) & (tasks["outcome"] == "fail")].iloc[0]
    page = attempt_page(folder.parent, "night-1", revised["task_id"], revised["cycle"])
    parsed = parse(page)
    text = parsed.text
    assert "Round 1 · tests" in text and "Round 2 · tests" in text and "diff to round 1" in text
    assert "fed back to the model at the start of round 2" in text and "The tests failed (" in text
    assert "rounds: 2 of its 2, the last one failed" in text  # the limit that ended it, as the attempt had it
    html = page.read_text()
    assert '<span class="add">+' in html and '<span class="del">-' in html
    assert "<svg" in html and 'class="first-bar"' in html
    broken = tasks[(tasks["mangled_tool_calls"] > 0)].iloc[0]
    html = attempt_page(folder.parent, "night-1", broken["task_id"], broken["cycle"]).read_text()
    assert 'class="verdict bad">mangled name</span>' in html or 'class="verdict bad">bad json</span>' in html
    touched = tasks[tasks["tests_touched"] != ""].iloc[0]
    html = attempt_page(folder.parent, "night-1", touched["task_id"], touched["cycle"]).read_text()
    assert "tests touched (ignored by the judge): &lt;script&gt;alert(&#39;touched&#39;)&lt;/script&gt;.pth" in html
    for page in folder.parent.rglob("*.html"):
        body = page.read_text()
        assert "<script" not in body.lower(), page
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", body)
    assert any("&lt;script&gt;" in p.read_text() for p in (folder.parent / "attempts").rglob("*.html"))


def test_long_transcript_is_cut_with_a_link_to_the_raw_file(night: Path, folder: Path) -> None:
    tasks = pd.read_csv(night / "tasks.csv")
    long = tasks.iloc[7]  # synth: attempt 7 of every 50 has a transcript longer than a page
    page = attempt_page(folder.parent, "night-1", long["task_id"], long["cycle"])
    html = page.read_text()
    assert "transcript cut to fit the page" in html and page.stat().st_size < PAGE_LIMIT
    raw = re.search(r'href="([^"]*transcript\.jsonl)"', html)
    assert raw and (page.parent / raw[1]).resolve().read_bytes() == (
        night / "work" / long["task_id"] / str(long["cycle"]) / "transcript.jsonl").read_bytes()
    assert len(max(re.findall(r"<pre>(.*?)</pre>", html, re.S), key=len)) < MESSAGE_CHARS * 1.3
    assert "coder turns in a row wrote near-identical files" in html


def test_revision_statistics_match_tasks_and_round_files(night: Path, folder: Path) -> None:
    totals = check_revision(folder, night)
    assert totals["fixed"] and totals["worse"] and totals["unchanged"] and totals["no_round_2"]


def test_single_file_keeps_no_pages_and_no_links(night: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(night), "-o", str(tmp_path / "one.html")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.html", "summary.json"]
    page = parse(tmp_path / "one.html")
    assert all(link.startswith("#") for link in page.links) and "Did revision help?" in page.text


# --- nights on soak sim (slow) ----------------------------------------------------------------


def sim_night(data: Path, name: str, scenario, tasks: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    from soak.sim.server import SimServer

    monkeypatch.setenv("SOAK_DATA_DIR", str(data))
    with SimServer(scenario, seed=2, suite=SUITE) as sim:
        url = sim.start()
        result = CliRunner().invoke(main, ["run", "--base-url", url, "--model", "soak-sim", "--suite", SUITE,
                                           "--tasks", str(tasks), "--quiet", "--run-id", name])
    assert result.exit_code == 0, result.output
    return data / name


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from soak.sim.scenario import load_scenario

    data = tmp_path_factory.mktemp("sim-data")
    quick = {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 8}
    flaky = load_scenario("flaky")
    flaky = flaky.model_copy(update={
        "timing": flaky.timing.model_copy(update=quick),
        "faults": [f for f in flaky.faults if f.kind not in ("stall", "crash", "slow_health", "drop")]})
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {"revise": sim_night(data, "revise", load_scenario("revise"), 4, monkeypatch),
                "flaky": sim_night(data, "flaky", flaky, 8, monkeypatch),
                "mangled": sim_night(data, "mangled", load_scenario("mangled"), 2, monkeypatch)}


@pytest.mark.slow
def test_sim_nights_every_attempt_reachable_and_statistics(sim_runs: dict[str, Path], tmp_path: Path) -> None:
    runs = list(sim_runs.values())
    index = render_report(runs, tmp_path / "report")
    reached = crawl(index)
    for run in runs:
        tasks = pd.read_csv(run / "tasks.csv")
        for task_id, cycle in zip(tasks["task_id"], tasks["cycle"], strict=True):
            assert attempt_page(index.parent, run.name, task_id, cycle).resolve() in reached
    for position, run in enumerate(runs):
        check_revision(index, run, position)
    assert check_revision(render_report([sim_runs["revise"]], tmp_path / "revise"), sim_runs["revise"]) == {
        "fixed": 4, "better": 0, "unchanged": 0, "worse": 0, "no_round_2": 0}


@pytest.mark.slow
def test_sim_path_escape_attempt_shows_the_refused_path(sim_runs: dict[str, Path], tmp_path: Path) -> None:
    index = render_report([sim_runs["mangled"]], tmp_path / "mangled")
    calls = pd.read_csv(sim_runs["mangled"] / "calls.csv")
    escaped = calls[calls["integrity"] == "path_escape"].iloc[0]
    page = attempt_page(index.parent, "mangled", escaped["task_id"], escaped["cycle"])
    text = parse(page).text
    assert "path escape" in text and re.search(r"refused path: \S+", text)
    transcript = (sim_runs["mangled"] / "work" / escaped["task_id"] / str(escaped["cycle"]) / "transcript.jsonl")
    paths = [json.loads(c["function"]["arguments"]).get("path") for line in transcript.read_text().splitlines()
             for c in json.loads(line).get("tool_calls") or [] if c["function"]["name"] == "write_file"
             and c["function"]["arguments"].startswith("{") and _parses(c["function"]["arguments"])]
    refused = re.search(r"refused path: (\S+)", text)[1]
    assert refused in paths and path_escapes(refused)
    pages = "".join(parse(page).text for page in (index.parent / "attempts").rglob("*.html"))
    assert "mangled name" in pages and "bad json" in pages  # the other two broken calls, named as such
    bad = calls[~calls["integrity"].isin(["ok", "none"])]
    assert sum(page.read_text().count('class="verdict bad"') for page in (index.parent / "attempts").rglob("*.html")) \
        == len(bad) == 3


def _parses(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


@pytest.mark.slow
@needs_browser
def test_sim_pages_in_a_real_browser(sim_runs: dict[str, Path], tmp_path: Path) -> None:
    """No console message on any attempt page; on a revised one the diff, the error fed back and the sim's marker
    are on screen (not folded away), and the screenshot is not blank."""
    index = render_report([sim_runs["revise"], sim_runs["mangled"]], tmp_path / "report")
    pages = [index, *sorted((index.parent / "attempts").rglob("*.html")), *(index.parent / "problems").glob("*.html")]
    for n, page in enumerate(pages):
        assert open_in_browser(page, tmp_path / f"{n}.png", tmp_path / "profile", height=1600) == [], page
    revised = attempt_page(index.parent, "revise", pd.read_csv(sim_runs["revise"] / "tasks.csv")["task_id"][0],
                           pd.read_csv(sim_runs["revise"] / "tasks.csv")["cycle"][0])
    text = parse(revised).text
    assert "diff to round 1" in text and f"-    raise NotImplementedError('{MARKER}')" in text
    assert "fed back to the model at the start of round 2" in text
    assert f"NotImplementedError: {MARKER}" in text.split("fed back to the model")[1]
    png = tmp_path / "revised.png"
    assert open_in_browser(revised, png, tmp_path / "profile", height=1600) == []
    pixels = matplotlib.image.imread(png)[..., :3]
    dark = (pixels.max(axis=-1) < 0.2).mean()  # the code, diff and error blocks
    assert pixels.std() > 0.05 and dark > 0.05, (pixels.std(), dark)
    assert np.unique(pixels.reshape(-1, 3)[::97], axis=0).shape[0] > 50
    assert browser()


def test_route_names_a_problem_revision_never_fixes() -> None:
    from soak.decisions.route import RouteRules, decide, revision_counts
    from soak.record.summary import problem_table
    from tests.report.test_render import task

    tasks = pd.DataFrame([t.model_dump() for t in [
        *(task(task_id="stuck", cycle=c, outcome="fail", rounds=2) for c in range(3)),
        *(task(task_id="mends", cycle=c, outcome="pass" if c else "fail", rounds=2) for c in range(3)),
    ]])
    table = problem_table(tasks).join(revision_counts(tasks))
    assert table.loc["stuck", ["revised", "revision_fixes"]].tolist() == [3, 0]
    routes = decide(table, RouteRules(), typical_calls=3)
    assert "revision fixed none of its 3 second rounds" in routes["stuck"][1]
    assert "mends" not in routes


def test_external_agent_attempt_shows_its_output_and_logs(tmp_path: Path) -> None:
    from soak.record.schema import TaskRow
    from tests.report.test_render import task, write

    run = tmp_path / "agent-night"
    round_1 = run / "work" / "two-fer" / "0" / "round-1"
    (round_1 / "agent" / ".hermes" / "sessions").mkdir(parents=True)
    (round_1 / "two_fer.py").write_text("def two_fer(name='you'):\n    return '<script>x</script>'\n")
    (round_1 / "test_output.txt").write_text("F.\nFAILED two_fer_test.py::test_name - AssertionError\n"
                                             "1 failed, 1 passed in 0.1s\n")
    (round_1 / "agent" / "output.txt").write_text("hermes: wrote two_fer.py <b>done</b>\n")
    (round_1 / "agent" / ".hermes" / "sessions" / "s1.json").write_text('{"turns": 3}')
    write(run / "tasks.csv", TaskRow, [task(run_id="agent-night", task_id="two-fer", outcome="fail", agent_calls=3,
                                            agent="hermes-agent 0.19.0", tests_passed=1, tests_total=2)])
    index = render_report([run], tmp_path / "report")
    page = attempt_page(index.parent, "agent-night", "two-fer", 0)
    text = parse(page).text
    assert "an external agent (hermes-agent 0.19.0) ran this attempt" in text
    assert "hermes: wrote two_fer.py <b>done</b>" in text and "agent: .hermes/sessions/s1.json" in text
    assert "<b>done</b>" not in page.read_text() and "<script>x" not in page.read_text()
    assert "two_fer_test.py::test_name" in text and "1/2 passed" in text
    assert page.resolve() in crawl(index)
