import random

import pytest

from solution import format_record, parse_record


def test_plain_fields_keep_whitespace():
    assert parse_record("a,b,c") == ["a", "b", "c"]
    assert parse_record(" a , b ") == [" a ", " b "]


def test_empty_and_trailing_fields():
    assert parse_record("") == [""]
    assert parse_record(",") == ["", ""]
    assert parse_record("a,") == ["a", ""]
    assert parse_record(",,a,,") == ["", "", "a", "", ""]
    assert parse_record('""') == [""]
    assert parse_record('"",""') == ["", ""]
    assert parse_record('a,""') == ["a", ""]


def test_quoted_fields():
    assert parse_record('"a,b",c') == ["a,b", "c"]
    assert parse_record('"say ""hi""",x') == ['say "hi"', "x"]
    assert parse_record('""""') == ['"']
    assert parse_record('"line1\nline2",z') == ["line1\nline2", "z"]
    assert parse_record('x,"a;b"', ",") == ["x", "a;b"]


def test_other_delimiter():
    assert parse_record("a;b,c;", ";") == ["a", "b,c", ""]
    assert parse_record('"a\tb"\tc', "\t") == ["a\tb", "c"]


@pytest.mark.parametrize("bad", ['"abc', 'a,"bc', '"ab"c,d', 'ab"c', '"a""', 'a,b"', '"x" ,y'])
def test_malformed(bad):
    with pytest.raises(ValueError):
        parse_record(bad)


@pytest.mark.parametrize("delimiter", ["", ",,", '"', "\n", "\r"])
def test_bad_delimiter(delimiter):
    with pytest.raises(ValueError):
        parse_record("a", delimiter)
    with pytest.raises(ValueError):
        format_record(["a"], delimiter)


def test_format_quotes_only_when_needed():
    assert format_record(["a", "b c", ""]) == "a,b c,"
    assert format_record(["a,b", 'q"t', "x\ny", "p\rq"]) == '"a,b","q""t","x\ny","p\rq"'
    assert format_record(["a,b"], ";") == "a,b"
    assert format_record(["a;b"], ";") == '"a;b"'
    assert format_record([""]) == ""


def test_format_empty_list():
    with pytest.raises(ValueError):
        format_record([])


def test_round_trip_property():
    rng = random.Random(1234)
    alphabet = ['a', 'b', ' ', ',', ';', '"', '\n', '\r', 'é']
    for _ in range(400):
        delimiter = rng.choice([",", ";", "\t"])
        fields = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(1, 5))]
        assert parse_record(format_record(fields, delimiter), delimiter) == fields
