"""The claim reader measured on this corpus: precision and recall per class on every split the corpus README reports,
and the reader's error on claimed success that the false-success interval carries (soak.record.reader_figures).

    python -m tests.agent.corpus.measure          # print the README's tables
    python -m tests.agent.corpus.measure --write  # write them into README.md and soak/record/reader_figures.py

Two splits: every fourth line (`split` in each row, held out of every tuning step since the first batch), and by
*source*: HELD_OUT_SOURCES are the repositories none of whose messages any rule was ever tuned on, which is what a
user's own agent is to the reader. A trimmed message is left out: its claim may be in the part the corpus could not
keep."""

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from soak.agent.claims import claim_of

HERE = Path(__file__).parent
CORPUS = HERE / "closing_messages.jsonl"
README = HERE / "README.md"
MODULE = HERE.parents[2] / "soak" / "record" / "reader_figures.py"
HELD_OUT_SOURCES = ("simonjmendelsohn/impossiblebench-honest-failure", "anthropics/claude-code-action",
                    "marin-community/marin", "ThatHunky/gryag", "michalhorcic/cozy-checkout", "xdotli/harbor-datagen",
                    "BeauCranston/car-game")
"""Every repository with no message on a tuning line: batch 3's new sources and two of batch 1's whose messages all
fell on held-out lines."""
CLASSES = ("success", "failure", "tests")
BEGIN, END = "<!-- figures: python -m tests.agent.corpus.measure --write -->", "<!-- /figures -->"


def repository(source: str) -> str:
    """owner/name of a row's source (`github:owner/name@commit:path`, `github:owner/name/path` or an issue's URL)."""
    match = re.match(r"(?:github:)?(?:https://github\.com/)?([\w.-]+/[\w.-]+?)(?:@|/|:|\s|$)", source)
    assert match, source
    return match.group(1)


def kind(status: str) -> str:
    return {"done": "success", "partial": "failure", "blocked": "failure"}.get(status, "none")


def readings() -> list[dict[str, object]]:
    """Each untrimmed row with what the reader made of it: `read` (its class), `read_tests`, and `claimed` (what
    soak counts as a claimed success: done, or the tests claimed to pass)."""
    rows = []
    for number, line in enumerate(CORPUS.read_text().splitlines(), 1):
        row = json.loads(line)
        if row.get("trimmed"):
            continue
        claim = claim_of(row["message"])
        rows.append({**row, "line": number, "repository": repository(row["source"]), "read": kind(claim.status),
                     "read_tests": claim.tests_claim, "claimed": claim.status == "done" or claim.tests_claim})
    return rows


def counts(rows: list[dict[str, object]]) -> dict[str, tuple[int, int, int]]:
    """Per class: (read and labelled, read, labelled)."""
    found: dict[str, list[int]] = {name: [0, 0, 0] for name in CLASSES}
    for row in rows:
        labelled = kind(str(row["status"]))
        for name, got, want in (("success", row["read"] == "success", labelled == "success"),
                                ("failure", row["read"] == "failure", labelled == "failure"),
                                ("tests", bool(row["read_tests"]), bool(row["tests_claim"]))):
            found[name][0] += got and want
            found[name][1] += got
            found[name][2] += want
    return {name: (both, read, labelled) for name, (both, read, labelled) in found.items()}


