import pathlib
import random
import re

import pytest

import solution
from solution import fullmatch, search


def test_does_not_use_a_regex_library():
    source = pathlib.Path(solution.__file__).read_text()
    banned = re.compile(r"^\s*(import|from)\s+(re|sre_\w+|regex|fnmatch)\b|__import__|importlib", re.MULTILINE)
    assert not banned.search(source), "solution.py must not use a regex library"


@pytest.mark.parametrize(
    "pattern, text, span",
    [
        ("a*b", "xaab", (1, 4)),
        ("a*", "baa", (0, 0)),
        ("a.c$", "abcabc", (3, 6)),
        ("^b", "ab", None),
        ("", "abc", (0, 0)),
        ("", "", (0, 0)),
        ("$", "abc", (3, 3)),
        ("^", "abc", (0, 0)),
        ("^$", "", (0, 0)),
        ("^$", "a", None),
        ("a+", "baaac", (1, 4)),
        ("ba?c", "xbcbac", (1, 3)),
        ("a*ab", "aaab", (0, 4)),
        (".*c", "abcabc", (0, 6)),
        ("c.*$", "abcabc", (2, 6)),
        ("x+y?x", "axxxyx", (1, 6)),
        ("x+x", "axxxyx", (1, 4)),
        (r"a\.b", "axb a.b", (4, 7)),
        (r"\*+", "a**b", (1, 3)),
        (r"\\", "a\\b", (1, 2)),
        (r"\a\b", "xab", (1, 3)),
    ],
)
def test_search_examples(pattern, text, span):
    assert search(pattern, text) == span


def test_caret_and_dollar_literal_in_the_middle():
    assert search("a^b", "xa^b") == (1, 4)
    assert search("a$b", "a$b") == (0, 3)
    assert search("$a", "x$a") == (1, 3)
    assert search("^^", "^^") == (0, 1)
    assert search("$$", "a$") == (1, 2)
    assert search("$$", "$a") is None
    assert search("a^*b", "ab") == (0, 2)
    assert search(r"\$", "a$b") == (1, 2)
    assert search(r"\\$", "a\\") == (1, 2)
    assert search(r"\\$", "a\\b") is None


def test_dot_and_newlines():
    assert search("a.b", "a\nb") is None
    assert search(".+", "\nxy\n") == (1, 3)
    assert search("a$", "a\n") is None
    assert search("\n", "x\n") == (1, 2)


@pytest.mark.parametrize("pattern", ["*", "+a", "?", "a**", "a+?", "a?*", "^*", "^+a", "a\\", "ab*\\"])
def test_invalid_patterns(pattern):
    with pytest.raises(ValueError):
        search(pattern, "abc")
    with pytest.raises(ValueError):
        fullmatch(pattern, "abc")


def test_fullmatch_examples():
    assert fullmatch("a*a", "aaa")
    assert fullmatch("a*", "")
    assert not fullmatch("a", "aa")
    assert fullmatch("^a.?$", "ab")
    assert fullmatch("a?a?aa", "aa")
    assert not fullmatch("b+", "")
    assert fullmatch(r".*\.py", "solution.py")


def random_pattern(rng):
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice(["a", "b", "a", "b", ".", r"\.", r"\*", r"\+", r"\?", r"\\", r"\^", r"\$"]))
        parts.append(rng.choice(["", "", "*", "+", "?"]))
    pattern = "".join(parts)
    if rng.random() < 0.25:
        pattern = "^" + pattern
    if rng.random() < 0.25:
        pattern += "$"
    return pattern


def random_text(rng):
    return "".join(rng.choice("aaabbb.*+?^$\\") for _ in range(rng.randint(0, 10)))


@pytest.mark.parametrize("seed", range(4))
def test_against_python_re(seed):
    rng = random.Random(seed)
    for _ in range(700):
        pattern, text = random_pattern(rng), random_text(rng)
        found = re.search(pattern, text)
        assert search(pattern, text) == (found.span() if found else None), (pattern, text)
        assert fullmatch(pattern, text) == (re.fullmatch(pattern, text) is not None), (pattern, text)


def test_longer_texts_against_python_re():
    rng = random.Random(77)
    for _ in range(100):
        pattern = random_pattern(rng)
        text = "".join(rng.choice("ab.") for _ in range(rng.randint(50, 300)))
        found = re.search(pattern, text)
        assert search(pattern, text) == (found.span() if found else None), (pattern, text)


def test_no_exponential_blowup():
    text = "a" * 40
    assert search("a*a*a*a*a*a*a*a*c", text) is None
    assert not fullmatch("a*a*a*a*a*a*a*a*c", text)
    assert search("a?" * 20 + "a" * 20, "a" * 20) == (0, 20)
    assert search(".*.*.*=.*", "x" * 300) is None
