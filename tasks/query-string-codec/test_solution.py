import random

import pytest

from solution import build_query, parse_query


def test_example_parse():
    assert parse_query("?q=caf%C3%A9+au+lait&tag=a&tag=b&flag") == {
        "q": ["café au lait"],
        "tag": ["a", "b"],
        "flag": [""],
    }


def test_example_build():
    assert build_query({"q": "1+1=2", "tag": ["x y", "€"]}) == "q=1%2B1%3D2&tag=x+y&tag=%E2%82%AC"


def test_splitting_rules():
    assert parse_query("") == {}
    assert parse_query("?") == {}
    assert parse_query("a=1&&b=2&") == {"a": ["1"], "b": ["2"]}
    assert parse_query("a=1=2") == {"a": ["1=2"]}
    assert parse_query("=x&a=") == {"": ["x"], "a": [""]}
    assert parse_query("??a=1") == {"?a": ["1"]}


def test_order_of_names_and_values():
    result = parse_query("b=1&a=2&b=3&c&a=4")
    assert list(result) == ["b", "a", "c"]
    assert result == {"b": ["1", "3"], "a": ["2", "4"], "c": [""]}


def test_plus_and_percent():
    assert parse_query("x=a+b") == {"x": ["a b"]}
    assert parse_query("x=a%2Bb") == {"x": ["a+b"]}
    assert parse_query("x=%2b%2B") == {"x": ["++"]}
    assert parse_query("x=100%25") == {"x": ["100%"]}
    assert parse_query("x%20y=%26%3D") == {"x y": ["&="]}


def test_utf8():
    assert parse_query("e=%E2%82%AC&r=é&m=%c3%a9é") == {"e": ["€"], "r": ["é"], "m": ["éé"]}


@pytest.mark.parametrize("bad", ["a=%", "a=%4", "a=%zz", "%G1=1", "a=%C3%28", "a=%E2%82", "a=%FF", "x=1&y=%e"])
def test_invalid_escapes(bad):
    with pytest.raises(ValueError):
        parse_query(bad)


def test_build_encoding():
    assert build_query({"safe": "AZaz09-._~"}) == "safe=AZaz09-._~"
    assert build_query({"k y": "a&b=c/d?e#f%"}) == "k+y=a%26b%3Dc%2Fd%3Fe%23f%25"
    assert build_query({"a": [], "b": ("1", "2")}) == "b=1&b=2"
    assert build_query({}) == ""
    assert build_query({"é": "\n"}) == "%C3%A9=%0A"


def test_build_type_errors():
    for bad in [{"a": 1}, {"a": None}, {"a": ["x", 2]}, {1: "x"}, {"a": {"x"}}]:
        with pytest.raises(TypeError):
            build_query(bad)


def test_round_trip():
    rng = random.Random(77)
    alphabet = "ab +%&=?#/~é€😀\n"
    for _ in range(300):
        params = {}
        for _ in range(rng.randint(0, 4)):
            name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            params[name] = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(1, 3))]
        text = build_query(params)
        assert all(ord(c) < 128 for c in text)
        assert parse_query(text) == params
