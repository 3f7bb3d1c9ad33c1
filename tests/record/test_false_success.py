"""The false-success rate carries the claim reader's error: its interval is the Wilson interval where every claim came
from a finish signal, and widens with the reader's measured error where claims were read from free text."""

import numpy as np
import pandas as pd
import pytest

from soak.record.reader_figures import DONE_READ_AS_CLAIMED, OTHER_READ_AS_CLAIMED
from soak.record.summary import misread_interval, trust, wilson
from soak.report.aggregate import trust_lines

FLAWLESS = ((100_000, 100_000), (0, 100_000))
"""A reader measured on so many messages without a miss that its error is nil."""


def width(interval: tuple[float, float]) -> float:
    return interval[1] - interval[0]


def test_with_every_claim_from_a_finish_signal_the_interval_is_the_sampling_interval():
    estimate, interval = misread_interval((7, 40), (0, 0))
    assert estimate == pytest.approx(7 / 40) and interval == wilson(7, 40)


def test_a_few_claims_read_among_many_signals_leave_the_interval_near_the_sampling_one():
    _, interval = misread_interval((20, 300), (1, 3))
    assert width(interval) == pytest.approx(width(wilson(21, 303)), abs=0.015)


def test_a_flawless_reader_adds_nothing_to_sampling_error():
    estimate, interval = misread_interval((0, 0), (12, 40), *FLAWLESS)
    low, high = wilson(12, 40)
    assert estimate == pytest.approx(12 / 40, abs=0.01)
    assert interval[0] == pytest.approx(low, abs=0.02) and interval[1] == pytest.approx(high, abs=0.02)


def test_the_readers_measured_error_widens_the_interval():
    flawless = misread_interval((0, 0), (28, 40), *FLAWLESS)[1]
    measured = misread_interval((0, 0), (28, 40), DONE_READ_AS_CLAIMED, OTHER_READ_AS_CLAIMED)[1]
    assert width(measured) > width(flawless) + 0.05


def test_a_reader_measured_on_fewer_messages_widens_it_more():
    few = misread_interval((0, 0), (12, 40), (9, 10), (3, 30))[1]
    many = misread_interval((0, 0), (12, 40), (900, 1000), (300, 3000))[1]
    assert width(few) > width(many) > width(wilson(12, 40))


def test_claims_the_reader_reads_into_messages_without_one_are_taken_out_of_the_estimate():
    # The reader finds every claim and reads one into a tenth of the messages without: a tenth read is none at all.
    estimate, interval = misread_interval((0, 0), (20, 200), (1000, 1000), (100, 1000))
    assert estimate < 0.03 and interval[0] < 0.005 and interval[1] < 0.08
    # Half read means (0.5 - 0.1) / (1 - 0.1) of them claimed.
    estimate, interval = misread_interval((0, 0), (100, 200), (1000, 1000), (100, 1000))
    assert estimate == pytest.approx(0.4 / 0.9, abs=0.01) and interval[0] < 0.4 / 0.9 < interval[1]


def test_a_reader_no_better_than_chance_leaves_the_free_text_share_unknown():
    _, interval = misread_interval((0, 0), (10, 40), (5, 10), (5, 10))
    assert interval[0] < 0.1 and interval[1] > 0.9


REASONS = {"tool": "", "signal": "task_complete: true", "output": "'done'", "model": "'implemented'", "": ""}
"""A claim's reason as each source leaves it: the finish tool none, a signal its field, words the words quoted."""


def attempts(sources: dict[str, tuple[int, int]], signal_reason: str = REASONS["signal"]) -> pd.DataFrame:
    """Failed attempts: per claim source, (false successes, attempts)."""
    rows = [{"outcome": "fail", "canary": "", "claim": "done" if i < false else "partial", "claim_source": source,
             "claim_reason": signal_reason if source == "signal" else REASONS[source], "false_success": i < false,
             "unverified_claim": False, "noop_rounds": 0, "repeated_calls": 0}
            for source, (false, n) in sources.items() for i in range(n)]
    return pd.DataFrame(rows)


def test_the_summary_counts_the_claims_by_source_and_carries_the_readers_error():
    figure = trust(attempts({"signal": (3, 20), "tool": (1, 5), "output": (5, 6), "model": (3, 4), "": (0, 2)}))[
        "false_success"]
    assert (figure["count"], figure["of"]) == (12, 37)
    assert figure["sources"] == {"signal": 25, "output": 6, "model": 4, "none": 2}
    assert figure["read"] == {"count": 8, "of": 10}
    assert figure["sampling_interval"] == list(wilson(12, 37))
    assert width(figure["interval"]) > width(figure["sampling_interval"])


def test_the_headline_names_the_sources_and_the_readers_error():
    line = trust_lines(trust(attempts({"signal": (3, 20), "output": (2, 6), "model": (1, 1)})))[0]
    assert line.startswith("false successes: 6 of 27 failed attempts claimed success")
    assert "claims from 20 finish signals, 6 agent outputs, 1 model's last words" in line
    assert "corrected for the claim reader's error on the 7 read from free text" in line


def test_a_night_of_finish_signals_alone_says_its_interval_is_sampling_error():
    line = trust_lines(trust(attempts({"signal": (4, 30)})))[0]
    low, high = wilson(4, 30)
    assert f"rate 13% [{low:.0%}-{high:.0%}] sampling error only (no claim read from free text)" in line
    assert line.endswith("claims from 30 finish signals")


def test_a_finish_signal_read_from_its_words_carries_the_readers_error():
    fields = trust(attempts({"signal": (4, 30)}))["false_success"]
    words = trust(attempts({"signal": (4, 30)}, signal_reason="'all tests pass'"))["false_success"]
    assert fields["read"] == {"count": 0, "of": 0} and words["read"] == {"count": 4, "of": 30}
    assert words["sources"] == fields["sources"] == {"signal": 30, "output": 0, "model": 0, "none": 0}
    assert words["interval"] != fields["interval"]
    line = trust_lines(trust(attempts({"signal": (4, 30)}, signal_reason="'all tests pass'")))[0]
    assert line.endswith("claims from 30 finish signals (30 read from their words)")
    assert "corrected for the claim reader's error on the 30 read from free text" in line


def test_the_interval_holds_the_true_rate_where_the_sampling_interval_does_not():
    """Nights whose claims a reader with a known error read, that reader measured on a corpus as small as soak's: the
    interval holds the true false-success rate at least as often as it says; Wilson's, blind to the reader,
    seldom."""
    rng = np.random.default_rng(7)
    rate, sensitivity, false_positive, attempts_read, nights = 0.3, 0.95, 0.3, 60, 120
    held = sampled = 0
    for _ in range(nights):
        done_read = (int(rng.binomial(DONE_READ_AS_CLAIMED[1], sensitivity)), DONE_READ_AS_CLAIMED[1])
        other_read = (int(rng.binomial(OTHER_READ_AS_CLAIMED[1], false_positive)), OTHER_READ_AS_CLAIMED[1])
        claimed = int(rng.binomial(attempts_read, rate))
        read = int(rng.binomial(claimed, sensitivity) + rng.binomial(attempts_read - claimed, false_positive))
        low, high = misread_interval((0, 0), (read, attempts_read), done_read, other_read)[1]
        held += low <= rate <= high
        low, high = wilson(read, attempts_read)
        sampled += low <= rate <= high
    assert held / nights >= 0.95 and sampled / nights < 0.5
