import threading
import time

import pytest

from solution import Cancelled, QueueFull, WorkQueue

# Every wait here is bounded so that a broken queue fails a test instead of hanging the run.
JOIN = 5.0


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


def shutdown_bounded(queue, **kwargs):
    thread = start(lambda: queue.shutdown(**kwargs))
    thread.join(JOIN)
    assert not thread.is_alive(), "shutdown did not return"


class Gate:
    """A job body that reports it started and then waits (boundedly) to be let go."""

    def __init__(self, value=None):
        self.started = threading.Event()
        self.release = threading.Event()
        self.value = value

    def __call__(self):
        self.started.set()
        self.release.wait(JOIN)
        return self.value


def test_validation():
    for workers, max_pending in [(0, 1), (1, 0), (-1, 5)]:
        with pytest.raises(ValueError):
            WorkQueue(workers, max_pending)


def test_results_args_and_exceptions():
    queue = WorkQueue(2, 10)
    assert queue.submit(lambda x, y=0: x * 2 + y, 20, y=2).result(timeout=JOIN) == 42
    error = KeyError("boom")

    def fail():
        raise error

    job = queue.submit(fail)
    with pytest.raises(KeyError) as info:
        job.result(timeout=JOIN)
    assert info.value is error
    assert job.done() and not job.cancelled()
    assert queue.submit(lambda: "still alive").result(timeout=JOIN) == "still alive"
    shutdown_bounded(queue)


def test_workers_are_daemon_threads():
    before = set(threading.enumerate())
    queue = WorkQueue(3, 1)
    queue.submit(lambda: None).result(timeout=JOIN)
    new = [t for t in threading.enumerate() if t not in before]
    assert new and all(t.daemon for t in new)
    shutdown_bounded(queue)


def test_result_timeout():
    queue = WorkQueue(1, 1)
    gate = Gate("late")
    job = queue.submit(gate)
    with pytest.raises(TimeoutError):
        job.result(timeout=0.05)
    assert not job.done()
    gate.release.set()
    assert job.result(timeout=JOIN) == "late"
    shutdown_bounded(queue)


def test_fifo_start_order_with_one_worker():
    queue = WorkQueue(1, 10)
    order = []
    gate = Gate()
    queue.submit(gate)
    assert gate.started.wait(JOIN)
    jobs = [queue.submit(order.append, i) for i in range(8)]
    gate.release.set()
    for job in jobs:
        job.result(timeout=JOIN)
    assert order == list(range(8))
    shutdown_bounded(queue)


def test_running_jobs_do_not_use_backlog_slots():
    queue = WorkQueue(1, 2)
    gate = Gate()
    running = queue.submit(gate)
    assert gate.started.wait(JOIN)
    wait_until(lambda: queue.pending == 0)
    b = queue.submit(lambda: "b", timeout=0)
    c = queue.submit(lambda: "c", timeout=0)
    assert (queue.running, queue.pending) == (1, 2)
    with pytest.raises(QueueFull):
        queue.submit(lambda: "d", timeout=0)
    began = time.monotonic()
    with pytest.raises(QueueFull):
        queue.submit(lambda: "d", timeout=0.1)
    assert time.monotonic() - began >= 0.09
    gate.release.set()
    assert [running.result(JOIN), b.result(JOIN), c.result(JOIN)] == [None, "b", "c"]
    shutdown_bounded(queue)


def test_cancel_pending_frees_its_slot():
    queue = WorkQueue(1, 2)
    gate = Gate()
    first = queue.submit(gate)
    assert gate.started.wait(JOIN)
    ran = []
    b = queue.submit(ran.append, "b", timeout=0)
    c = queue.submit(ran.append, "c", timeout=0)
    assert c.cancel() is True
    assert c.cancel() is True
    assert c.cancelled() and c.done()
    with pytest.raises(Cancelled):
        c.result(timeout=0)
    d = queue.submit(ran.append, "d", timeout=0)
    assert first.cancel() is False
    gate.release.set()
    d.result(timeout=JOIN)
    assert b.cancel() is False and not b.cancelled()
    assert ran == ["b", "d"]
    shutdown_bounded(queue)


