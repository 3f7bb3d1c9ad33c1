import random

from solution import diff


def apply(a, script):
    out = []
    i = 0
    for op, item in script:
        assert op in ("=", "-", "+"), f"unknown op {op!r}"
        if op == "+":
            out.append(item)
            continue
        assert i < len(a), "script consumes past the end of a"
        assert a[i] == item, f"script says {op} {item!r} but a[{i}] is {a[i]!r}"
        if op == "=":
            out.append(item)
        i += 1
    assert i == len(a), "script does not consume all of a"
    return out


def lcs_length(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def edits(script):
    return sum(1 for op, _ in script if op != "=")


def check(a, b):
    a_copy, b_copy = list(a), list(b)
    script = diff(a, b)
    assert a == a_copy and b == b_copy, "inputs were modified"
    assert apply(a, script) == b
    assert edits(script) == len(a) + len(b) - 2 * lcs_length(a, b), "script is not minimal"
    return script


def test_empty_inputs():
    assert diff([], []) == []
    assert diff([], ["x", "y"]) == [("+", "x"), ("+", "y")]
    assert diff(["x", "y"], []) == [("-", "x"), ("-", "y")]


def test_identical_is_all_keeps():
    a = ["one", "two", "three"]
    assert diff(a, list(a)) == [("=", "one"), ("=", "two"), ("=", "three")]


def test_classic_example_is_minimal():
    script = check(list("ABCABBA"), list("CBABAC"))
    assert edits(script) == 5


def test_nothing_in_common():
    script = check(["a", "b", "c"], ["x", "y"])
    assert sorted(op for op, _ in script) == ["+", "+", "-", "-", "-"]


def test_single_change_in_the_middle():
    a = ["l1", "l2", "l3", "l4", "l5"]
    b = ["l1", "l2", "L3", "l4", "l5"]
    script = check(a, b)
    assert script[:2] == [("=", "l1"), ("=", "l2")]
    assert script[-2:] == [("=", "l4"), ("=", "l5")]
    assert sorted(script[2:4]) == [("+", "L3"), ("-", "l3")]


def test_repeated_lines_are_handled():
    check(["a", "a", "b", "a", "a"], ["a", "b", "a", "b", "a"])
    check(["", "", "x", ""], ["x", "", "", ""])
    check(["}", "}", "}"], ["}", "{", "}"])


def test_prefix_and_suffix_changes():
    check(["a", "b", "c"], ["z", "a", "b", "c", "z"])
    check(["a", "b", "c", "d"], ["b", "c"])


def test_random_small_against_dp_oracle():
    rng = random.Random(1234)
    for _ in range(400):
        alphabet = "abc"[: rng.randint(1, 3)]
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        check(a, b)


def test_random_medium_against_dp_oracle():
    rng = random.Random(99)
    for _ in range(40):
        base = [f"line {rng.randint(0, 30)}" for _ in range(rng.randint(20, 80))]
        b = list(base)
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            pos = rng.randint(0, len(b))
            if r < 0.4 and b:
                del b[min(pos, len(b) - 1)]
            elif r < 0.8:
                b.insert(pos, f"new {rng.randint(0, 5)}")
            elif b:
                b[min(pos, len(b) - 1)] = "changed"
        check(base, b)


def test_long_files_with_few_changes():
    rng = random.Random(5)
    a = [f"line {i} {rng.randint(0, 10**6)}" for i in range(20000)]
    b = list(a)
    b[10] = "edited"
    del b[5000:5003]
    b.insert(12000, "inserted")
    b[-1] = "last"
    script = diff(a, b)
    assert apply(a, script) == b
    # 1 replace (2) + 3 deletions + 1 insertion + 1 replace (2)
    assert edits(script) == 8
