from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class _Bucket:
    """All keys with one frequency, least recently used first; buckets form a list sorted by frequency."""

    __slots__ = ("freq", "keys", "prev", "next")

    def __init__(self, freq: int) -> None:
        self.freq = freq
        self.keys: OrderedDict[Hashable, None] = OrderedDict()
        self.prev: _Bucket = self
        self.next: _Bucket = self


class LFUCache:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._values: dict[Hashable, Any] = {}
        self._bucket_of: dict[Hashable, _Bucket] = {}
        self._head = _Bucket(0)  # sentinel; head.next has the lowest frequency

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def _insert_after(self, bucket: _Bucket, freq: int) -> _Bucket:
        new = _Bucket(freq)
        new.prev = bucket
        new.next = bucket.next
        bucket.next.prev = new
        bucket.next = new
        return new

    def _remove_key(self, key: Hashable) -> _Bucket:
        """Detach key from its bucket; return the bucket it should be placed after."""
        bucket = self._bucket_of.pop(key)
        del bucket.keys[key]
        if bucket.keys:
            return bucket
        bucket.prev.next = bucket.next
        bucket.next.prev = bucket.prev
        return bucket.prev

    def _touch(self, key: Hashable) -> None:
        freq = self._bucket_of[key].freq + 1
        anchor = self._remove_key(key)
        target = anchor if anchor.freq == freq else anchor.next
        if target.freq != freq:
            target = self._insert_after(anchor, freq)
        target.keys[key] = None
        self._bucket_of[key] = target

    def get(self, key: Hashable, default: Any = None) -> Any:
        if key not in self._values:
            return default
        self._touch(key)
        return self._values[key]

    def peek(self, key: Hashable, default: Any = None) -> Any:
        return self._values.get(key, default)

    def frequency(self, key: Hashable) -> int:
        if key not in self._values:
            raise KeyError(key)
        return self._bucket_of[key].freq

    def put(self, key: Hashable, value: Any) -> None:
        if key in self._values:
            self._values[key] = value
            self._touch(key)
            return
        if len(self._values) >= self._capacity:
            self.pop_lfu()
        first = self._head.next
        if first.freq != 1:
            first = self._insert_after(self._head, 1)
        first.keys[key] = None
        self._bucket_of[key] = first
        self._values[key] = value

    def delete(self, key: Hashable) -> bool:
        if key not in self._values:
            return False
        self._remove_key(key)
        del self._values[key]
        return True

    def pop_lfu(self) -> tuple:
        if not self._values:
            raise KeyError("pop from an empty cache")
        key = next(iter(self._head.next.keys))
        self._remove_key(key)
        return key, self._values.pop(key)
