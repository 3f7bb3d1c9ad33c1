import random

from solution import bracket_error, is_balanced


def test_balanced_inputs():
    for text in ["", "no brackets", "()", "a(b[c]{d})", "{[()()]}[]", "(\n[\n]\n)"]:
        assert bracket_error(text) is None, text
        assert is_balanced(text) is True


def test_mismatched_closer():
    assert bracket_error("(]") == 1
    assert bracket_error("([)]") == 2
    assert bracket_error("{(})") == 2


def test_stray_closer():
    assert bracket_error("a)") == 1
    assert bracket_error("()]") == 2
    assert bracket_error("}") == 0


def test_unclosed_reports_earliest_opener():
    assert bracket_error("x(()") == 1
    assert bracket_error("{[]") == 0
    assert bracket_error("(((") == 0
    assert bracket_error("ab[(){") == 2


def test_scan_error_wins_over_unclosed():
    assert bracket_error("((]") == 2
    assert bracket_error("[[[)") == 3


def test_quotes_do_not_hide_brackets():
    assert bracket_error('print("(")') == 5
    assert is_balanced("'['  ']'")


def test_is_balanced_false_cases():
    for text in ["(", ")", "(]", "[(])", "{{}"]:
        assert is_balanced(text) is False


def test_deep_nesting_without_recursion():
    depth = 200_000
    assert is_balanced("(" * depth + ")" * depth)
    assert bracket_error("[" * depth + "]" * (depth - 1)) == 0
    assert bracket_error("{" * depth + "]") == depth


def oracle(text: str) -> int | None:
    # Quadratic but obviously right: repeatedly delete adjacent matched pairs, remembering positions.
    items = [(i, c) for i, c in enumerate(text) if c in "()[]{}"]
    changed = True
    while changed:
        changed = False
        for k in range(len(items) - 1):
            if items[k][1] + items[k + 1][1] in ("()", "[]", "{}"):
                del items[k : k + 2]
                changed = True
                break
    closers = [i for i, c in items if c in ")]}"]
    if closers:
        return closers[0]
    return items[0][0] if items else None


def test_against_oracle():
    rng = random.Random(2024)
    for _ in range(400):
        text = "".join(rng.choice("()[]{}ab") for _ in range(rng.randint(0, 14)))
        assert bracket_error(text) == oracle(text), text
