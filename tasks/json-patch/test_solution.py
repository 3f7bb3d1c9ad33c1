import copy

import pytest

from solution import PatchError, apply_patch, resolve_pointer

RFC6901_DOC = {
    "foo": ["bar", "baz"],
    "": 0,
    "a/b": 1,
    "c%d": 2,
    "e^f": 3,
    "g|h": 4,
    "i\\j": 5,
    'k"l': 6,
    " ": 7,
    "m~n": 8,
}


@pytest.mark.parametrize(
    "pointer, expected",
    [
        ("", RFC6901_DOC),
        ("/foo", ["bar", "baz"]),
        ("/foo/0", "bar"),
        ("/", 0),
        ("/a~1b", 1),
        ("/c%d", 2),
        ("/e^f", 3),
        ("/g|h", 4),
        ("/i\\j", 5),
        ('/k"l', 6),
        ("/ ", 7),
        ("/m~0n", 8),
    ],
)
def test_rfc6901_examples(pointer, expected):
    assert resolve_pointer(RFC6901_DOC, pointer) == expected


@pytest.mark.parametrize("pointer", ["foo", "/foo/2", "/foo/01", "/foo/-", "/foo/-1", "/foo/+1", "/nope", "/foo/0/x", "/~2", "/a~"])
def test_bad_pointers(pointer):
    with pytest.raises(PatchError) as info:
        resolve_pointer(RFC6901_DOC, pointer)
    assert info.value.index is None


def test_escape_decoding_order():
    doc = {"/": 9, "~1": 10}
    assert resolve_pointer(doc, "/~01") == 10
    assert resolve_pointer(doc, "/~1") == 9
    assert apply_patch(doc, [{"op": "test", "path": "/~01", "value": 10}]) == doc
    with pytest.raises(PatchError):
        apply_patch(doc, [{"op": "test", "path": "/~01", "value": "10"}])


def test_rfc6902_add_remove_replace():
    assert apply_patch({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}]) == {"foo": "bar", "baz": "qux"}
    assert apply_patch({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}]) == {
        "foo": ["bar", "qux", "baz"]
    }
    assert apply_patch({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}]) == {"foo": "bar"}
    assert apply_patch({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}]) == {"foo": ["bar", "baz"]}
    assert apply_patch({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}]) == {
        "baz": "boo",
        "foo": "bar",
    }
    assert apply_patch({"foo": ["x"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]) == {
        "foo": ["x", ["abc", "def"]]
    }
    assert apply_patch({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}]) == {
        "foo": "bar",
        "child": {"grandchild": {}},
    }


def test_rfc6902_move_and_copy():
    doc = {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}
    assert apply_patch(doc, [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}]) == {
        "foo": {"bar": "baz"},
        "qux": {"corge": "grault", "thud": "fred"},
    }
    doc = {"foo": ["all", "grass", "cows", "eat"]}
    assert apply_patch(doc, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}]) == {
        "foo": ["all", "cows", "eat", "grass"]
    }
    doc = {"a": [1, {"b": 2}]}
    result = apply_patch(doc, [{"op": "copy", "from": "/a/1", "path": "/c"}])
    assert result == {"a": [1, {"b": 2}], "c": {"b": 2}}
    result["c"]["b"] = 99
    assert result["a"][1]["b"] == 2, "copy must be deep"


