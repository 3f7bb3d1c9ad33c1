import random

from solution import merge3

BASE = ["a", "b", "c", "d", "e"]


def test_all_empty_and_unchanged():
    assert merge3([], [], []) == ([], 0)
    assert merge3(BASE, BASE, BASE) == (BASE, 0)


def test_one_side_changes():
    ours = ["a", "B", "c", "d", "e", "f"]
    assert merge3(BASE, ours, BASE) == (ours, 0)
    assert merge3(BASE, BASE, ours) == (ours, 0)


def test_non_overlapping_changes_merge_cleanly():
    ours = ["a", "B", "c", "d", "e"]
    theirs = ["a", "b", "c", "e", "f"]
    assert merge3(BASE, ours, theirs) == (["a", "B", "c", "e", "f"], 0)


def test_identical_changes_merge_cleanly():
    both = ["a", "x", "y", "d", "e"]
    assert merge3(BASE, both, list(both)) == (both, 0)
    assert merge3(BASE, ["a", "b", "e"], ["a", "b", "e"]) == (["a", "b", "e"], 0)


def test_conflicting_modification():
    ours = ["a", "b", "OURS", "d", "e"]
    theirs = ["a", "b", "THEIRS", "d", "e"]
    assert merge3(BASE, ours, theirs) == (
        ["a", "b", "<<<<<<< ours", "OURS", "=======", "THEIRS", ">>>>>>> theirs", "d", "e"],
        1,
    )


def test_labels_and_show_base():
    ours = ["a", "b", "OURS", "d", "e"]
    theirs = ["a", "b", "T1", "T2", "d", "e"]
    merged, count = merge3(BASE, ours, theirs, ours_label="HEAD", theirs_label="feature/x", show_base=True)
    assert count == 1
    assert merged == [
        "a", "b",
        "<<<<<<< HEAD", "OURS", "||||||| base", "c", "=======", "T1", "T2", ">>>>>>> feature/x",
        "d", "e",
    ]


def test_adjacent_changes_conflict():
    ours = ["a", "B", "c", "d", "e"]
    theirs = ["a", "b", "C", "d", "e"]
    assert merge3(BASE, ours, theirs) == (
        ["a", "<<<<<<< ours", "B", "c", "=======", "b", "C", ">>>>>>> theirs", "d", "e"],
        1,
    )


def test_delete_against_modify_conflicts():
    ours = ["a", "b", "d", "e"]
    theirs = ["a", "b", "C", "d", "e"]
    merged, count = merge3(BASE, ours, theirs, show_base=True)
    assert count == 1
    assert merged == ["a", "b", "<<<<<<< ours", "||||||| base", "c", "=======", "C", ">>>>>>> theirs", "d", "e"]


def test_both_insert_at_same_place():
    ours = ["a", "b", "o1", "c", "d", "e"]
    theirs = ["a", "b", "t1", "t2", "c", "d", "e"]
    assert merge3(BASE, ours, theirs, show_base=True) == (
        ["a", "b", "<<<<<<< ours", "o1", "||||||| base", "=======", "t1", "t2", ">>>>>>> theirs", "c", "d", "e"],
        1,
    )


def test_empty_base_and_edges_of_file():
    assert merge3([], ["x"], ["x"]) == (["x"], 0)
    assert merge3([], ["x"], ["y"]) == (["<<<<<<< ours", "x", "=======", "y", ">>>>>>> theirs"], 1)
    ours = ["new first"] + BASE
    theirs = BASE + ["new last"]
    assert merge3(BASE, ours, theirs) == (["new first"] + BASE + ["new last"], 0)
    assert merge3(BASE, ["Z"] + BASE[1:], ["Y"] + BASE[1:]) == (
        ["<<<<<<< ours", "Z", "=======", "Y", ">>>>>>> theirs"] + BASE[1:],
        1,
    )


def test_several_conflicts_are_counted():
    base = [f"l{i}" for i in range(9)]
    ours = list(base)
    theirs = list(base)
    ours[1], theirs[1] = "o1", "t1"
    ours[4], theirs[4] = "same", "same"
    ours[7], theirs[7] = "o7", "t7"
    merged, count = merge3(base, ours, theirs)
    assert count == 2
    assert merged.count("=======") == 2
    assert "same" in merged


def test_moved_line_against_unchanged():
    ours = ["c", "a", "b", "d", "e"]
    assert merge3(BASE, ours, BASE) == (ours, 0)


def test_inputs_not_modified():
    base, ours, theirs = list(BASE), ["a", "X", "e"], ["a", "Y", "e"]
    merge3(base, ours, theirs)
    assert base == BASE and ours == ["a", "X", "e"] and theirs == ["a", "Y", "e"]


def generate(rng):
    """Edits at sites separated by untouched lines, so the expected merge is known exactly."""
    n = rng.randint(0, 14)
    base = [f"b{i}" for i in range(n)]
    ours, theirs, expected, expected_with_base = [], [], [], []
    conflicts = 0
    fresh = iter(range(10**6))
    pos = 0
    while pos <= n:
        if rng.random() < 0.45:
            length = rng.randint(0, min(2, n - pos))
            segment = base[pos : pos + length]

            def new_lines(prefix, at_least):
                return [f"{prefix}{next(fresh)}" for _ in range(rng.randint(at_least, 2))]

            kind = rng.choice(["ours", "theirs", "same", "different"])
            need = 1 if length == 0 else 0
            if kind == "ours":
                o, t = new_lines("o", need), segment
                out = o
            elif kind == "theirs":
                o, t = segment, new_lines("t", need)
                out = t
            elif kind == "same":
                o = new_lines("s", need)
                t = list(o)
                out = o
            else:
                o = new_lines("o", max(need, 1))
                t = new_lines("t", need)
                out = None
            ours += o
            theirs += t
            if out is None:
                conflicts += 1
                expected += ["<<<<<<< ours", *o, "=======", *t, ">>>>>>> theirs"]
                expected_with_base += ["<<<<<<< ours", *o, "||||||| base", *segment, "=======", *t, ">>>>>>> theirs"]
            else:
                expected += out
                expected_with_base += out
            pos += length
        # An untouched line keeps sites apart.
        if pos < n:
            ours.append(base[pos])
            theirs.append(base[pos])
            expected.append(base[pos])
            expected_with_base.append(base[pos])
        pos += 1
    return base, ours, theirs, (expected, conflicts), (expected_with_base, conflicts)


def test_random_merges_with_known_answers():
    rng = random.Random(31)
    for _ in range(400):
        base, ours, theirs, plain, with_base = generate(rng)
        assert merge3(base, ours, theirs) == plain, (base, ours, theirs)
        assert merge3(base, ours, theirs, show_base=True) == with_base
        # Swapping the sides swaps the clean result only where there is no conflict.
        if plain[1] == 0:
            assert merge3(base, theirs, ours) == plain


def test_larger_files():
    base = [f"line {i}" for i in range(300)]
    ours = list(base)
    theirs = list(base)
    for i in range(0, 300, 30):
        ours[i] = f"ours {i}"
    for i in range(15, 300, 30):
        theirs[i] = f"theirs {i}"
    del theirs[290:295]
    expected = list(base)
    for i in range(0, 300, 30):
        expected[i] = f"ours {i}"
    for i in range(15, 300, 30):
        expected[i] = f"theirs {i}"
    del expected[290:295]
    assert merge3(base, ours, theirs) == (expected, 0)
