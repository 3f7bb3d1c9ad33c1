import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass


class InvalidCursor(ValueError):
    pass


@dataclass
class Page:
    items: list[dict]
    next_cursor: str | None


def _encode(sort_key: str, last: int | str) -> str:
    payload = json.dumps({"k": sort_key, "v": last, "t": type(last).__name__}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode(cursor: str, sort_key: str) -> int | str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        key, value, kind = data["k"], data["v"], data["t"]
    except (binascii.Error, ValueError, TypeError, KeyError):
        raise InvalidCursor("malformed cursor") from None
    if key != sort_key:
        raise InvalidCursor(f"cursor was made for sort key {key!r}, not {sort_key!r}")
    if kind not in ("int", "str") or type(value).__name__ != kind:
        raise InvalidCursor("malformed cursor")
    return value


def paginate(records: Iterable[dict], *, sort_key: str, limit: int, cursor: str | None = None) -> Page:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise ValueError("limit must be an int in 1..1000")
    rows = list(records)
    for row in rows:
        if sort_key not in row:
            raise ValueError(f"record without {sort_key!r}: {row!r}")
    rows.sort(key=lambda row: row[sort_key])
    if cursor is not None:
        after = _decode(cursor, sort_key)
        if rows and type(rows[0][sort_key]) is not type(after):
            raise InvalidCursor("cursor key type does not match the records")
        rows = [row for row in rows if row[sort_key] > after]
    items = rows[:limit]
    has_more = len(rows) > limit
    return Page(items, _encode(sort_key, items[-1][sort_key]) if has_more else None)