def test_blocked_submit_proceeds_when_a_job_starts():
    queue = WorkQueue(1, 1)
    gate_a, gate_b = Gate("a"), Gate("b")
    a = queue.submit(gate_a)
    assert gate_a.started.wait(JOIN)
    b = queue.submit(gate_b, timeout=0)
    got = {}

    def blocked_submitter():
        got["job"] = queue.submit(lambda: "c", timeout=JOIN)

    thread = start(blocked_submitter)
    time.sleep(0.05)
    assert "job" not in got
    gate_a.release.set()
    assert gate_b.started.wait(JOIN)
    thread.join(JOIN)
    assert "job" in got and queue.pending == 1
    gate_b.release.set()
    assert [a.result(JOIN), b.result(JOIN), got["job"].result(JOIN)] == ["a", "b", "c"]
    shutdown_bounded(queue)


def test_workers_run_in_parallel():
    queue = WorkQueue(3, 3)
    barrier = threading.Barrier(3, timeout=JOIN)
    jobs = [queue.submit(barrier.wait) for _ in range(3)]
    assert sorted(job.result(timeout=JOIN) for job in jobs) == [0, 1, 2]
    shutdown_bounded(queue)


def test_done_callbacks():
    queue = WorkQueue(1, 5)
    seen = []
    gate = Gate(7)
    job = queue.submit(gate)

    def broken(_job):
        raise RuntimeError("callback bug")

    job.add_done_callback(broken)
    job.add_done_callback(lambda j: seen.append(("first", j.result(0))))
    gate.release.set()
    job.result(timeout=JOIN)
    wait_until(lambda: len(seen) == 1)
    job.add_done_callback(lambda j: seen.append(("late", j is job)))
    assert seen == [("first", 7), ("late", True)]
    blocker = Gate()
    queue.submit(blocker)
    pending = queue.submit(lambda: None)
    pending.add_done_callback(lambda j: seen.append(("cancelled", j.cancelled())))
    pending.cancel()
    assert seen[-1] == ("cancelled", True)
    blocker.release.set()
    assert queue.submit(lambda: "ok").result(timeout=JOIN) == "ok"
    shutdown_bounded(queue)


def test_shutdown_cancel_pending():
    queue = WorkQueue(1, 3)
    gate = Gate("done")
    running = queue.submit(gate)
    assert gate.started.wait(JOIN)
    pending = [queue.submit(lambda: "never") for _ in range(3)]
    errors = []

    def blocked_submitter():
        try:
            queue.submit(lambda: "x", timeout=JOIN)
        except RuntimeError as error:
            errors.append(error)

    thread = start(blocked_submitter)
    time.sleep(0.05)
    queue.shutdown(wait=False, cancel_pending=True)
    thread.join(JOIN)
    assert len(errors) == 1
    assert all(job.cancelled() for job in pending)
    with pytest.raises(RuntimeError):
        queue.submit(lambda: None)
    gate.release.set()
    assert running.result(timeout=JOIN) == "done"
    shutdown_bounded(queue)
    shutdown_bounded(queue, cancel_pending=True)


def test_shutdown_waits_for_pending_jobs():
    queue = WorkQueue(2, 10)
    finished = []

    def slow(i):
        time.sleep(0.01)
        finished.append(i)

    jobs = [queue.submit(slow, i) for i in range(10)]
    shutdown_bounded(queue)
    assert sorted(finished) == list(range(10))
    assert all(job.done() and not job.cancelled() for job in jobs)


def test_context_manager():
    results = []
    with WorkQueue(2, 4) as queue:
        for i in range(4):
            queue.submit(results.append, i, timeout=JOIN)
    assert sorted(results) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError):
        queue.submit(lambda: None)


def test_many_producers():
    queue = WorkQueue(4, 5)
    jobs = []
    guard = threading.Lock()
    errors = []

    def producer(base):
        try:
            for i in range(50):
                job = queue.submit(lambda x: x * x, base + i, timeout=JOIN)
                with guard:
                    jobs.append((base + i, job))
        except BaseException as error:
            errors.append(error)

    threads = [start(producer, 1000 * p) for p in range(8)]
    for thread in threads:
        thread.join(JOIN)
    assert errors == [] and len(jobs) == 400
    assert all(job.result(timeout=JOIN) == x * x for x, job in jobs)
    shutdown_bounded(queue)
