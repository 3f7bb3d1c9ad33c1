import random

import pytest

from solution import from_words, to_words

CASES = {
    0: "zero",
    7: "seven",
    13: "thirteen",
    20: "twenty",
    42: "forty-two",
    99: "ninety-nine",
    100: "one hundred",
    105: "one hundred five",
    119: "one hundred nineteen",
    300: "three hundred",
    1000: "one thousand",
    1010: "one thousand ten",
    12345: "twelve thousand three hundred forty-five",
    1_000_005: "one million five",
    1_010_000: "one million ten thousand",
    2_000_000_000: "two billion",
    -7: "minus seven",
    -1_000_001: "minus one million one",
    10**15 - 1: "nine hundred ninety-nine trillion nine hundred ninety-nine billion nine hundred ninety-nine million "
    "nine hundred ninety-nine thousand nine hundred ninety-nine",
    7_000_000_000_060: "seven trillion sixty",
}


@pytest.mark.parametrize("n, words", list(CASES.items()))
def test_to_words(n, words):
    assert to_words(n) == words


@pytest.mark.parametrize("n, words", list(CASES.items()))
def test_from_words(n, words):
    assert from_words(words) == n


def test_to_words_errors():
    for n in (10**15, -(10**15), 10**20):
        with pytest.raises(ValueError):
            to_words(n)
    for bad in (True, 1.0, "5", None):
        with pytest.raises(TypeError):
            to_words(bad)


def test_from_words_case_and_whitespace():
    assert from_words("  Forty-Two ") == 42
    assert from_words("MINUS\tone   hundred\nfive") == -105
    assert from_words("One Million Ten Thousand") == 1_010_000


@pytest.mark.parametrize(
    "text",
    ["one hundred and five", "twenty one", "forty - two", "twenty-ten", "ten hundred", "one thousand thousand",
     "thousand", "one million zero thousand", "minus zero", "zero zero", "five three", "one thousand one million",
     "", "   ", "minus", "forty-", "-two", "twenty-two-two", "one hundred hundred", "zero thousand", "eleventy",
     "one,000", "one thousand, five", "one quadrillion", "hundred", "ninety-one hundred", "twelve hundred",
     "one hundred zero", "two thousand zero", "minus minus one", "one trillion thousand"],
)
def test_from_words_rejects_non_canonical(text):
    with pytest.raises(ValueError):
        from_words(text)


def test_round_trip_random():
    rng = random.Random(10)
    for _ in range(3000):
        digits = rng.randint(1, 15)
        n = rng.randint(0, 10**digits - 1) * rng.choice([1, -1])
        words = to_words(n)
        assert from_words(words) == n
        assert "  " not in words and words == words.strip()
    for n in range(-1000, 3001):
        assert from_words(to_words(n)) == n
