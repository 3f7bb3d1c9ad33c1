import pytest

from solution import slugify


def test_basic():
    assert slugify("Hello World") == "hello-world"
    assert slugify("  Hello,   World!! ") == "hello-world"
    assert slugify("Release 2.0 -- notes") == "release-2-0-notes"


def test_accents_and_non_ascii():
    assert slugify("Crème Brûlée") == "creme-brulee"
    assert slugify("ﬁnal ｆｕｌｌ") == "final-full"
    assert slugify("Straße 日本 Café") == "strae-cafe"
    assert slugify("日本語") == ""


def test_apostrophes():
    assert slugify("Don't Panic") == "dont-panic"
    assert slugify("It’s fine") == "its-fine"
    assert slugify("'quoted'") == "quoted"


def test_empty_results():
    assert slugify("") == ""
    assert slugify("!!! ---") == ""
    assert slugify("---", max_length=3) == ""


def test_separator():
    assert slugify("Hello World", separator="_") == "hello_world"
    assert slugify("a_b c", separator="_") == "a_b_c"
    assert slugify("a.b", separator=".") == "a.b"


def test_truncate_at_word_boundary():
    assert slugify("The quick brown fox", max_length=15) == "the-quick-brown"
    assert slugify("The quick brown fox", max_length=14) == "the-quick"
    assert slugify("The quick brown fox", max_length=16) == "the-quick-brown"
    assert slugify("The quick brown fox", max_length=19) == "the-quick-brown-fox"
    assert slugify("The quick brown fox", max_length=100) == "the-quick-brown-fox"
    assert slugify("The quick brown fox", max_length=3) == "the"
    assert slugify("hello wonderful world", max_length=12) == "hello"


def test_first_word_too_long():
    assert slugify("Supercalifragilistic", max_length=5) == "super"
    assert slugify("Supercalifragilistic word", max_length=1) == "s"


def test_truncation_invariants():
    text = "A tale of two cities, by Charles Dickens (1859)"
    full = slugify(text)
    words = full.split("-")
    for limit in range(1, len(full) + 2):
        slug = slugify(text, max_length=limit)
        assert len(slug) <= limit
        assert not slug.endswith("-") and not slug.startswith("-")
        assert full.startswith(slug)
        if len(words[0]) <= limit:
            assert slug.split("-") == words[: len(slug.split("-"))]
            assert len(slug.split("-")) == len(words) or len(slug) + 1 + len(words[len(slug.split("-"))]) > limit


def test_errors():
    with pytest.raises(ValueError):
        slugify("x", max_length=0)
    for bad in ["", "--", "a", "7", "é"]:
        with pytest.raises(ValueError):
            slugify("x y", separator=bad)
