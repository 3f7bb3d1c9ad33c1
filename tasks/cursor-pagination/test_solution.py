import random
import re

import pytest

from solution import InvalidCursor, Page, paginate

SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


def walk(records, limit, sort_key="id"):
    pages, cursor = [], None
    while True:
        page = paginate(records, sort_key=sort_key, limit=limit, cursor=cursor)
        pages.append(page)
        if page.next_cursor is None:
            return pages
        assert SAFE.match(page.next_cursor), page.next_cursor
        cursor = page.next_cursor
        assert len(pages) < 10_000


def test_first_page_sorted():
    records = [{"id": 5}, {"id": 1}, {"id": 3}]
    page = paginate(records, sort_key="id", limit=2)
    assert isinstance(page, Page)
    assert page.items == [{"id": 1}, {"id": 3}]
    assert page.next_cursor is not None
    page2 = paginate(records, sort_key="id", limit=2, cursor=page.next_cursor)
    assert page2 == Page([{"id": 5}], None)


def test_exactly_full_last_page_has_no_cursor():
    records = [{"id": i} for i in range(6)]
    pages = walk(records, 3)
    assert [len(p.items) for p in pages] == [3, 3]
    assert pages[-1].next_cursor is None
    assert paginate(records, sort_key="id", limit=6).next_cursor is None
    assert paginate(records, sort_key="id", limit=1000).next_cursor is None


def test_empty_collection():
    assert paginate([], sort_key="id", limit=10) == Page([], None)


def test_walk_all_pages_covers_everything():
    rng = random.Random(3)
    for _ in range(30):
        records = [{"id": k, "n": k * 2} for k in rng.sample(range(1000), rng.randint(0, 60))]
        limit = rng.randint(1, 12)
        pages = walk(records, limit)
        seen = [r["id"] for p in pages for r in p.items]
        assert seen == sorted(r["id"] for r in records)
        assert all(1 <= len(p.items) <= limit for p in pages) or not records


def test_string_keys_and_other_sort_key():
    records = [{"name": n, "id": i} for i, n in enumerate(["pear", "apple", "fig", "kiwi"])]
    pages = walk(records, 3, sort_key="name")
    assert [r["name"] for p in pages for r in p.items] == ["apple", "fig", "kiwi", "pear"]


def test_inserts_and_deletes_between_pages():
    records = [{"id": i} for i in range(0, 100, 10)]
    page = paginate(records, sort_key="id", limit=3)
    assert [r["id"] for r in page.items] == [0, 10, 20]
    records = [r for r in records if r["id"] not in (20, 30)] + [{"id": 5}, {"id": 25}, {"id": 95}]
    page = paginate(records, sort_key="id", limit=3, cursor=page.next_cursor)
    assert [r["id"] for r in page.items] == [25, 40, 50]
    rest = paginate(records, sort_key="id", limit=100, cursor=page.next_cursor)
    assert [r["id"] for r in rest.items] == [60, 70, 80, 90, 95]
    assert rest.next_cursor is None


def test_cursor_reusable():
    records = [{"id": i} for i in range(10)]
    cursor = paginate(records, sort_key="id", limit=4).next_cursor
    a = paginate(records, sort_key="id", limit=4, cursor=cursor)
    b = paginate(records, sort_key="id", limit=4, cursor=cursor)
    assert a == b and [r["id"] for r in a.items] == [4, 5, 6, 7]


def test_cursor_after_last_record_deleted_at_end():
    records = [{"id": i} for i in range(4)]
    cursor = paginate(records, sort_key="id", limit=2).next_cursor
    assert paginate(records[:2], sort_key="id", limit=2, cursor=cursor) == Page([], None)


@pytest.mark.parametrize("cursor", ["abc", "", "!!", "e30", "not a cursor", "eyJrIjoiaWQifQ"])
def test_garbage_cursors(cursor):
    with pytest.raises(InvalidCursor):
        paginate([{"id": 1}], sort_key="id", limit=1, cursor=cursor)


def test_cursor_bound_to_sort_key_and_type():
    records = [{"id": i, "rank": i} for i in range(5)]
    cursor = paginate(records, sort_key="id", limit=2).next_cursor
    with pytest.raises(InvalidCursor):
        paginate(records, sort_key="rank", limit=2, cursor=cursor)
    as_str = [{"id": str(i)} for i in range(5)]
    with pytest.raises(InvalidCursor):
        paginate(as_str, sort_key="id", limit=2, cursor=cursor)
    str_cursor = paginate(as_str, sort_key="id", limit=2).next_cursor
    with pytest.raises(InvalidCursor):
        paginate(records, sort_key="id", limit=2, cursor=str_cursor)
    assert issubclass(InvalidCursor, ValueError)


def test_bad_arguments():
    for bad in [0, -1, 1001, 2.0, True, None]:
        with pytest.raises(ValueError):
            paginate([{"id": 1}], sort_key="id", limit=bad)
    with pytest.raises(ValueError):
        paginate([{"id": 1}, {"x": 2}], sort_key="id", limit=5)


def test_accepts_any_iterable():
    page = paginate((r for r in [{"id": 2}, {"id": 1}]), sort_key="id", limit=1)
    assert page.items == [{"id": 1}] and page.next_cursor
