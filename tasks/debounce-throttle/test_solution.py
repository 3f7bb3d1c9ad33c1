import pytest

from solution import Debouncer, Throttler


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))


def make_debouncer(wait=1.0, max_wait=None):
    clock, rec = FakeClock(), Recorder()
    return clock, rec, Debouncer(rec, wait, clock, max_wait=max_wait)


def test_debounce_fires_after_quiet_period_with_latest_args():
    clock, rec, d = make_debouncer()
    d(1)
    clock.now = 0.5
    d(2, k="x")
    assert d.pending and rec.calls == []
    clock.now = 1.2
    assert d.poll() is False
    clock.now = 1.5
    assert d.poll() is True
    assert rec.calls == [((2,), {"k": "x"})]
    assert not d.pending and d.poll() is False


def test_every_call_restarts_the_wait():
    clock, rec, d = make_debouncer(wait=1.0)
    for t in [0, 0.75, 1.5, 2.25]:
        clock.now = t
        d(t)
        assert d.poll() is False
    clock.now = 3.0
    assert d.poll() is False
    clock.now = 3.25
    assert d.poll() is True
    assert rec.calls == [((2.25,), {})]


def test_max_wait_caps_the_delay():
    clock, rec, d = make_debouncer(wait=1.0, max_wait=2.5)
    for t in [0, 0.75, 1.5, 2.25]:
        clock.now = t
        d(t)
        assert d.poll() is False
    clock.now = 2.5
    assert d.poll() is True
    assert rec.calls == [((2.25,), {})]
    clock.now = 2.75
    d("next burst")
    clock.now = 3.5
    assert d.poll() is False
    clock.now = 3.75
    assert d.poll() is True
    assert rec.calls[-1] == (("next burst",), {})


def test_flush_and_cancel():
    clock, rec, d = make_debouncer()
    assert d.flush() is False
    d("a")
    assert d.flush() is True and rec.calls == [(("a",), {})]
    d("b")
    d.cancel()
    assert not d.pending
    clock.now = 10
    assert d.poll() is False and d.flush() is False
    assert rec.calls == [(("a",), {})]


def test_flush_starts_new_burst_for_max_wait():
    clock, rec, d = make_debouncer(wait=1.0, max_wait=2.0)
    d(1)
    clock.now = 1.5
    d.flush()
    d(2)
    clock.now = 2.25
    d(3)
    clock.now = 3.0
    assert d.poll() is False
    clock.now = 3.25
    assert d.poll() is True
    assert rec.calls == [((1,), {}), ((3,), {})]


def test_debouncer_argument_validation():
    clock, rec = FakeClock(), Recorder()
    with pytest.raises(ValueError):
        Debouncer(rec, 0, clock)
    with pytest.raises(ValueError):
        Debouncer(rec, 2, clock, max_wait=1)
    Debouncer(rec, 2, clock, max_wait=2)


def test_pending_cleared_before_func_runs():
    clock = FakeClock()

    def boom(*_):
        raise RuntimeError("boom")

    d = Debouncer(boom, 1, clock)
    d()
    clock.now = 5
    with pytest.raises(RuntimeError):
        d.poll()
    assert not d.pending and d.poll() is False
    t = Throttler(boom, 1, clock)
    with pytest.raises(RuntimeError):
        t()
    assert not t.pending
    assert t("again") is False
    clock.now = 6
    with pytest.raises(RuntimeError):
        t.poll()
    assert not t.pending


def test_throttle_leading_and_trailing():
    clock, rec = FakeClock(), Recorder()
    t = Throttler(rec, 1.0, clock)
    assert t("a") is True
    clock.now = 0.25
    assert t("b") is False
    clock.now = 0.5
    assert t("c", x=1) is False
    assert t.pending
    assert t.poll() is False
    clock.now = 1.0
    assert t.poll() is True
    assert rec.calls == [(("a",), {}), (("c",), {"x": 1})]
    clock.now = 1.5
    assert t("d") is False
    clock.now = 2.0
    assert t("e") is True
    assert not t.pending and t.poll() is False
    assert rec.calls[-1] == (("e",), {})
    assert len(rec.calls) == 3


def test_throttle_interval_counts_from_last_invocation():
    clock, rec = FakeClock(), Recorder()
    t = Throttler(rec, 1.0, clock)
    t(0)
    clock.now = 0.5
    t(1)
    clock.now = 1.75
    assert t.poll() is True
    clock.now = 2.5
    assert t(2) is False
    clock.now = 2.75
    assert t(3) is True
    assert [c[0][0] for c in rec.calls] == [0, 1, 3]


def test_throttler_argument_validation():
    with pytest.raises(ValueError):
        Throttler(Recorder(), 0, FakeClock())
    with pytest.raises(ValueError):
        Throttler(Recorder(), -1, FakeClock())
