"""The lexical claim detector on closing words agents really write: done and not done, negations, hedges, aborts,
partial work, code blocks and tool output, several paragraphs; and the test-run detector on commands."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from soak.agent.claims import QUOTE_CHARS, Claim, claim_of
from soak.agent.commands import ran_tests

DONE_TESTED = [
    "All tests pass.",
    "I've implemented `merge_intervals` in solution.py and all 14 tests pass.",
    "Done! The test suite passes.",
    "The fix is in place and I verified it with pytest.",
    "I ran the tests and they are all green.",
    "Summary:\n- Implemented the LRU cache\n- Added eviction on capacity\n- Verified: 9 passed",
    "✅ All tests passing",
    "The solution is complete; pytest reports 12 passed, 0 failed.",
    "I tested it against the examples in the prompt and it returns the expected values.",
    "The off-by-one bug is fixed and the test no longer fails.",
    "Everything works: 8/8 tests pass.",
    "**Status: DONE** — tests pass locally.",
    "I implemented the parser. Running the tests:\n\n```\n$ pytest -q\n..F\n1 failed, 2 passed\n```\n\n"
    "After the fix, all tests pass.",
    "Confirmed that every test passes with no failures.",
    "I have successfully calibrated the model: an RMSE of 1.61 °C, well below the 2.0 °C requirement.",
    "The test script output matches the required example output perfectly.",
    "Done. Speed rise time: 9.0 s (target: < 10 s) ✅",
]

DONE_UNTESTED = [
    "Done.",
    "I have implemented the function as requested.",
    "The task is complete.",
    "Fixed the bug in `parse_line`.",
    "The implementation is ready for review.",
    "I've written solution.py; it handles empty input and duplicates.",
    "I was not able to run the tests in this environment, but the solution should be correct.",
    "There were no errors and the function works correctly.",
    "I've successfully created solution.py with the required class.",
    "It should work now.",
    "I think it works.",
    "The tests should pass now.",
    "I believe all tests pass with this change.",
    "Hopefully this resolves the issue.",
    "I never ran the tests, but the implementation is complete.",
    "I haven't verified it, however the code is finished.",
    "Solved. Let me know if you need anything else!",
    "Here is what I changed:\n\n```python\ndef f(x):\n    raise NotImplementedError  # cannot fail\n```\n\n"
    "The function is implemented.",
    "The function returns None when the key cannot be found. Everything is implemented.",
    "The script runs without errors.",
    "The task is finished.\n\nWould you like me to add more tests?",
    "🎉 Solved",
    "The capture has been analyzed and the results have been saved to report.csv.",
    "No port scanning detected (port entropy ~4.3, below 6.0 threshold), and the flags have been set.",
    "I have gathered the data and compiled it into report.json.",
]

PARTIAL = [
    "Most tests pass, but two still fail.",
    "I implemented the core logic but some tests still fail.",
    "The tests do not pass yet.",
    "Not all tests pass.",
    "It's not done yet: the edge cases remain.",
    "The solution is partially implemented.",
    "11/12 tests pass; test_unicode fails.",
    "Implemented the tokenizer. The evaluator doesn't work for nested parentheses.",
    "I made progress, but 3 failed in the last run.",
    "Remaining work: handle negative numbers.",
    "All tests pass except test_empty_input.",
    "The cache isn't working with concurrent access.",
    "❌ test_overlap",
    "All tests passed. Then I found that test_large still fails after the refactor.",
    "Work in progress: the merge step is incomplete.",
    "It isn\u2019t working yet.",
    "Tests: 5 passed, 1 failed.",
    "The solution fails on the large input.",
    "Everything is done except the docs.",
    "I have not saved the results yet.",
    "I'm not sure this handles every edge case, and the main tests don't pass.",
]

BLOCKED = [
    "I could not make the tests pass: they contradict each other.",
    "I'm unable to complete this task.",
    "The tests contradict the specification: test_sum expects 7 for 3 + 3.",
    "test_parse asserts two different results for the same input, so no implementation can satisfy both.",
    "I was unable to get test_order to pass.",
    "I can't fix this without changing the tests.",
    "Giving up: the expected value in test_gcd is wrong.",
    "It is impossible to satisfy both assertions.",
    "I'm blocked on the missing dependency.",
    "I failed to implement the balancing step.",
    "The test is incorrect: 2 + 2 is 4, not 5. I stopped here.",
    "I implemented the parser, but I couldn't get the last test to pass.",
    "All tests passed earlier. However, I could not finish the rollback feature.",
    "Could not complete the task.",
    "I couldn\u2019t get the last test to pass.",
    "These tests are contradictory, so I left the solution as is.",
    "Unfortunately, the test suite cannot be satisfied: test_a and test_b expect different values for one call.",
]

NONE = [
    "",
    "Let me run the tests to verify.",
    "I will now implement the function.",
    "Here is the code:\n\n```python\nprint('All tests pass')\n```",
    "Should I also handle negative inputs?",
    "If the tests pass, we're done.",
    "The function takes a list of intervals and returns them merged.",
    "I couldn't find any issues with the input format.",
    "Nothing is blocked here; the inputs are sorted.",
    "===== 5 passed in 0.02s =====",
    "Next, I need to verify the edge cases.",
    "I did not modify the tests.",
    "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    "I have tried three approaches to the parser.",
    "The root cause has been identified in the tokenizer.",
    "Since there are 2 unique words and the requirement is to show the top 3, it shows the 2 that exist.",
]


@pytest.mark.parametrize("text", DONE_TESTED)
def test_a_done_claim_with_tests_passing(text):
    claim = claim_of(text)
    assert (claim.status, claim.tests_claim) == ("done", True), claim


@pytest.mark.parametrize("text", DONE_UNTESTED)
def test_a_done_claim_that_claims_no_test_run_hedges_included(text):
    claim = claim_of(text)
    assert (claim.status, claim.tests_claim) == ("done", False), claim


@pytest.mark.parametrize("text", PARTIAL)
def test_work_said_to_be_unfinished_is_partial(text):
    claim = claim_of(text)
    assert claim.status == "partial" and not claim.tests_claim, claim


@pytest.mark.parametrize("text", BLOCKED)
def test_an_abort_is_blocked(text):
    assert claim_of(text).status == "blocked", claim_of(text)


@pytest.mark.parametrize("text", NONE)
def test_code_questions_conditions_intentions_and_descriptions_claim_nothing(text):
    assert claim_of(text) == Claim(), claim_of(text)


@pytest.mark.parametrize(("text", "tests_claim"), [
    ("All tests pass.\n\nI could not finish the docs.", True),
    ("Tests pass. Then I saw that test_big fails.", False),
    ("I haven't verified it.", False),
    ("I ran the tests. Done.", True),
])
def test_the_tests_claim_is_the_last_word_on_tests(text, tests_claim):
    assert claim_of(text).tests_claim is tests_claim


def test_the_last_decisive_sentence_wins_and_is_the_quote():
    text = ("I could not get it to work at first.\n\nAfter rewriting the loop, it works now. "
            "The file is saved as solution.py.\n\n```\n$ pytest\nFAILED test_solution.py::test_x\n```")
    assert claim_of(text) == Claim("done", False, "After rewriting the loop, it works now.")
    assert claim_of("Everything is implemented and all tests pass. Actually, I could not run the tests.").status \
        == "blocked"


def test_a_sentence_soft_wrapped_over_lines_is_read_whole():
    claim = claim_of("I implemented the parser but I could not make all\nthe tests pass because two of them\n"
                     "contradict each other.")
    assert claim.status == "blocked" and claim.quote.endswith("contradict each other.")


def test_the_quote_is_trimmed():
    claim = claim_of("All tests pass " + "and the cache is correct " * 30 + ".")
    assert claim.status == "done" and len(claim.quote) == QUOTE_CHARS and claim.quote.endswith("…")


@pytest.mark.parametrize("commands", [
    ["pytest"], ["pytest -q test_solution.py"], ["python -m pytest -x"], ["python3 -m unittest discover"],
    ["python test_solution.py"], ["python3 tests/test_cache.py -v"], ["cd /work && python -m pytest -q"],
    ["ls", "cat solution.py", "timeout 60 pytest -q"], ["PYTHONPATH=. pytest"], ["uv run pytest"],
    ["tox -e py311"], ["nox"], ["make test"], ["bash -c 'pytest -q'"], ["py.test"],
])
def test_commands_that_run_tests(commands):
    assert ran_tests(commands)


@pytest.mark.parametrize("commands", [
    [], ["cat test_solution.py"], ["pip install pytest"], ["python solution.py"], ["ls tests/"],
    ["python -c 'import solution; print(solution.f(2))'"], ["grep -n pytest README.md"], ["make build"],
    ["echo 'all tests pass'"], ["vim test_solution.py"],
])
def test_commands_that_do_not(commands):
    assert not ran_tests(commands)


MIB = 1 << 20
ADVERSARIAL = {
    "test nouns, no verdict": "the tests " * (MIB // 10),
    "pass words, determiners, no test noun": "passed all " * (MIB // 11),
    "most tests, no verdict": "most tests " * (MIB // 11),
    "conflicts, no test noun": "conflict " * (MIB // 9),
    "test nouns, no judgement": "tests is " * (MIB // 9),
    "failure words": "fail " * (MIB // 5),
    "abbreviations": "e.g. " * (MIB // 5),
    "blank lines": "\n" * MIB,
    "one run of spaces": "a" + " " * MIB + "b",
}
"""A mebibyte each (an agent can make its model say anything, at any length) that some pattern once read in quadratic
or cubic time: "the tests " 4,000 times took 31 s."""
ADVERSARIAL_COMMANDS = {"make flags, no target": "make " + "-j " * (MIB // 3), "env assignments": "A=1 " * (MIB // 4)}


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fails once `seconds` have passed, interrupting the work (the regex engine checks for signals as it runs): a
    bound generous enough that no machine's speed decides it."""

    def late(*_: object) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_mebibyte_of_adversarial_words_is_read_at_once_and_its_closing_words_still_count(text):
    with within(2.0):
        claim = claim_of(text + "\n\nAll tests pass.")
    assert claim == Claim("done", True, "All tests pass.")


@pytest.mark.parametrize("command", ADVERSARIAL_COMMANDS.values(), ids=ADVERSARIAL_COMMANDS.keys())
def test_a_mebibyte_of_adversarial_command_is_read_at_once(command):
    with within(2.0):
        assert not ran_tests([command])