def test_whole_document_targets():
    assert apply_patch({"a": 1}, [{"op": "add", "path": "", "value": [1, 2]}]) == [1, 2]
    assert apply_patch({"a": 1}, [{"op": "replace", "path": "", "value": None}]) is None
    with pytest.raises(PatchError):
        apply_patch({"a": 1}, [{"op": "remove", "path": ""}])
    assert apply_patch({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": ""}]) == {"b": 1}


def test_add_edge_cases():
    assert apply_patch([1, 2], [{"op": "add", "path": "/2", "value": 3}]) == [1, 2, 3]
    assert apply_patch({"a": 1}, [{"op": "add", "path": "/a", "value": None}]) == {"a": None}
    assert apply_patch({}, [{"op": "add", "path": "/0", "value": "zero"}]) == {"0": "zero"}
    assert apply_patch({}, [{"op": "add", "path": "/", "value": "empty key"}]) == {"": "empty key"}
    for path in ["/3", "/-1", "/01", "/x"]:
        with pytest.raises(PatchError):
            apply_patch([1, 2], [{"op": "add", "path": path, "value": 0}])
    with pytest.raises(PatchError):
        apply_patch({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}])
    with pytest.raises(PatchError):
        apply_patch({"foo": "bar"}, [{"op": "add", "path": "/foo/x", "value": 1}])


def test_remove_and_replace_need_existing_targets():
    for op in ({"op": "remove", "path": "/b"}, {"op": "replace", "path": "/b", "value": 1}):
        with pytest.raises(PatchError):
            apply_patch({"a": 1}, [op])
    with pytest.raises(PatchError):
        apply_patch([1], [{"op": "remove", "path": "/1"}])
    with pytest.raises(PatchError):
        apply_patch([1], [{"op": "replace", "path": "/-", "value": 0}])
    assert apply_patch([1, 2], [{"op": "replace", "path": "/1", "value": 5}]) == [1, 5]


def test_move_rules():
    doc = {"a": {"b": {"c": 1}}, "ab": 2}
    with pytest.raises(PatchError):
        apply_patch(doc, [{"op": "move", "from": "/a", "path": "/a/b/x"}])
    assert apply_patch(doc, [{"op": "move", "from": "/a", "path": "/a"}]) == doc
    with pytest.raises(PatchError):
        apply_patch(doc, [{"op": "move", "from": "/zz", "path": "/zz"}])
    assert apply_patch(doc, [{"op": "move", "from": "/a", "path": "/abc"}]) == {"abc": {"b": {"c": 1}}, "ab": 2}
    assert apply_patch([1, 2, 3], [{"op": "move", "from": "/0", "path": "/-"}]) == [2, 3, 1]


def test_json_equality_in_test_op():
    doc = {"n": 1, "f": 1.0, "t": True, "z": 0, "list": [1, True, None], "obj": {"a": 1, "b": [False]}}
    passing = [
        ("/n", 1.0),
        ("/f", 1),
        ("/t", True),
        ("/list", [1.0, True, None]),
        ("/obj", {"b": [False], "a": 1}),
    ]
    for path, value in passing:
        assert apply_patch(doc, [{"op": "test", "path": path, "value": value}]) == doc
    failing = [
        ("/n", True),
        ("/t", 1),
        ("/z", False),
        ("/list", [True, 1, None]),
        ("/list", [1, True]),
        ("/obj", {"a": 1}),
        ("/obj", {"a": 1, "b": [0]}),
        ("/n", "1"),
        ("/missing", None),
    ]
    for path, value in failing:
        with pytest.raises(PatchError):
            apply_patch(doc, [{"op": "test", "path": path, "value": value}])


def test_malformed_operations_report_index():
    doc = {"a": 1}
    bad_ops = [
        {"op": "add", "path": "/b"},
        {"op": "frobnicate", "path": "/a"},
        {"path": "/a"},
        {"op": "remove"},
        {"op": "move", "path": "/b"},
        {"op": "add", "path": 5, "value": 1},
        "not an operation",
    ]
    for bad in bad_ops:
        with pytest.raises(PatchError) as info:
            apply_patch(doc, [{"op": "test", "path": "/a", "value": 1}, bad])
        assert info.value.index == 1
    with pytest.raises(PatchError):
        apply_patch(doc, {"op": "remove", "path": "/a"})
    assert apply_patch(doc, [{"op": "add", "path": "/b", "value": None, "note": "ignored"}]) == {"a": 1, "b": None}


def test_atomic_and_pure():
    doc = {"items": [1, 2, 3], "meta": {"v": 1}}
    snapshot = copy.deepcopy(doc)
    patch = [
        {"op": "remove", "path": "/items/0"},
        {"op": "replace", "path": "/meta/v", "value": 2},
        {"op": "test", "path": "/meta/v", "value": 3},
    ]
    patch_snapshot = copy.deepcopy(patch)
    with pytest.raises(PatchError) as info:
        apply_patch(doc, patch)
    assert info.value.index == 2
    assert doc == snapshot and patch == patch_snapshot

    value = {"deep": [1]}
    result = apply_patch(doc, [{"op": "add", "path": "/new", "value": value}])
    result["new"]["deep"].append(2)
    result["meta"]["v"] = 100
    assert value == {"deep": [1]}
    assert doc == snapshot