def splits(rows: list[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    held = [r for r in rows if r["repository"] in HELD_OUT_SOURCES]
    return {"held_out": [r for r in rows if r["split"] == "held_out"], "all": rows,
            "tune_sources": [r for r in rows if r["repository"] not in HELD_OUT_SOURCES], "held_out_sources": held}


def claimed_success(rows: list[dict[str, object]]) -> tuple[int, int, int, int]:
    """(labelled done and read as claimed, labelled done, labelled otherwise and read as claimed, labelled otherwise):
    the reader's sensitivity and false-positive rate on the figure the false-success rate counts."""
    done = [r for r in rows if r["status"] == "done"]
    other = [r for r in rows if r["status"] != "done"]
    return sum(bool(r["claimed"]) for r in done), len(done), sum(bool(r["claimed"]) for r in other), len(other)


def pr(both: int, read: int, labelled: int) -> str:
    """precision / recall, a dash where either has no base."""
    precision = f"{both / read:.2f}" if read else "–"
    recall = f"{both / labelled:.2f}" if labelled else "–"
    return f"{precision} / {recall}"


def table(title: str, groups: dict[str, list[dict[str, object]]]) -> list[str]:
    lines = [f"| {title} | n | success P / R | admitted failure P / R (of) | tests claim P / R | claimed success "
             "read on done / on the rest |", "| --- | ---: | --- | --- | --- | --- |"]
    for name, rows in groups.items():
        c = counts(rows)
        hit, done, false, other = claimed_success(rows)
        lines.append(f"| {name} | {len(rows)} | {pr(*c['success'])} | {pr(*c['failure'])} ({c['failure'][2]}) | "
                     f"{pr(*c['tests'])} | {hit}/{done} / {false}/{other} |")
    return lines


def report(rows: list[dict[str, object]]) -> str:
    """The corpus README's figures, as markdown."""
    by_agent: dict[str, list[dict[str, object]]] = defaultdict(list)
    by_form: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_agent[str(row["agent"])].append(row)
        by_form[str(row["form"])].append(row)
    ordered = lambda groups: dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))  # noqa: E731
    lines = [BEGIN, "", *table("split", splits(rows)), "", *table("agent (all lines)", ordered(by_agent)), "",
             *table("form (all lines)", ordered(by_form)), "", END]
    return "\n".join(lines)


def module(rows: list[dict[str, object]]) -> str:
    """soak/record/reader_figures.py's text."""
    held = splits(rows)
    per_split = {name: counts(held[name]) for name in ("held_out", "all", "tune_sources", "held_out_sources")}
    hit, done, false, other = claimed_success(held["held_out_sources"])
    sources = "\n".join(f"    {json.dumps(name)}," for name in HELD_OUT_SOURCES)
    classes = "\n".join(f"    {json.dumps(name)}: {json.dumps(value).replace('[', '(').replace(']', ')')},"
                        for name, value in per_split.items())
    return f'''"""The claim reader's measured error, the one place soak keeps it: written by
`python -m tests.agent.corpus.measure --write` from tests/agent/corpus/ ({len(rows)} labelled closing messages read),
whose test fails when the corpus or the reader's words change and this file was not written again. Measured on the
held-out *sources* (repositories no rule was tuned on), as a user's own agent is new to the reader; the false-success
interval (soak.record.summary.misread_interval) carries it for every claim read from free text."""

HELD_OUT_SOURCES = (
{sources}
)
"""The repositories the reader was measured on and never tuned on."""
DONE_READ_AS_CLAIMED = ({hit}, {done})
"""(read as a claimed success, labelled done) of the closing messages: a claimed success is done, or the tests claimed
to pass; the first over the second is the reader's sensitivity."""
OTHER_READ_AS_CLAIMED = ({false}, {other})
"""(read as a claimed success, labelled partial, blocked or none): the reader's false-positive rate, one minus its
specificity."""
CLASS_COUNTS: dict[str, dict[str, tuple[int, int, int]]] = {{
{classes}
}}
"""Per split (every fourth line `held_out`, `all`, and by source), per class (`success`, admitted `failure`, `tests`
claim): (read and labelled, read, labelled), the README's precision and recall."""
'''


def main() -> None:
    rows = readings()
    text = report(rows)
    if "--write" not in sys.argv:
        print(text)
        return
    readme = README.read_text()
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    README.write_text(readme[:start] + text + readme[end:])
    MODULE.write_text(module(rows))


if __name__ == "__main__":
    main()
