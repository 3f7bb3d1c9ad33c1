import random
import re
from collections import Counter

import pytest

from solution import top_words


def test_basic_counts():
    assert top_words("the cat and the hat", 2) == [("the", 2), ("and", 1)]


def test_case_insensitive_and_lowercased():
    assert top_words("Go go GO stop", 1) == [("go", 3)]


def test_ties_alphabetical():
    assert top_words("b a c b a c", 3) == [("a", 2), ("b", 2), ("c", 2)]


def test_apostrophes():
    assert top_words("don't 'quote' don't ''' it's", 5) == [("don't", 2), ("it's", 1), ("quote", 1)]


def test_fewer_words_than_k_and_zero():
    assert top_words("one", 5) == [("one", 1)]
    assert top_words("one two", 0) == []
    assert top_words("", 3) == []


def test_negative_k():
    with pytest.raises(ValueError):
        top_words("a", -1)


def test_against_oracle():
    rng = random.Random(7)
    vocab = ["alpha", "Beta", "gamma", "it's", "'x'", "delta"]
    for _ in range(50):
        text = " ,.".join(rng.choice(vocab) for _ in range(rng.randint(0, 30)))
        words = [w.strip("'").lower() for w in re.findall(r"[A-Za-z']+", text)]
        expected = sorted(Counter(w for w in words if w).items(), key=lambda i: (-i[1], i[0]))[:3]
        assert top_words(text, 3) == expected
