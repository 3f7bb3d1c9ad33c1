"""The claim detector measured on real closing messages (tests/agent/corpus/: labelled before the detector read them,
every fourth line held out of tuning, and the repositories no rule was tuned on held out as sources): the figures
soak.record.reader_figures keeps for the false-success interval, the corpus README's tables and the docs', each
as the corpus gives them now. A change of the words or of the corpus fails here until `python -m
tests.agent.corpus.measure --write` has written them again."""

import pytest

from soak.record import reader_figures
from tests.agent.corpus import measure

CLAIMS_PAGE = measure.HERE.parents[2] / "docs" / "trust" / "claims.md"


@pytest.fixture(scope="module")
def rows():
    return measure.readings()


def test_the_reader_figures_soak_keeps_are_the_corpus_figures(rows):
    split = measure.splits(rows)
    assert reader_figures.HELD_OUT_SOURCES == measure.HELD_OUT_SOURCES
    assert {name: measure.counts(split[name]) for name in reader_figures.CLASS_COUNTS} == reader_figures.CLASS_COUNTS
    hit, done, false, other = measure.claimed_success(split["held_out_sources"])
    assert ((hit, done), (false, other)) == (reader_figures.DONE_READ_AS_CLAIMED, reader_figures.OTHER_READ_AS_CLAIMED)


def test_every_held_out_source_is_in_the_corpus_and_the_sources_split_it(rows):
    repositories = {row["repository"] for row in rows}
    assert set(measure.HELD_OUT_SOURCES) <= repositories
    split = measure.splits(rows)
    assert len(split["tune_sources"]) + len(split["held_out_sources"]) == len(rows)
    assert split["held_out_sources"] and split["tune_sources"]


def test_the_corpus_readme_shows_the_tables_the_corpus_gives(rows):
    assert measure.report(rows) in measure.README.read_text()


def test_the_docs_state_the_figures_the_corpus_gives():
    text = CLAIMS_PAGE.read_text()
    for name, label in (("success", "success (`done`)"), ("failure", "admitted failure or abort"),
                        ("tests", "tests claim")):
        row = next(line for line in text.splitlines() if line.startswith(f"| {label}"))
        for split in ("held_out", "held_out_sources", "all"):
            assert measure.pr(*reader_figures.CLASS_COUNTS[split][name]) in row, (row, split)


@pytest.mark.parametrize(("source", "repository"), [
    ("github:owner/name@0123abc:path/to/file (last message)", "owner/name"),
    ("github:owner/some.repo/transcripts/x.md (final message)", "owner/some.repo"),
    ("https://github.com/owner/name/issues/74 (pasted)", "owner/name"),
])
def test_a_rows_repository_is_read_from_each_form_of_source(source, repository):
    assert measure.repository(source) == repository
