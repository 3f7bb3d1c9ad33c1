import pytest

from solution import FizzBuzz


def test_classic_words():
    fb = FizzBuzz()
    assert fb.word(9) == "Fizz"
    assert fb.word(10) == "Buzz"
    assert fb.word(30) == "FizzBuzz"
    assert fb.word(7) == "7"


def test_zero_and_negative():
    fb = FizzBuzz()
    assert fb.word(0) == "FizzBuzz"
    assert fb.word(-3) == "Fizz"
    assert fb.word(-15) == "FizzBuzz"
    assert fb.word(-7) == "-7"


def test_series_excludes_stop():
    assert FizzBuzz().series(1, 16) == [
        "1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13", "14", "FizzBuzz",
    ]
    assert FizzBuzz().series(5, 5) == []
    assert FizzBuzz().series(9, 2) == []


def test_chaining_and_rule_order():
    fb = FizzBuzz().add_rule(7, "Bazz")
    assert fb.word(105) == "FizzBuzzBazz"
    assert fb.word(21) == "FizzBazz"
    other = FizzBuzz([(5, "Buzz"), (3, "Fizz")])
    assert other.word(15) == "BuzzFizz"
    assert FizzBuzz([(2, "a")]).add_rule(2, "b").word(4) == "ab"


def test_empty_rules():
    fb = FizzBuzz([])
    assert fb.word(15) == "15"
    assert fb.rules == []


def test_instances_do_not_share_rules():
    first = FizzBuzz()
    first.add_rule(7, "Bazz")
    second = FizzBuzz()
    assert second.word(7) == "7"
    assert second.rules == [(3, "Fizz"), (5, "Buzz")]


def test_caller_list_not_mutated():
    given = [(2, "Two")]
    fb = FizzBuzz(given)
    fb.add_rule(3, "Three")
    assert given == [(2, "Two")]
    assert fb.word(6) == "TwoThree"


def test_rules_property_is_a_copy():
    fb = FizzBuzz()
    rules = fb.rules
    rules.append((2, "Even"))
    assert fb.word(4) == "4"
    assert fb.rules == [(3, "Fizz"), (5, "Buzz")]


def test_invalid_rules():
    for divisor, word in [(0, "Zero"), (-3, "Neg"), (3, "")]:
        with pytest.raises(ValueError):
            FizzBuzz().add_rule(divisor, word)
        with pytest.raises(ValueError):
            FizzBuzz([(divisor, word)])
