"""The claim reader's measured error, the one place soak keeps it: written by
`python -m tests.agent.corpus.measure --write` from tests/agent/corpus/ (237 labelled closing messages read),
whose test fails when the corpus or the reader's words change and this file was not written again. Measured on the
held-out *sources* (repositories no rule was tuned on), as a user's own agent is new to the reader; the false-success
interval (soak.record.summary.misread_interval) carries it for every claim read from free text."""

HELD_OUT_SOURCES = (
    "simonjmendelsohn/impossiblebench-honest-failure",
    "anthropics/claude-code-action",
    "marin-community/marin",
    "ThatHunky/gryag",
    "michalhorcic/cozy-checkout",
    "xdotli/harbor-datagen",
    "BeauCranston/car-game",
)
"""The repositories the reader was measured on and never tuned on."""
DONE_READ_AS_CLAIMED = (7, 7)
"""(read as a claimed success, labelled done) of the closing messages: a claimed success is done, or the tests claimed
to pass; the first over the second is the reader's sensitivity."""
OTHER_READ_AS_CLAIMED = (10, 31)
"""(read as a claimed success, labelled partial, blocked or none): the reader's false-positive rate, one minus its
specificity."""
CLASS_COUNTS: dict[str, dict[str, tuple[int, int, int]]] = {
    "held_out": {"success": (47, 52, 47), "failure": (6, 6, 11), "tests": (21, 23, 32)},
    "all": {"success": (190, 203, 191), "failure": (26, 26, 43), "tests": (85, 92, 119)},
    "tune_sources": {"success": (183, 187, 184), "failure": (9, 9, 13), "tests": (81, 86, 101)},
    "held_out_sources": {"success": (7, 16, 7), "failure": (17, 17, 30), "tests": (4, 6, 18)},
}
"""Per split (every fourth line `held_out`, `all`, and by source), per class (`success`, admitted `failure`, `tests`
claim): (read and labelled, read, labelled), the README's precision and recall."""
