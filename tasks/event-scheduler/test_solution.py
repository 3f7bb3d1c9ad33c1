import pytest

from solution import Scheduler


class FakeClock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


def setup():
    clock = FakeClock(100.0)
    return clock, Scheduler(clock), []


def test_one_shot_runs_when_due_inclusive():
    clock, s, log = setup()
    s.call_later(5, lambda: log.append("a"))
    assert s.next_due() == 105.0 and len(s) == 1
    clock.now = 104.999
    assert s.run_due() == 0 and log == []
    clock.now = 105.0
    assert s.run_due() == 1 and log == ["a"]
    assert s.run_due() == 0 and log == ["a"]
    assert len(s) == 0 and s.next_due() is None


def test_order_by_due_then_queue_order():
    clock, s, log = setup()
    s.call_later(3, lambda: log.append("c3"))
    s.call_later(1, lambda: log.append("a1"))
    s.call_later(3, lambda: log.append("d3"))
    s.call_later(1, lambda: log.append("b1"))
    s.call_later(0, lambda: log.append("z0"))
    clock.now = 110
    assert s.run_due() == 5
    assert log == ["z0", "a1", "b1", "c3", "d3"]


def test_cancel():
    clock, s, log = setup()
    h1 = s.call_later(1, lambda: log.append(1))
    h2 = s.call_later(2, lambda: log.append(2))
    assert s.cancel(h1) is True
    assert s.cancel(h1) is False
    assert s.cancel(12345) is False
    assert s.next_due() == 102 and len(s) == 1
    clock.now = 200
    s.run_due()
    assert log == [2]
    assert s.cancel(h2) is False


def test_reschedule_and_requeue_order():
    clock, s, log = setup()
    h = s.call_later(1, lambda: log.append("moved"))
    s.call_later(5, lambda: log.append("other"))
    assert s.reschedule(h, 5) is True
    assert s.next_due() == 105
    clock.now = 105
    s.run_due()
    assert log == ["other", "moved"]
    assert s.reschedule(h, 1) is False


def test_repeating_without_drift_and_skipping_missed_runs():
    clock, s, log = setup()
    h = s.call_every(10, lambda: log.append(clock.now))
    assert s.next_due() == 110
    clock.now = 113
    assert s.run_due() == 1
    assert s.next_due() == 120
    clock.now = 155
    assert s.run_due() == 1
    assert s.next_due() == 160
    clock.now = 160
    s.run_due()
    assert s.next_due() == 170
    assert log == [113, 155, 160]
    assert s.cancel(h) is True and len(s) == 0
    clock.now = 1000
    assert s.run_due() == 0


def test_reschedule_repeating():
    clock, s, log = setup()
    h = s.call_every(10, lambda: log.append(clock.now))
    assert s.reschedule(h, 3)
    clock.now = 103
    s.run_due()
    assert s.next_due() == 113
    assert log == [103]


def test_events_added_during_run_wait_for_next_call():
    clock, s, log = setup()

    def spawner():
        log.append("spawner")
        s.call_later(0, lambda: log.append("child"))

    s.call_later(0, spawner)
    clock.now = 100
    assert s.run_due() == 1
    assert log == ["spawner"]
    assert s.run_due() == 1
    assert log == ["spawner", "child"]


def test_callback_cancels_a_later_due_event():
    clock, s, log = setup()
    victim = {}
    s.call_later(1, lambda: (log.append("killer"), s.cancel(victim["h"])))
    victim["h"] = s.call_later(2, lambda: log.append("victim"))
    s.call_later(3, lambda: log.append("survivor"))
    clock.now = 150
    assert s.run_due() == 2
    assert log == ["killer", "survivor"]


def test_repeating_callback_reschedules_itself():
    clock, s, log = setup()
    box = {}

    def again():
        log.append(clock.now)
        s.reschedule(box["h"], 0)

    box["h"] = s.call_every(50, again)
    assert s.reschedule(box["h"], 0)
    assert s.run_due() == 1
    assert len(s) == 1
    assert s.run_due() == 1
    assert log == [100.0, 100.0]


def test_exception_propagates_and_rest_stays_pending():
    clock, s, log = setup()

    def boom():
        raise RuntimeError("boom")

    s.call_later(1, lambda: log.append("first"))
    s.call_later(2, boom)
    s.call_later(3, lambda: log.append("third"))
    r = s.call_every(2.5, boom)
    clock.now = 103
    with pytest.raises(RuntimeError):
        s.run_due()
    assert log == ["first"]
    assert len(s) == 2
    s.cancel(r)
    assert s.run_due() == 1
    assert log == ["first", "third"]


def test_invalid_arguments():
    clock, s, log = setup()
    with pytest.raises(ValueError):
        s.call_later(-1, lambda: None)
    with pytest.raises(ValueError):
        s.call_every(0, lambda: None)
    with pytest.raises(ValueError):
        s.call_every(-2, lambda: None)
    h = s.call_later(1, lambda: None)
    with pytest.raises(ValueError):
        s.reschedule(h, -0.5)


def test_handles_unique():
    clock, s, log = setup()
    handles = {s.call_later(i % 3, lambda: None) for i in range(50)} | {s.call_every(1, lambda: None) for _ in range(5)}
    assert len(handles) == 55 and len(s) == 55


def test_clock_read_once_per_run():
    clock, s, log = setup()
    s.call_later(1, lambda: setattr(clock, "now", clock.now + 100))
    s.call_later(50, lambda: log.append("late"))
    clock.now = 101
    assert s.run_due() == 1
    assert log == []
    assert s.run_due() == 1
    assert log == ["late"]
