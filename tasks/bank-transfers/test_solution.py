import random
import sys
import threading
import time

import pytest

from solution import Bank, InsufficientFunds

JOIN_SECONDS = 5


@pytest.fixture(autouse=True)
def fast_thread_switching():
    # Switch threads very often so that races and lock-order problems show up in a short run.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(targets):
    errors = []

    def wrap(fn):
        def inner():
            try:
                fn()
            except BaseException as error:  # noqa: BLE001 - reported to the test below
                errors.append(error)
        return inner

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_SECONDS
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert stuck == 0, f"{stuck} thread(s) still running after {JOIN_SECONDS}s: deadlock?"
    assert not errors, errors[0]


def test_basic_operations():
    bank = Bank({"a": 100, "b": 0})
    bank.deposit("b", 5)
    bank.withdraw("a", 30)
    bank.transfer("a", "b", 70)
    assert bank.snapshot() == {"a": 0, "b": 75}
    assert bank.balance("b") == 75 and bank.total() == 75


def test_constructor_copies_and_validates():
    initial = {"a": 1}
    bank = Bank(initial)
    initial["a"] = 999
    initial["z"] = 5
    assert bank.snapshot() == {"a": 1}
    snap = bank.snapshot()
    snap["a"] = 50
    assert bank.balance("a") == 1
    for bad in [{"a": -1}, {"a": 1.5}, {"a": True}]:
        with pytest.raises(ValueError):
            Bank(bad)


def test_errors_change_nothing():
    bank = Bank({"a": 10, "b": 0})
    with pytest.raises(InsufficientFunds):
        bank.transfer("a", "b", 11)
    with pytest.raises(InsufficientFunds):
        bank.withdraw("b", 1)
    for bad in [0, -5, 2.0, True, "3"]:
        with pytest.raises(ValueError):
            bank.transfer("a", "b", bad)
        with pytest.raises(ValueError):
            bank.deposit("a", bad)
    with pytest.raises(KeyError):
        bank.transfer("a", "nope", 1)
    with pytest.raises(KeyError):
        bank.balance("nope")
    with pytest.raises(KeyError):
        bank.deposit("nope", 1)
    assert bank.snapshot() == {"a": 10, "b": 0}


def test_self_transfer_does_not_deadlock():
    bank = Bank({"a": 10})
    outcome = []

    def work():
        bank.transfer("a", "a", 10)
        try:
            bank.transfer("a", "a", 11)
        except InsufficientFunds:
            outcome.append("refused")

    run_threads([work])
    assert outcome == ["refused"] and bank.snapshot() == {"a": 10}


def test_batch_is_sequential_and_atomic():
    bank = Bank({"a": 10, "b": 0, "c": 0})
    bank.transfer_many([("a", "b", 10), ("b", "c", 7), ("c", "a", 2)])
    assert bank.snapshot() == {"a": 2, "b": 3, "c": 5}
    with pytest.raises(InsufficientFunds):
        bank.transfer_many([("a", "b", 2), ("b", "c", 5), ("c", "a", 11)])
    assert bank.snapshot() == {"a": 2, "b": 3, "c": 5}
    with pytest.raises(ValueError):
        bank.transfer_many([("a", "b", 1), ("b", "c", 0)])
    with pytest.raises(KeyError):
        bank.transfer_many([("a", "b", 1), ("b", "x", 1)])
    bank.transfer_many([])
    assert bank.snapshot() == {"a": 2, "b": 3, "c": 5}


def test_concurrent_deposits_are_not_lost():
    bank = Bank({"a": 0})
    run_threads([lambda: [bank.deposit("a", 1) for _ in range(2000)] for _ in range(6)])
    assert bank.balance("a") == 12000


def test_opposite_transfers_and_snapshots_stay_consistent():
    names = ["a", "b", "c", "d", "e"]
    bank = Bank({n: 200 for n in names})
    expected_total = 1000
    done = threading.Event()
    bad_snapshots = []

    def mover(seed):
        rng = random.Random(seed)

        def run():
            for _ in range(1500):
                src, dst = rng.choice(names), rng.choice(names)
                amount = rng.randint(1, 60)
                try:
                    if rng.random() < 0.2:
                        bank.transfer_many([(src, dst, amount), (dst, rng.choice(names), amount)])
                    else:
                        bank.transfer(src, dst, amount)
                except InsufficientFunds:
                    pass
        return run

    def watcher():
        while not done.is_set():
            snap = bank.snapshot()
            if sum(snap.values()) != expected_total or min(snap.values()) < 0:
                bad_snapshots.append(snap)

    watch = threading.Thread(target=watcher, daemon=True)
    watch.start()
    try:
        run_threads([mover(seed) for seed in range(6)])
    finally:
        done.set()
        watch.join(2)
    assert not watch.is_alive()
    assert not bad_snapshots, bad_snapshots[:3]
    assert bank.total() == expected_total
    assert all(v >= 0 for v in bank.snapshot().values())


def test_batches_touching_an_account_twice_in_threads():
    bank = Bank({"a": 50, "b": 50})

    def work():
        for _ in range(500):
            try:
                bank.transfer_many([("a", "b", 3), ("b", "a", 3), ("a", "a", 1)])
            except InsufficientFunds:
                pass

    run_threads([work, work, work])
    assert bank.snapshot() == {"a": 50, "b": 50}
