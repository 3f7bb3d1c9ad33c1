import random

import pytest

from solution import TTLStore


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def env():
    clock = FakeClock()
    return clock, TTLStore(clock)


def test_set_get_without_ttl(env):
    clock, s = env
    s.set("a", 1)
    s.set("b", [1, 2])
    clock.now += 10**9
    assert s.get("a") == 1 and s.get("b") == [1, 2]
    assert s.get("zzz") is None and s.get("zzz", "d") == "d"
    assert s.ttl("a") is None


def test_expiry_boundary(env):
    clock, s = env
    s.set("k", "v", ttl=5)
    clock.now = 1004.999
    assert s.get("k") == "v" and "k" in s
    assert s.ttl("k") == pytest.approx(0.001)
    clock.now = 1005.0
    assert s.get("k", "gone") == "gone"
    assert "k" not in s and len(s) == 0 and s.keys() == []
    with pytest.raises(KeyError):
        s.ttl("k")
    assert s.delete("k") is False


def test_set_replaces_expiry(env):
    clock, s = env
    s.set("k", 1, ttl=5)
    s.set("k", 2)
    clock.now += 100
    assert s.get("k") == 2
    s.set("k", 3, ttl=1)
    assert s.ttl("k") == 1


def test_delete(env):
    clock, s = env
    s.set("a", 1)
    assert s.delete("a") is True and s.delete("a") is False and "a" not in s


def test_expire_and_persist(env):
    clock, s = env
    assert s.expire("nope", 5) is False
    s.set("a", 1)
    assert s.persist("a") is False
    assert s.expire("a", 10) is True and s.ttl("a") == 10
    clock.now += 4
    assert s.ttl("a") == 6
    assert s.persist("a") is True and s.ttl("a") is None
    clock.now += 100
    assert s.get("a") == 1
    s.set("b", 1, ttl=1)
    clock.now += 1
    assert s.expire("b", 10) is False and s.persist("b") is False and "b" not in s


def test_incr(env):
    clock, s = env
    assert s.incr("n") == 1
    assert s.incr("n", 5) == 6 and s.incr("n", -10) == -4
    assert s.ttl("n") is None
    s.set("s", "text")
    with pytest.raises(TypeError):
        s.incr("s")
    assert s.get("s") == "text"
    s.set("flag", True)
    with pytest.raises(TypeError):
        s.incr("flag")


def test_incr_keeps_expiry_and_restarts_after_expiry(env):
    clock, s = env
    s.set("hits", 10, ttl=60)
    clock.now += 30
    assert s.incr("hits") == 11
    assert s.ttl("hits") == 30
    clock.now += 30
    assert s.get("hits") is None
    assert s.incr("hits") == 1
    assert s.ttl("hits") is None


def test_invalid_ttl(env):
    clock, s = env
    with pytest.raises(ValueError):
        s.set("a", 1, ttl=0)
    with pytest.raises(ValueError):
        s.set("a", 1, ttl=-1)
    assert "a" not in s
    s.set("b", 1)
    with pytest.raises(ValueError):
        s.expire("b", 0)


def test_keys_len_and_purge(env):
    clock, s = env
    s.set("c", 1, ttl=1)
    s.set("a", 1, ttl=2)
    s.set("b", 1)
    assert s.keys() == ["a", "b", "c"] and len(s) == 3
    clock.now += 1
    assert s.keys() == ["a", "b"] and len(s) == 2
    clock.now += 1
    assert s.purge() >= 0
    assert s.keys() == ["b"]
    s.set("x", 1, ttl=1)
    s.set("y", 1, ttl=1)
    clock.now += 5
    assert s.purge() == 2
    assert s.purge() == 0


def test_against_model():
    clock = FakeClock()
    s = TTLStore(clock)
    rng = random.Random(8)
    model = {}  # key -> (value, expires_at or None)

    def live(k):
        if k in model and (model[k][1] is None or clock.now < model[k][1]):
            return True
        model.pop(k, None)
        return False

    keys = ["a", "b", "c", "d"]
    for _ in range(2000):
        op = rng.choice(["set", "get", "advance", "incr", "expire", "delete", "persist"])
        k = rng.choice(keys)
        if op == "set":
            ttl = rng.choice([None, 1, 2.5, 4])
            value = rng.randint(0, 9)
            s.set(k, value, ttl=ttl)
            model[k] = (value, None if ttl is None else clock.now + ttl)
        elif op == "advance":
            clock.now += rng.choice([0.5, 1, 2])
        elif op == "incr":
            value = s.incr(k)
            expected = (model[k][0] if live(k) else 0) + 1
            assert value == expected
            model[k] = (expected, model[k][1] if k in model else None)
        elif op == "expire":
            assert s.expire(k, 3) == live(k)
            if live(k):
                model[k] = (model[k][0], clock.now + 3)
        elif op == "delete":
            assert s.delete(k) == live(k)
            model.pop(k, None)
        elif op == "persist":
            expected = live(k) and model[k][1] is not None
            assert s.persist(k) == expected
            if live(k):
                model[k] = (model[k][0], None)
        assert s.get(k, "-") == (model[k][0] if live(k) else "-")
        assert s.keys() == sorted(x for x in keys if live(x))
