import math
import random

import pytest

from solution import Rope


def depth_ok(rope):
    return rope.depth <= 2 * math.log2(len(rope) + 1) + 2


def test_empty_and_basic():
    empty = Rope()
    assert len(empty) == 0 and str(empty) == "" and list(empty) == [] and empty.depth == 0
    rope = Rope("hello world")
    assert len(rope) == 11 and str(rope) == "hello world"
    assert "".join(rope) == "hello world"
    assert rope == "hello world" and rope == Rope("hello world") and rope != "hello"
    assert Rope("a").depth == 0


def test_indexing():
    text = "abcdefghij" * 30
    rope = Rope(text)
    for i in list(range(-len(text), len(text))):
        assert rope[i] == text[i]
    for bad in (len(text), -len(text) - 1, 10**6):
        with pytest.raises(IndexError):
            rope[bad]
    with pytest.raises(IndexError):
        Rope()[0]


def test_slicing_matches_str():
    text = "".join(chr(97 + i % 26) for i in range(500))
    rope = Rope(text)
    rng = random.Random(3)
    bounds = [None, 0, 1, -1, 250, -250, 499, 500, 501, 10**6, -(10**6)]
    for a in bounds:
        for b in bounds:
            piece = rope[a:b]
            assert isinstance(piece, Rope)
            assert str(piece) == text[a:b]
    for _ in range(200):
        a, b = rng.randint(-600, 600), rng.randint(-600, 600)
        assert str(rope[a:b]) == text[a:b]
    assert str(rope[::1]) == text
    with pytest.raises(ValueError):
        rope[::2]
    with pytest.raises(ValueError):
        rope[5:1:-1]


def test_concatenation():
    a, b = Rope("foo"), Rope("bar")
    assert str(a + b) == "foobar"
    assert str(a + "baz") == "foobaz"
    assert str("baz" + a) == "bazfoo"
    assert str(Rope() + "") == "" and str("" + Rope("x")) == "x"


def test_insert_delete_split():
    rope = Rope("hello world")
    assert str(rope.insert(5, ",")) == "hello, world"
    assert str(rope.insert(0, ">> ")) == ">> hello world"
    assert str(rope.insert(11, "!")) == "hello world!"
    assert str(rope.insert(6, Rope("big "))) == "hello big world"
    assert str(rope.delete(5, 11)) == "hello"
    assert str(rope.delete(0, 0)) == "hello world"
    assert str(rope.delete(0, 11)) == ""
    left, right = rope.split(5)
    assert (str(left), str(right)) == ("hello", " world")
    assert [str(x) for x in rope.split(0)] == ["", "hello world"]
    assert [str(x) for x in rope.split(11)] == ["hello world", ""]


def test_position_errors():
    rope = Rope("abc")
    for call in (
        lambda: rope.insert(4, "x"),
        lambda: rope.insert(-1, "x"),
        lambda: rope.delete(2, 1),
        lambda: rope.delete(-1, 2),
        lambda: rope.delete(0, 4),
        lambda: rope.split(4),
        lambda: rope.split(-1),
    ):
        with pytest.raises(IndexError):
            call()
    assert str(rope) == "abc"


def test_immutability():
    base = Rope("immutable")
    other = Rope(" text")
    results = [base + other, base.insert(2, "XX"), base.delete(0, 3), base.split(4)[0], base[1:4], "<" + base]
    assert str(base) == "immutable" and str(other) == " text"
    assert [str(r) for r in results] == ["immutable text", "imXXmutable", "utable", "immu", "mmu", "<immutable"]


def test_find():
    text = "the cat sat on the mat" * 5
    rope = Rope(text)
    for sub in ["the", "mat", "cat sat", "", "dog", "matthe"]:
        for start in (0, 1, 20, 100, -5):
            assert rope.find(sub, start) == text.find(sub, start)


def test_random_edits_against_str():
    rng = random.Random(2024)
    rope, text = Rope(), ""
    for _ in range(1500):
        r = rng.random()
        if r < 0.35:
            i = rng.randint(0, len(text))
            piece = "".join(rng.choice("abcxyz") for _ in range(rng.randint(0, 90)))
            rope, text = rope.insert(i, piece), text[:i] + piece + text[i:]
        elif r < 0.55 and text:
            a = rng.randint(0, len(text))
            b = rng.randint(a, min(len(text), a + 120))
            rope, text = rope.delete(a, b), text[:a] + text[b:]
        elif r < 0.7:
            i = rng.randint(0, len(text))
            left, right = rope.split(i)
            assert str(left) == text[:i] and str(right) == text[i:]
            rope = right + left
            text = text[i:] + text[:i]
        elif r < 0.85 and text:
            i = rng.randrange(len(text))
            assert rope[i] == text[i]
        else:
            rope, text = rope + "tail", text + "tail"
        assert len(rope) == len(text)
        assert depth_ok(rope), (rope.depth, len(rope))
    assert str(rope) == text


@pytest.mark.parametrize("mode", ["append", "prepend", "middle"])
def test_many_small_edits_stay_balanced(mode):
    rope = Rope()
    expected = []
    for i in range(20_000):
        ch = chr(97 + i % 26)
        if mode == "append":
            rope = rope + ch
        elif mode == "prepend":
            rope = ch + rope
        else:
            rope = rope.insert(len(rope) // 2, ch)
        if i % 1000 == 0:
            assert depth_ok(rope), (mode, i, rope.depth)
    assert depth_ok(rope) and len(rope) == 20_000
    if mode == "append":
        expected = "".join(chr(97 + i % 26) for i in range(20_000))
        assert rope == expected
    elif mode == "prepend":
        expected = "".join(chr(97 + i % 26) for i in reversed(range(20_000)))
        assert rope == expected
    assert rope.depth >= 4, "leaves of tens of characters still make a multi-level tree"


def test_large_document():
    text = "0123456789" * 100_000
    rope = Rope(text)
    assert depth_ok(rope)
    rng = random.Random(1)
    edits = []
    for _ in range(2000):
        i = rng.randint(0, len(rope))
        rope = rope.insert(i, "#")
        edits.append(i)
    assert len(rope) == 1_000_000 + 2000 and depth_ok(rope)
    assert str(rope).count("#") == 2000
    for _ in range(2000):
        i = rng.randrange(len(rope))
        assert rope[i] in "0123456789#"
    rope = rope.delete(10, 999_000)
    assert len(rope) == 1_002_000 - 998_990 and depth_ok(rope)
