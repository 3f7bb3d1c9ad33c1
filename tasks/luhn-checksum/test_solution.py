import random

import pytest

from solution import luhn_check_digit, luhn_valid


def oracle_valid(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d // 10 + d % 10
    return total % 10 == 0


def test_known_valid_numbers():
    assert luhn_valid("4539 3195 0343 6467")
    assert luhn_valid("79927398713")
    assert luhn_valid("059")
    assert luhn_valid("00")


def test_known_invalid_numbers():
    assert not luhn_valid("8273 1232 7352 0569")
    assert not luhn_valid("79927398710")
    assert not luhn_valid("059a")


def test_too_short():
    assert not luhn_valid("0")
    assert not luhn_valid(" 0 ")
    assert not luhn_valid("")
    assert not luhn_valid("   ")


def test_foreign_characters_are_invalid_not_errors():
    assert not luhn_valid("4539-3195-0343-6467")
    assert not luhn_valid("055 444 28a")
    assert not luhn_valid("+059")
    assert not luhn_valid("٠٥٩")  # Arabic-Indic digits are not ASCII digits


def test_spaces_anywhere():
    assert luhn_valid(" 7 9 9 2 7 3 9 8 7 1 3 ")


def test_check_digit_examples():
    assert luhn_check_digit("7992739871") == "3"
    assert luhn_check_digit("05") == "9"
    assert luhn_check_digit("0") == "0"
    assert luhn_check_digit("4539 3195 0343 646") == "7"


def test_check_digit_errors():
    for bad in ["", "   ", "12-3", "12a"]:
        with pytest.raises(ValueError):
            luhn_check_digit(bad)


def test_against_oracle_odd_and_even_lengths():
    rng = random.Random(1234)
    for _ in range(500):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(2, 19)))
        assert luhn_valid(digits) == oracle_valid(digits), digits


def test_check_digit_completes_exactly_one_valid_number():
    rng = random.Random(99)
    for _ in range(200):
        partial = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 18)))
        digit = luhn_check_digit(partial)
        assert isinstance(digit, str) and len(digit) == 1 and digit.isdigit()
        assert luhn_valid(partial + digit)
        assert [d for d in "0123456789" if luhn_valid(partial + d)] == [digit]
