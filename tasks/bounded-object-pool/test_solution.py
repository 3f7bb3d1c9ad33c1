import itertools
import threading
import time

import pytest

from solution import ObjectPool, PoolClosed, PoolTimeout

# Every wait in this file is bounded, so a broken pool fails a test instead of hanging the run.
JOIN = 5.0


class Conn:
    _ids = itertools.count()

    def __init__(self):
        self.n = next(self._ids)
        self.dirty = False


def counting_factory():
    made = []

    def factory():
        conn = Conn()
        made.append(conn)
        return conn

    return factory, made


def wait_until(predicate, timeout=JOIN):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.001)


def start(fn, *args):
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def join_all(threads):
    for thread in threads:
        thread.join(JOIN)
    assert not any(t.is_alive() for t in threads), "a thread is still blocked"


def test_invalid_arguments():
    with pytest.raises(ValueError):
        ObjectPool(Conn, 0)
    pool = ObjectPool(Conn, 1)
    with pytest.raises(ValueError):
        pool.acquire(timeout=-1)


def test_lazy_creation_reuse_and_counters():
    factory, made = counting_factory()
    pool = ObjectPool(factory, 2)
    assert (pool.size, pool.idle, pool.in_use, pool.waiting) == (0, 0, 0, 0)
    a = pool.acquire()
    assert len(made) == 1 and (pool.size, pool.idle, pool.in_use) == (1, 0, 1)
    pool.release(a)
    assert (pool.size, pool.idle, pool.in_use) == (1, 1, 0)
    assert pool.acquire() is a
    assert len(made) == 1
    b = pool.acquire()
    assert b is not a and len(made) == 2
    assert (pool.size, pool.idle, pool.in_use) == (2, 0, 2)


def test_idle_objects_reused_lifo():
    pool = ObjectPool(Conn, 3)
    a, b, c = pool.acquire(), pool.acquire(), pool.acquire()
    pool.release(a)
    pool.release(c)
    pool.release(b)
    assert pool.acquire() is b
    assert pool.acquire() is c
    assert pool.acquire() is a


def test_exhausted_pool_times_out():
    pool = ObjectPool(Conn, 1)
    pool.acquire()
    with pytest.raises(PoolTimeout):
        pool.acquire(timeout=0)
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        pool.acquire(timeout=0.1)
    waited = time.monotonic() - began
    assert 0.09 <= waited < 3
    assert pool.waiting == 0


def test_release_checks_identity():
    pool = ObjectPool(list, 2)
    obj = pool.acquire()
    with pytest.raises(ValueError):
        pool.release([])  # equal to obj, but not the same object
    pool.release(obj)
    with pytest.raises(ValueError):
        pool.release(obj)  # second release
    other = ObjectPool(list, 1)
    foreign = other.acquire()
    with pytest.raises(ValueError):
        pool.release(foreign)
    assert pool.idle == 1 and pool.in_use == 0


def test_waiter_is_woken_by_release():
    pool = ObjectPool(Conn, 1)
    held = pool.acquire()
    got = {}

    def waiter():
        got["obj"] = pool.acquire(timeout=JOIN)

    thread = start(waiter)
    wait_until(lambda: pool.waiting == 1)
    pool.release(held)
    join_all([thread])
    assert got["obj"] is held
    assert pool.waiting == 0 and pool.in_use == 1


def test_waiters_served_first_come_first_served():
    pool = ObjectPool(Conn, 1)
    held = pool.acquire()
    order = []

    def waiter(name):
        obj = pool.acquire(timeout=JOIN)
        order.append(name)
        pool.release(obj)

    threads = []
    for i, name in enumerate("abcde"):
        threads.append(start(waiter, name))
        wait_until(lambda n=i + 1: pool.waiting == n)
    pool.release(held)
    join_all(threads)
    assert order == list("abcde")


