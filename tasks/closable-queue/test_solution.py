import threading
import time

import pytest

from solution import Closed, ClosableQueue

DEADLINE_SECONDS = 5


def start(fn):
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - inspected by the test
            result["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_until(predicate, what):
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0)  # yield the GIL to the thread under test


def join_all(threads):
    deadline = time.monotonic() + DEADLINE_SECONDS
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert stuck == 0, f"{stuck} thread(s) still blocked"


def test_fifo_and_len():
    q = ClosableQueue(3)
    for i in range(3):
        q.put(i)
    assert len(q) == 3
    assert [q.get(), q.get()] == [0, 1]
    q.put("x")
    assert [q.get(), q.get()] == [2, "x"] and len(q) == 0


def test_bad_arguments():
    for bad in [0, -1, 1.5, True, None]:
        with pytest.raises(ValueError):
            ClosableQueue(bad)
    q = ClosableQueue(1)
    with pytest.raises(ValueError):
        q.put(1, timeout=-1)
    with pytest.raises(ValueError):
        q.get(timeout=-0.5)


def test_timeouts():
    q = ClosableQueue(1)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    with pytest.raises(TimeoutError):
        q.get(timeout=0.02)
    q.put("a", timeout=0)
    with pytest.raises(TimeoutError):
        q.put("b", timeout=0)
    with pytest.raises(TimeoutError):
        q.put("b", timeout=0.02)
    assert len(q) == 1 and q.get(timeout=0) == "a"


def test_close_drains_then_raises():
    q = ClosableQueue(5)
    q.put(1)
    q.put(2)
    q.close()
    q.close()
    assert q.closed
    with pytest.raises(Closed):
        q.put(3)
    assert q.get() == 1 and q.get(timeout=0) == 2
    with pytest.raises(Closed):
        q.get()
    with pytest.raises(Closed):
        q.get(timeout=0)


def test_iteration_stops_at_close():
    q = ClosableQueue(10)
    for i in range(4):
        q.put(i)
    q.close()
    assert list(q) == [0, 1, 2, 3]


def test_blocked_put_wakes_when_space_frees():
    q = ClosableQueue(1)
    q.put("first")
    thread, result = start(lambda: q.put("second"))
    wait_until(lambda: q.putters_waiting == 1, "the producer to block")
    assert q.get() == "first"
    join_all([thread])
    assert "error" not in result and q.get(timeout=0) == "second"
    assert q.putters_waiting == 0


def test_close_wakes_every_blocked_getter():
    q = ClosableQueue(2)
    workers = [start(q.get) for _ in range(4)]
    wait_until(lambda: q.getters_waiting == 4, "four consumers to block")
    q.close()
    join_all([t for t, _ in workers])
    assert all(isinstance(r.get("error"), Closed) for _, r in workers)
    assert q.getters_waiting == 0


def test_close_wakes_every_blocked_putter():
    q = ClosableQueue(1)
    q.put(0)
    workers = [start(lambda i=i: q.put(i, timeout=60)) for i in range(3)]
    wait_until(lambda: q.putters_waiting == 3, "three producers to block")
    q.close()
    join_all([t for t, _ in workers])
    assert all(isinstance(r.get("error"), Closed) for _, r in workers)
    assert q.get() == 0 and len(q) == 0


def test_pipeline_delivers_everything_once_in_order_per_producer():
    q = ClosableQueue(4)
    consumed = [[] for _ in range(3)]

    def producer(pid):
        return lambda: [q.put((pid, n)) for n in range(400)]

    def consumer(cid):
        def run():
            for item in q:
                consumed[cid].append(item)
                assert len(q) <= 4
        return run

    consumers = [start(consumer(c)) for c in range(3)]
    producers = [start(producer(p)) for p in range(3)]
    join_all([t for t, _ in producers])
    q.close()
    join_all([t for t, _ in consumers])
    for _, r in producers + consumers:
        assert "error" not in r, r["error"]
    everything = [item for items in consumed for item in items]
    assert sorted(everything) == [(p, n) for p in range(3) for n in range(400)]
    for items in consumed:
        for pid in range(3):
            seq = [n for p, n in items if p == pid]
            assert seq == sorted(seq)
