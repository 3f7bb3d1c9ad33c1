import sys
import threading
import time

import pytest

from solution import Counter

JOIN_SECONDS = 10


@pytest.fixture(autouse=True)
def fast_switching():
    # Switch threads often so that unsynchronised updates really collide.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_threads(targets):
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads), "threads did not finish"


def wait_until(predicate, seconds=JOIN_SECONDS):
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        pause.wait(0.001)


def test_single_thread_basics():
    c = Counter()
    assert c.value == 0
    assert c.increment() == 1
    assert c.increment(5) == 6
    assert c.decrement(2) == 4
    assert c.decrement(10) == -6
    assert c.increment(0) == -6
    assert Counter(41).increment() == 42


def test_negative_amounts_rejected():
    c = Counter()
    with pytest.raises(ValueError):
        c.increment(-1)
    with pytest.raises(ValueError):
        c.decrement(-1)
    with pytest.raises(ValueError):
        c.wait_for(1, timeout=-0.5)
    assert c.value == 0


def test_no_lost_updates():
    c = Counter()
    per_thread = 20_000

    def up():
        for _ in range(per_thread):
            c.increment()

    def down():
        for _ in range(per_thread):
            c.decrement()

    run_threads([up] * 6 + [down] * 2)
    assert c.value == 4 * per_thread


def test_increment_returns_unique_values():
    c = Counter()
    results = [[] for _ in range(8)]

    def worker(out):
        for _ in range(5_000):
            out.append(c.increment())

    run_threads([lambda out=out: worker(out) for out in results])
    seen = sorted(v for out in results for v in out)
    assert seen == list(range(1, 40_001))


def test_wait_for_immediate_and_timeout():
    c = Counter(3)
    assert c.wait_for(3) is True
    assert c.wait_for(-10, timeout=0) is True
    assert c.wait_for(4, timeout=0) is False
    assert c.wait_for(4, timeout=0.05) is False
    assert c.waiting == 0


def test_all_waiters_wake():
    c = Counter()
    results = {}

    def waiter(name, target):
        results[name] = c.wait_for(target, timeout=30)

    threads = [threading.Thread(target=waiter, args=(i, 5), daemon=True) for i in range(4)]
    threads.append(threading.Thread(target=waiter, args=("low", 2), daemon=True))
    for t in threads:
        t.start()
    wait_until(lambda: c.waiting == 5)
    c.increment(5)
    for t in threads:
        t.join(JOIN_SECONDS)
        assert not t.is_alive(), "a waiter was not woken"
    assert results == {0: True, 1: True, 2: True, 3: True, "low": True}
    assert c.waiting == 0


def test_waiter_sees_only_reached_target():
    c = Counter()
    done = threading.Event()
    outcome = []

    def waiter():
        outcome.append(c.wait_for(10, timeout=30))
        done.set()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    wait_until(lambda: c.waiting == 1)
    c.increment(9)
    c.decrement(9)
    c.increment(9)
    assert not done.is_set(), "wait_for returned before the target was reached"
    c.increment(1)
    t.join(JOIN_SECONDS)
    assert not t.is_alive()
    assert outcome == [True]


def test_waiters_with_different_targets_released_in_steps():
    c = Counter()
    results = {}

    def waiter(target):
        results[target] = c.wait_for(target, timeout=30)

    threads = {target: threading.Thread(target=waiter, args=(target,), daemon=True) for target in (1, 2, 3)}
    for t in threads.values():
        t.start()
    wait_until(lambda: c.waiting == 3)
    for target in (1, 2, 3):
        c.increment()
        threads[target].join(JOIN_SECONDS)
        assert not threads[target].is_alive()
        assert results[target] is True
    assert c.waiting == 0
