import random

import pytest

from solution import Stopwatch


class FakeClock:
    def __init__(self, now=0.0):
        self.now = now
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.now


def test_new_stopwatch_is_idle():
    clock = FakeClock(100.0)
    sw = Stopwatch(clock)
    assert clock.calls == 0
    assert sw.elapsed == 0.0
    assert sw.laps == []
    assert sw.running is False


def test_start_stop_elapsed():
    clock = FakeClock(10.0)
    sw = Stopwatch(clock)
    sw.start()
    assert sw.running
    clock.now = 13.5
    assert sw.elapsed == pytest.approx(3.5)
    clock.now = 15.0
    assert sw.stop() == pytest.approx(5.0)
    assert not sw.running


def test_paused_time_not_counted():
    clock = FakeClock(0.0)
    sw = Stopwatch(clock)
    sw.start()
    clock.now = 5.0
    sw.stop()
    clock.now = 20.0
    assert sw.elapsed == pytest.approx(5.0)
    sw.start()
    clock.now = 22.0
    assert sw.stop() == pytest.approx(7.0)
    clock.now = 1000.0
    assert sw.elapsed == pytest.approx(7.0)


def test_laps_exclude_paused_time():
    clock = FakeClock(0.0)
    sw = Stopwatch(clock)
    sw.start()
    clock.now = 2.0
    assert sw.lap() == pytest.approx(2.0)
    clock.now = 3.0
    sw.stop()
    clock.now = 10.0
    sw.start()
    clock.now = 11.0
    assert sw.lap() == pytest.approx(2.0)
    clock.now = 11.5
    assert sw.lap() == pytest.approx(0.5)
    assert sw.laps == pytest.approx([2.0, 2.0, 0.5])


def test_first_lap_counts_from_first_start_after_pause():
    clock = FakeClock(50.0)
    sw = Stopwatch(clock)
    sw.start()
    clock.now = 51.0
    sw.stop()
    clock.now = 60.0
    sw.start()
    clock.now = 62.0
    assert sw.lap() == pytest.approx(3.0)


def test_laps_property_is_a_copy():
    clock = FakeClock()
    sw = Stopwatch(clock)
    sw.start()
    clock.now = 1.0
    sw.lap()
    laps = sw.laps
    laps.append(99.0)
    assert sw.laps == pytest.approx([1.0])


def test_reset():
    clock = FakeClock()
    sw = Stopwatch(clock)
    sw.start()
    clock.now = 4.0
    sw.lap()
    sw.reset()
    assert not sw.running and sw.elapsed == 0.0 and sw.laps == []
    sw.reset()
    clock.now = 10.0
    sw.start()
    clock.now = 13.0
    assert sw.lap() == pytest.approx(3.0)
    assert sw.elapsed == pytest.approx(3.0)


def test_state_errors_change_nothing():
    clock = FakeClock()
    sw = Stopwatch(clock)
    with pytest.raises(RuntimeError):
        sw.stop()
    with pytest.raises(RuntimeError):
        sw.lap()
    sw.start()
    clock.now = 2.0
    with pytest.raises(RuntimeError):
        sw.start()
    clock.now = 3.0
    assert sw.elapsed == pytest.approx(3.0)
    sw.stop()
    with pytest.raises(RuntimeError):
        sw.stop()
    with pytest.raises(RuntimeError):
        sw.lap()
    assert sw.laps == []
    assert sw.elapsed == pytest.approx(3.0)


def test_context_manager():
    clock = FakeClock(1.0)
    with Stopwatch(clock) as sw:
        assert sw.running
        clock.now = 4.0
    assert not sw.running
    assert sw.elapsed == pytest.approx(3.0)
    other = Stopwatch(clock)
    with pytest.raises(KeyError):
        with other:
            clock.now = 6.0
            raise KeyError("boom")
    assert not other.running
    assert other.elapsed == pytest.approx(2.0)


def test_random_sessions_against_model():
    rng = random.Random(42)
    for _ in range(50):
        clock = FakeClock(rng.uniform(0, 100))
        sw = Stopwatch(clock)
        running = False
        total = 0.0
        since_lap = 0.0
        laps = []
        for _ in range(30):
            dt = rng.choice([0.0, 0.25, 1.0, 3.5])
            clock.now += dt
            if running:
                total += dt
                since_lap += dt
            action = rng.choice(["start", "stop", "lap", "check"])
            if action == "start" and not running:
                sw.start()
                running = True
            elif action == "stop" and running:
                assert sw.stop() == pytest.approx(total)
                running = False
            elif action == "lap" and running:
                assert sw.lap() == pytest.approx(since_lap)
                laps.append(since_lap)
                since_lap = 0.0
            assert sw.elapsed == pytest.approx(total)
            assert sw.running == running
        assert sw.laps == pytest.approx(laps)
