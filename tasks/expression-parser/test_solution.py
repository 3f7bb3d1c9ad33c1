import random

import pytest

from solution import ParseError, evaluate


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("2", 2.0),
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("10 - 4 - 3", 3.0),
        ("64 / 4 / 2", 8.0),
        ("7 % 4 * 2", 6.0),
        ("-7 % 3", 2.0),
        ("7 % -3", -2.0),
        ("2 ^ 3 ^ 2", 512.0),
        ("(2 ^ 3) ^ 2", 64.0),
        ("-2 ^ 2", -4.0),
        ("(-2) ^ 2", 4.0),
        ("2 ^ -1", 0.5),
        ("2 ^ -3 ^ 2", 2.0 ** -9),
        ("-2 ^ -2", -0.25),
        ("--3", 3.0),
        ("-+-3", 3.0),
        ("2 * -3", -6.0),
        ("1 - -1", 2.0),
        ("1--1", 2.0),
        ("\t0.25 *4 ", 1.0),
        ("((((1))))", 1.0),
        ("3 - 2 ^ 2 * 2", -5.0),
        ("-(1 + 2) ^ 2", -9.0),
        ("(-8) ^ 3", -512.0),
    ],
)
def test_values(expr, expected):
    result = evaluate(expr)
    assert isinstance(result, float)
    assert result == pytest.approx(expected)


def test_variables():
    assert evaluate("rate * hours + _bonus2", {"rate": 12.5, "hours": 8, "_bonus2": 4}) == 104.0
    assert evaluate("-x ^ 2", {"x": 3}) == -9.0
    with pytest.raises(NameError, match="missing"):
        evaluate("1 + missing", {"x": 1})
    with pytest.raises(NameError):
        evaluate("x")


@pytest.mark.parametrize(
    "expr, position",
    [
        ("", 0),
        ("   ", 3),
        ("1 +", 3),
        ("-", 1),
        ("(1 + 2", 6),
        ("1 + 2)", 5),
        ("1 * / 2", 4),
        ("2 3", 2),
        ("2x", 1),
        ("2(3)", 1),
        ("(1)(2)", 3),
        ("4 # 2", 2),
        ("()", 1),
        ("1.5.2", 3),
        (".5", 0),
        ("5.", 1),
        ("2 ^", 3),
        ("3 + * 4", 4),
        ("((2)", 4),
    ],
)
def test_parse_error_positions(expr, position):
    with pytest.raises(ParseError) as info:
        evaluate(expr)
    assert info.value.position == position
    assert isinstance(info.value, ValueError)


def test_syntax_errors_win_over_evaluation_errors():
    with pytest.raises(ParseError) as info:
        evaluate("1/0 +")
    assert info.value.position == 5
    with pytest.raises(ParseError):
        evaluate("y +")
    with pytest.raises(ParseError):
        evaluate("(1 % 0")


def test_evaluation_errors():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 / (2 - 2)")
    with pytest.raises(ZeroDivisionError):
        evaluate("5 % 0")
    with pytest.raises(ZeroDivisionError):
        evaluate("0 ^ -1")
    with pytest.raises(ValueError) as info:
        evaluate("(-8) ^ (1 / 3)")
    assert not isinstance(info.value, ParseError)


def test_long_sum():
    expr = " + ".join(["1"] * 5000) + " - 2 * 3"
    assert evaluate(expr) == 4994.0
    assert evaluate(" * ".join(["1.0001"] * 3000)) == pytest.approx(1.0001**3000)


def random_expression(rng, depth):
    """Grammar-directed generator; returns (our syntax, Python syntax) token lists."""
    ours, python = [], []

    def emit(token, py=None):
        ours.append(token)
        python.append(token if py is None else py)

    def expr(d):
        term(d)
        for _ in range(rng.randint(0, 2)):
            emit(rng.choice("+-"))
            term(d)

    def term(d):
        unary(d)
        for _ in range(rng.randint(0, 2)):
            emit(rng.choice("*/%"))
            unary(d)

    def unary(d):
        if rng.random() < 0.25:
            emit(rng.choice("-+"))
            unary(d)
        else:
            power(d)

    def power(d):
        atom(d)
        if rng.random() < 0.25:
            emit("^", "**")
            if rng.random() < 0.3:
                emit("-")
            k = rng.randint(0, 3)
            emit(str(k), f"{k}.0")

    def atom(d):
        r = rng.random()
        if d > 0 and r < 0.3:
            emit("(")
            expr(d - 1)
            emit(")")
        elif r < 0.5:
            emit(rng.choice(["a", "b_1", "Cc"]))
        elif r < 0.75:
            n = str(rng.randint(0, 12))
            emit(n, n + ".0")
        else:
            n = f"{rng.randint(0, 9)}.{rng.randint(0, 99)}"
            emit(n)

    expr(depth)
    return ours, python


def test_random_expressions_match_python_floats():
    rng = random.Random(2024)
    variables = {"a": 1.5, "b_1": -2.0, "Cc": 3.0}
    checked = 0
    for _ in range(600):
        ours, python = random_expression(rng, 3)
        text = "".join(tok + rng.choice(["", " ", "  "]) for tok in ours)
        py_text = " ".join(python)
        try:
            expected = eval(py_text, {}, dict(variables))  # the oracle: Python's own float arithmetic
        except (ZeroDivisionError, OverflowError) as error:
            with pytest.raises(type(error)):
                evaluate(text, variables)
            continue
        result = evaluate(text, variables)
        assert result == pytest.approx(expected, rel=1e-9, abs=1e-12), text
        checked += 1
    assert checked > 400
