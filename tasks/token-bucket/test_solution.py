import pytest

from solution import TokenBucket


class FakeClock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


class FakeSleep:
    """Advances the fake clock by `fraction` of each requested sleep (1.0 = exact, 0.5 = wakes early)."""

    def __init__(self, clock, fraction=1.0):
        self.clock = clock
        self.fraction = fraction
        self.calls = []

    def __call__(self, seconds):
        assert seconds > 0, f"slept for {seconds}"
        assert len(self.calls) < 100, "too many sleeps"
        self.calls.append(seconds)
        self.clock.t += seconds * self.fraction


def make(rate=2.0, capacity=4.0, initial=None, fraction=1.0):
    clock = FakeClock()
    sleep = FakeSleep(clock, fraction)
    bucket = TokenBucket(rate, capacity, initial=initial, clock=clock, sleep=sleep)
    return bucket, clock, sleep


def test_validation():
    clock = FakeClock()
    for rate, capacity in [(0, 1), (-1, 1), (1, 0), (1, -2)]:
        with pytest.raises(ValueError):
            TokenBucket(rate, capacity, clock=clock)
    with pytest.raises(ValueError):
        TokenBucket(1, 2, initial=3, clock=clock)
    with pytest.raises(ValueError):
        TokenBucket(1, 2, initial=-0.5, clock=clock)
    bucket = TokenBucket(1, 2, clock=clock)
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError):
            bucket.try_consume(bad)
        with pytest.raises(ValueError):
            bucket.wait_time(bad)
        with pytest.raises(ValueError):
            bucket.consume(bad, timeout=1)
    with pytest.raises(ValueError):
        bucket.set_rate(0)
    assert bucket.rate == 1 and bucket.capacity == 2


def test_starts_full_and_allows_a_burst():
    bucket, clock, _ = make(rate=2, capacity=4)
    assert bucket.available() == 4
    assert [bucket.try_consume() for _ in range(5)] == [True, True, True, True, False]
    assert bucket.available() == 0


def test_refill_and_cap():
    bucket, clock, _ = make(rate=2, capacity=4, initial=0)
    clock.t += 0.25
    assert bucket.available() == 0.5
    assert not bucket.try_consume(1)
    clock.t += 0.25
    assert bucket.try_consume(1)
    clock.t += 3600
    assert bucket.available() == 4
    assert bucket.try_consume(4)
    assert not bucket.try_consume(0.5)


def test_failed_attempt_keeps_the_refill():
    bucket, clock, _ = make(rate=1, capacity=2, initial=0)
    clock.t += 0.5
    assert bucket.try_consume(1) is False
    clock.t += 0.5
    assert bucket.try_consume(1) is True
    for _ in range(3):
        clock.t += 0.25
        assert bucket.try_consume(1) is False
    clock.t += 0.25
    assert bucket.try_consume(1) is True


def test_fractional_tokens_and_tolerance():
    bucket, clock, _ = make(rate=0.1, capacity=1, initial=0)
    for _ in range(10):
        clock.t += 1
        bucket.available()
    assert bucket.try_consume(1)
    assert bucket.available() == 0
    bucket, clock, _ = make(rate=1, capacity=1, initial=1)
    assert bucket.try_consume(0.3)
    assert bucket.try_consume(0.3)
    assert bucket.try_consume(0.4)
    assert bucket.available() == 0


def test_wait_time_does_not_consume():
    bucket, clock, _ = make(rate=4, capacity=8, initial=1)
    assert bucket.wait_time(1) == 0.0
    assert bucket.wait_time(3) == 0.5
    assert bucket.wait_time(3) == 0.5
    clock.t += 0.25
    assert bucket.wait_time(3) == 0.25
    assert bucket.available() == 2
    clock.t += 0.25
    assert bucket.wait_time(3) == 0.0
    assert bucket.try_consume(3)


def test_clock_going_backwards():
    bucket, clock, _ = make(rate=1, capacity=10, initial=0)
    clock.t += 2
    assert bucket.available() == 2
    clock.t -= 1.5
    assert bucket.available() == 2
    clock.t += 1.5  # back where we were: nothing new was earned
    assert bucket.available() == 2
    clock.t += 1
    assert bucket.available() == 3


def test_consume_sleeps_exactly_as_needed():
    bucket, clock, sleep = make(rate=2, capacity=4, initial=0.5)
    assert bucket.consume(2) is True
    assert sleep.calls == [0.75]
    assert bucket.available() == 0
    assert bucket.consume(1, timeout=0.5) is True
    assert sleep.calls == [0.75, 0.5]


def test_consume_gives_up_at_once_when_deadline_too_close():
    bucket, clock, sleep = make(rate=1, capacity=4, initial=1)
    assert bucket.consume(3, timeout=1.5) is False
    assert sleep.calls == []
    assert bucket.available() == 1
    assert bucket.consume(1, timeout=0) is True
    assert bucket.consume(1, timeout=0) is False
    assert sleep.calls == []


def test_consume_handles_early_wakeups():
    bucket, clock, sleep = make(rate=1, capacity=4, initial=0, fraction=0.5)
    start = clock.t
    assert bucket.consume(2, timeout=5) is True
    assert clock.t - start >= 2 - 1e-6
    assert len(sleep.calls) > 1
    assert sleep.calls[0] == 2
    assert sleep.calls[1] == 1


def test_set_rate_credits_old_rate_first():
    bucket, clock, _ = make(rate=1, capacity=100, initial=0)
    clock.t += 4
    bucket.set_rate(10)
    assert bucket.rate == 10
    assert bucket.available() == 4
    clock.t += 0.5
    assert bucket.available() == 9