def test_no_barging_past_a_waiter():
    pool = ObjectPool(Conn, 1)
    held = pool.acquire()
    got = {}

    def waiter():
        try:
            got["obj"] = pool.acquire(timeout=2)
        except Exception as error:  # recorded so the assertion below explains the failure
            got["error"] = error

    thread = start(waiter)
    wait_until(lambda: pool.waiting == 1)
    pool.release(held)
    with pytest.raises(PoolTimeout):
        pool.acquire(timeout=0)
    join_all([thread])
    assert got.get("obj") is held


def test_timed_out_waiter_does_not_swallow_an_object():
    pool = ObjectPool(Conn, 1)
    held = pool.acquire()
    outcome = {}

    def waiter():
        try:
            pool.acquire(timeout=0.05)
        except PoolTimeout:
            outcome["timed_out"] = True

    thread = start(waiter)
    join_all([thread])
    assert outcome == {"timed_out": True}
    assert pool.waiting == 0
    pool.release(held)
    assert pool.acquire(timeout=0) is held


def test_factory_failure_does_not_use_a_slot():
    calls = []

    def factory():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("database down")
        return Conn()

    pool = ObjectPool(factory, 1)
    with pytest.raises(ConnectionError):
        pool.acquire(timeout=0)
    assert pool.size == 0
    obj = pool.acquire(timeout=0)
    assert isinstance(obj, Conn) and pool.size == 1


def test_reset_on_release_and_failed_reset_frees_the_slot():
    def reset(conn):
        if conn.dirty:
            raise RuntimeError("cannot reset")
        conn.n = -1

    factory, made = counting_factory()
    pool = ObjectPool(factory, 1, reset=reset)
    a = pool.acquire()
    pool.release(a)
    assert a.n == -1
    a = pool.acquire()
    got = {}

    def waiter():
        got["obj"] = pool.acquire(timeout=JOIN)

    thread = start(waiter)
    wait_until(lambda: pool.waiting == 1)
    a.dirty = True
    with pytest.raises(RuntimeError):
        pool.release(a)
    join_all([thread])
    assert got["obj"] is not a and got["obj"] is made[-1]
    assert len(made) == 2 and pool.size == 1


def test_lease_releases_even_on_error():
    pool = ObjectPool(Conn, 1)
    with pytest.raises(KeyError), pool.lease(timeout=1) as conn:
        assert pool.in_use == 1
        raise KeyError("boom")
    assert pool.in_use == 0 and pool.idle == 1
    with pool.lease() as again:
        assert again is conn


def test_close_wakes_waiters_and_rejects_acquire():
    pool = ObjectPool(Conn, 2)
    a = pool.acquire()
    b = pool.acquire()
    pool.release(b)
    pool.acquire()
    errors = []

    def waiter():
        try:
            pool.acquire(timeout=JOIN)
        except PoolClosed as error:
            errors.append(error)

    threads = [start(waiter) for _ in range(3)]
    wait_until(lambda: pool.waiting == 3)
    pool.close()
    join_all(threads)
    assert len(errors) == 3
    with pytest.raises(PoolClosed):
        pool.acquire(timeout=0)
    pool.release(a)  # allowed after close, the object is discarded
    pool.close()
    assert pool.idle == 0 and pool.waiting == 0 and pool.in_use == 1


def test_stress_exclusive_use_and_bound():
    factory, made = counting_factory()
    pool = ObjectPool(factory, 3)
    guard = threading.Lock()
    holding = set()
    peak = [0]
    errors = []

    def worker():
        try:
            for _ in range(200):
                obj = pool.acquire(timeout=JOIN)
                with guard:
                    assert obj.n not in holding, "object handed to two threads"
                    holding.add(obj.n)
                    peak[0] = max(peak[0], len(holding))
                with guard:
                    holding.discard(obj.n)
                pool.release(obj)
        except BaseException as error:
            errors.append(error)

    threads = [start(worker) for _ in range(8)]
    join_all(threads)
    assert errors == []
    assert len(made) <= 3 and peak[0] <= 3
    assert pool.in_use == 0 and pool.waiting == 0
    assert pool.idle == pool.size == len(made)
