import random

import pytest

from solution import isbn10_to_13, isbn_valid


def weighted10(chars: str) -> int:
    return sum((10 - i) * (10 if c in "Xx" else int(c)) for i, c in enumerate(chars))


def test_valid_isbn10():
    assert isbn_valid("0-306-40615-2")
    assert isbn_valid("0306406152")
    assert isbn_valid("0-8044-2957-X")
    assert isbn_valid("0-8044-2957-x")
    assert isbn_valid("3 598 21508 8")


def test_invalid_isbn10():
    assert not isbn_valid("0-306-40615-3")
    assert not isbn_valid("3-598-21507-A")
    assert not isbn_valid("0-306-40615")
    assert not isbn_valid("0-306-40615-22")


def test_x_only_in_last_position():
    # These would sum to a multiple of 11 if X counted as 10 in the middle.
    assert weighted10("00X0000008") % 11 == 0
    assert not isbn_valid("00X0000008")
    assert weighted10("X000000050") % 11 == 0
    assert not isbn_valid("X000000050")


def test_valid_and_invalid_isbn13():
    assert isbn_valid("978-0-306-40615-7")
    assert isbn_valid("9780306406157")
    assert isbn_valid("979-10-90636-07-1")
    assert not isbn_valid("978-0-306-40615-8")
    assert not isbn_valid("978030640615X")


def test_never_raises_on_junk():
    for junk in ["", "-", "    ", "abc", "97803064061577", "٠٣٠٦٤٠٦١٥٢", "0306406152\n", "0.306406152"]:
        assert isbn_valid(junk) is False


def test_convert():
    assert isbn10_to_13("0-306-40615-2") == "9780306406157"
    assert isbn10_to_13("0-8044-2957-X") == "9780804429573"
    assert isbn10_to_13(" 3598215088 ") == "9783598215087"


def test_convert_rejects_invalid():
    for bad in ["0-306-40615-3", "978-0-306-40615-7", "", "00X0000008"]:
        with pytest.raises(ValueError):
            isbn10_to_13(bad)


def test_round_trip_random():
    rng = random.Random(5)
    for _ in range(300):
        body = "".join(rng.choice("0123456789") for _ in range(9))
        check = (-weighted10(body + "0")) % 11
        isbn10 = body + ("X" if check == 10 else str(check))
        assert isbn_valid(isbn10)
        isbn13 = isbn10_to_13(isbn10)
        assert len(isbn13) == 13 and isbn13.startswith("978" + body)
        assert isbn_valid(isbn13)
        wrong_last = str((int(isbn13[-1]) + 1) % 10)
        assert not isbn_valid(isbn13[:-1] + wrong_last)
