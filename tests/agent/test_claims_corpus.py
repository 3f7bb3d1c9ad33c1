"""The claim detector measured on real closing messages (tests/agent/corpus/: 197 messages of seven agents from public
trajectories, labelled before the detector read them, every fourth line held out of tuning): the figures the README
states, per class, on the held-out quarter and on the whole corpus. A trimmed message is left out: its claim may be in
the part the corpus could not keep."""

import json
from pathlib import Path

import pytest

from soak.agent.claims import claim_of

CORPUS = Path(__file__).parent / "corpus" / "closing_messages.jsonl"
README = Path(__file__).parents[2] / "README.md"
FIGURES = {
    "held_out": {"success": (0.96, 1.00), "failure": (1.00, 0.50), "tests": (0.91, 0.80)},
    "all": {"success": (0.98, 0.99), "failure": (1.00, 0.69), "tests": (0.94, 0.81)},
}
"""(precision, recall) per class, rounded as the README's table shows them."""


def kind(status: str) -> str:
    return {"done": "success", "partial": "failure", "blocked": "failure"}.get(status, "none")


def figures(split: str) -> dict[str, tuple[float, float]]:
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    counts = {name: [0, 0, 0] for name in ("success", "failure", "tests")}  # both, read, labelled
    for row in rows:
        if row.get("trimmed") or (split != "all" and row["split"] != split):
            continue
        claim = claim_of(row["message"])
        read, labelled = kind(claim.status), kind(row["status"])
        for name, got, want in (("success", read == "success", labelled == "success"),
                                ("failure", read == "failure", labelled == "failure"),
                                ("tests", claim.tests_claim, row["tests_claim"])):
            counts[name][0] += got and want
            counts[name][1] += got
            counts[name][2] += want
    return {name: (round(both / read, 2), round(both / labelled, 2)) for name, (both, read, labelled) in counts.items()}


@pytest.mark.parametrize("split", FIGURES)
def test_the_detector_reads_the_corpus_as_the_readme_says(split):
    assert figures(split) == FIGURES[split]


def test_the_readme_states_the_figures_the_corpus_gives():
    text = README.read_text()
    for name, label in (("success", "success (`done`)"), ("failure", "admitted failure or abort"),
                        ("tests", "tests claim")):
        row = next(line for line in text.splitlines() if line.startswith(f"| {label}"))
        for split in FIGURES:
            precision, recall = FIGURES[split][name]
            assert f"{precision:.2f} / {recall:.2f}" in row, (row, split)
