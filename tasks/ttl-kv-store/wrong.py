from collections.abc import Callable

_MISSING = object()


class TTLStore:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._values: dict[str, object] = {}
        self._expires: dict[str, float] = {}

    def _alive(self, key: str) -> bool:
        if key not in self._values:
            return False
        expires = self._expires.get(key)
        if expires is not None and self._clock() >= expires:
            del self._values[key]
            del self._expires[key]
            return False
        return True

    @staticmethod
    def _check_ttl(ttl: float) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be > 0")

    def set(self, key: str, value: object, ttl: float | None = None) -> None:
        if ttl is not None:
            self._check_ttl(ttl)
        self._values[key] = value
        if ttl is None:
            self._expires.pop(key, None)
        else:
            self._expires[key] = self._clock() + ttl

    def get(self, key: str, default: object = None) -> object:
        return self._values[key] if self._alive(key) else default

    def delete(self, key: str) -> bool:
        if not self._alive(key):
            return False
        del self._values[key]
        self._expires.pop(key, None)
        return True

    def ttl(self, key: str) -> float | None:
        if not self._alive(key):
            raise KeyError(key)
        expires = self._expires.get(key)
        return None if expires is None else expires - self._clock()

    def expire(self, key: str, ttl: float) -> bool:
        self._check_ttl(ttl)
        if not self._alive(key):
            return False
        self._expires[key] = self._clock() + ttl
        return True

    def persist(self, key: str) -> bool:
        if not self._alive(key):
            return False
        return self._expires.pop(key, None) is not None

    def incr(self, key: str, amount: int = 1) -> int:
        current = self._values[key] if self._alive(key) else 0
        if not isinstance(current, int) or isinstance(current, bool):
            raise TypeError(f"value of {key!r} is not an integer")
        self.set(key, current + amount)
        return current + amount

    def keys(self) -> list[str]:
        return sorted(k for k in list(self._values) if self._alive(k))

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: str) -> bool:
        return self._alive(key)

    def purge(self) -> int:
        now = self._clock()
        dead = [k for k, at in self._expires.items() if now >= at]
        for key in dead:
            del self._values[key]
            del self._expires[key]
        return len(dead)
