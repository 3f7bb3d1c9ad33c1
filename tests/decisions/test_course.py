"""The course of the night on records of a known shape: a step in latency and one in quality found where they were
set and named in the verdict, a slow leak read as a drift, a steady night held over twenty seeds, a short night not
judged. (The same detector on real sim nights: tests/night/test_course_night.py.)"""

import numpy as np
import pandas as pd
import pytest

from soak.decisions.course import clock, course, degraded, said, window_width
from soak.decisions.drift import UNSTREAMED, Finding
from soak.decisions.sight import unseen
from soak.record.schema import CallRow, EventRow, SampleRow, TaskRow

START = 1_767_225_600.0  # a night from 22:00 local time or so; only offsets matter
HOURS = 2.0


def night(seed: int, pass_rates: tuple[float, float] = (0.7, 0.7), ttfts: tuple[float, float] = (0.2, 0.2),
          cut_s: float = 3600.0, rss: tuple[float, float] = (2.0, 2.0), leak_from_s: float = 0.0,
          attempts: int = 720, streamed: bool = True, rss_points: tuple[tuple[float, float], ...] = ()) -> dict:
    """`attempts` spread evenly over the night, each a pass with the rate of its side of `cut_s`, three calls each
    with a lognormal TTFT around that side's figure (not `streamed`: only the call's duration, TTFT + 0.5 s); the
    server's RSS (GiB) flat until `leak_from_s`, then a line from one figure to the other, or through `rss_points`
    ((offset s, GiB) pairs)."""
    rng = np.random.default_rng(seed)
    length = HOURS * 3600
    started = START + np.sort(rng.uniform(0, length, attempts))
    tasks, calls = [], []
    for n, at in enumerate(started):
        after = int(at - START >= cut_s)
        outcome = "pass" if rng.random() < pass_rates[after] else "fail"
        tasks.append(TaskRow(run_id="r", cycle=n // 40 + 1, task_id=f"t{n % 40}", suite="builtin", started_at=at,
                             ended_at=at + 5, duration_s=5, outcome=outcome).model_dump())
        for index in range(3):
            ttft = ttfts[int(at + index - START >= cut_s)] * float(rng.lognormal(0, 0.25))
            calls.append(CallRow(run_id="r", task_id=f"t{n % 40}", cycle=n // 40 + 1, call_index=index, role="coder",
                                 endpoint="e", model="m", stream=streamed, started_at=at + index,
                                 ttft_s=ttft if streamed else None, duration_s=ttft + 0.5,
                                 decode_tps=100 * float(rng.lognormal(0, 0.1)) if streamed else None,
                                 prompt_tokens=1000, cached_tokens=600, completion_tokens=50).model_dump())
    times = np.arange(START, START + length, 30.0)
    points = rss_points or ((0, rss[0]), (leak_from_s, rss[0]), (length, rss[1]))
    shape = np.interp(times, [START + at for at, _ in points], [gib for _, gib in points])
    resident = shape * 2**30 + rng.normal(0, 20 * 2**20, len(times))
    samples = [SampleRow(run_id="r", at=at, source="server:sim", metric="process_resident_memory_bytes",
                         value=value).model_dump() for at, value in zip(times, resident, strict=True)]
    return {"tasks": pd.DataFrame(tasks, columns=list(TaskRow.model_fields)),
            "calls": pd.DataFrame(calls, columns=list(CallRow.model_fields)), "samples": pd.DataFrame(samples),
            "events": pd.DataFrame(columns=list(EventRow.model_fields)), "start": START, "end": START + length}


def test_windows_cut_a_night_into_twelve_to_twenty_four():
    for seconds in (300, 600, 3600, 8 * 3600, 12 * 3600):
        assert 12 <= seconds / window_width(seconds) <= 24, seconds


def test_a_step_in_latency_and_one_in_quality_are_found_where_set_and_named_first():
    """TTFT quadruples from 40 min, the pass rate halves from 70 min: each change lands within one window of its time
    and the verdict names both, latency first."""
    latency = night(1, ttfts=(0.2, 0.8), cut_s=2400)
    quality = night(1, pass_rates=(0.8, 0.4), cut_s=4200)
    both = {**latency, "tasks": quality["tasks"]}
    found = course(**both)
    width = found["window_s"]
    by_measure = {f["measure"]: f for f in found["findings"]}
    assert set(by_measure) == {"ttft_p95", "pass_rate"}, found["findings"]
    assert abs(by_measure["ttft_p95"]["at_s"] - 2400) <= width
    assert abs(by_measure["pass_rate"]["at_s"] - 4200) <= width
    assert by_measure["ttft_p95"]["after"] / by_measure["ttft_p95"]["before"] > 3
    assert found["held"] is False
    verdict = found["verdict"]
    assert verdict.startswith(f"degraded from {by_measure['ttft_p95']['clock']}: TTFT p95 "), verdict
    assert "pass rate 8" in verdict and f"from {by_measure['pass_rate']['clock']}" in verdict, verdict


@pytest.mark.parametrize(("seed", "cut_s"), [(0, 2350), (1, 2370), (5, 2400 + 150)])
def test_a_step_inside_a_window_is_one_change_not_a_drift(seed: int, cut_s: float):
    """A step rarely falls on a window's edge: the window it falls in is between the two levels. Still one change,
    dated within one window of its time, from level to level."""
    found = course(**night(seed, ttfts=(0.2, 0.8), cut_s=cut_s))
    [step] = found["findings"]
    assert (step["measure"], step["kind"]) == ("ttft_p95", "change")
    assert abs(step["at_s"] - cut_s) <= found["window_s"]
    assert step["after"] / step["before"] > 3
    assert found["verdict"].startswith(f"degraded from {step['clock']}: TTFT p95 ")


def test_a_slow_leak_is_a_drift_not_a_staircase():
    """Server RSS from 2 to 5 GiB in a straight line: one finding, a trend, +3 GiB."""
    found = course(**night(2, rss=(2.0, 5.0)))
    assert [(f["measure"], f["kind"]) for f in found["findings"]] == [("server_rss_bytes", "trend")]
    assert "server RSS +2." in found["verdict"] or "server RSS +3." in found["verdict"], found["verdict"]
    assert "(slow drift)" in found["verdict"] and found["verdict"].startswith("degraded over the night: ")
    assert found["findings"][0]["at_s"] == 0


def test_a_leak_that_sets_in_late_is_dated_and_sized_from_its_onset():
    """Flat at 2 GiB until 90 min, then a line to 3 GiB: a drift from within one window of 90 min, about +1 GiB from
    the onset window's mean to the last's (not the straight line through the whole night, which starts below 2 GiB)."""
    found = course(**night(3, rss=(2.0, 3.0), leak_from_s=5400))
    [leak] = found["findings"]
    assert (leak["measure"], leak["kind"]) == ("server_rss_bytes", "trend")
    assert abs(leak["at_s"] - 5400) <= found["window_s"], leak
    assert leak["before"] == pytest.approx(2 * 2**30, rel=0.05)
    assert leak["after"] - leak["before"] == pytest.approx(2**30, rel=0.2)
    assert found["verdict"] == f"degraded from {leak['clock']}: {leak['said']} (slow drift)"


def test_a_steady_night_raises_no_alarm_over_twenty_seeds():
    """The penalty and the two gates (a difference beyond chance, of a size that matters): at most one false alarm
    in twenty steady nights."""
    alarms = [course(**night(seed))["findings"] for seed in range(20)]
    assert sum(bool(found) for found in alarms) <= 1, [a for a in alarms if a]
    held = course(**night(0))
    assert held["verdict"] == "held up for 2 h 00 min (no change beyond noise in quality, latency or memory; would " \
                              f"have seen: {', '.join(s['said'] for s in held['could_see'].values())} or more)"


def test_a_held_night_says_what_it_could_have_seen_and_fewer_attempts_see_less():
    """Per measure, the smallest change the night's own noise and attempts would have shown: 60 attempts in two hours
    could not have seen what 2,000 could, and both say so in the verdict."""
    few, many = course(**night(4, attempts=60)), course(**night(4, attempts=2000))
    assert few["held"] is many["held"] is True
    assert set(few["could_see"]) == set(many["could_see"]) == {"pass_rate", "ttft_p95", "decode_tps",
                                                               "server_rss_bytes"}
    assert few["could_see"]["pass_rate"]["size"] > many["could_see"]["pass_rate"]["size"] + 0.1
    assert many["could_see"]["pass_rate"]["size"] >= 0.15, "never below the size that matters"
    assert few["could_see"]["ttft_p95"]["size"] > many["could_see"]["ttft_p95"]["size"] >= 1.25
    for found in (few, many):
        seen = found["could_see"]
        assert f"pass rate −{100 * seen['pass_rate']['size']:.0f} points" in found["verdict"]
        assert f"TTFT p95 ×{seen['ttft_p95']['size']:.2f}" in found["verdict"]
        assert f"decode tok/s ÷{seen['decode_tps']['size']:.2f}" in found["verdict"]
        assert "a server RSS leak of " in found["verdict"]


def test_calls_not_streamed_are_timed_by_their_duration():
    """Without TTFT or decode speed (a server that does not stream), a slowdown shows in the calls' duration, and
    the verdict says which latency it read."""
    slowed = course(**night(5, ttfts=(0.2, 0.8), cut_s=2400, streamed=False))
    assert slowed["latency"] == ["duration_p95", "s_per_token"]
    steps = [f for f in slowed["findings"] if f["degrades"]]
    assert {f["measure"] for f in steps} == {"duration_p95", "s_per_token"}
    assert all(abs(f["at_s"] - 2400) <= slowed["window_s"] for f in steps)
    step = steps[0]
    assert slowed["verdict"].startswith(f"degraded from {step['clock']}: call duration p95 0.")
    assert "the calls were not streamed" in slowed["verdict"]
    quiet = course(**night(5, streamed=False))
    assert quiet["held"] is True and "the calls were not streamed" in quiet["verdict"]
    assert "call duration p95 ×" in quiet["verdict"]


def test_memory_that_grows_several_fold_is_named_whatever_its_shape():
    """0.4 → 3 GiB in the first 4 minutes, then flat: growth, named, and the night held; the same growth that never
    levels off: a leak, and the night degraded. Never "no change in memory" with the growth unsaid."""
    ramp = course(**night(6, rss_points=((0, 0.4), (240, 3.0), (7200, 3.0))))
    assert ramp["held"] is True, ramp["verdict"]
    assert "memory; server RSS grew 0.4 → 3.0 GiB in the first 4 min, then held; would have seen" in ramp["verdict"]
    leak = course(**night(6, rss_points=((0, 0.4), (7200, 3.0))))
    assert leak["held"] is False
    assert leak["verdict"].startswith("degraded over the night: server RSS +2."), leak["verdict"]
    both = course(**night(6, rss_points=((0, 0.4), (240, 2.0), (3600, 2.0), (7200, 3.0))))
    assert both["held"] is False and "server RSS grew 0.4 → 3.0 GiB in the first" not in both["verdict"]
    assert "server RSS grew 0.4 → 2." in both["verdict"] and "(slow drift)" in both["verdict"], both["verdict"]


@pytest.mark.parametrize("attempts", [0, 3])
def test_a_night_too_short_to_judge_says_so(attempts):
    found = course(**night(3, attempts=attempts))
    assert found["held"] is None and found["verdict"].startswith("too short to judge its course")


def test_a_night_that_held_blind_is_no_evidence_against_one_that_degraded_by_less():
    """60 attempts that held could not have seen the 25-point drop 2,000 attempts found: the caveat `soak compare`
    and `soak sweep` print says so, naming both figures; a night that could have seen it gets no caveat."""
    blind, sharp = course(**night(7, attempts=60)), course(**night(8, attempts=2000))
    dropped = course(**night(7, attempts=2000, pass_rates=(0.7, 0.45)))
    [drop] = [f for f in dropped["findings"] if f["degrades"]]
    assert blind["held"] is sharp["held"] is True and dropped["held"] is False
    assert blind["could_see"]["pass_rate"]["size"] > drop["size"] > sharp["could_see"]["pass_rate"]["size"]
    caveat = unseen(blind, dropped)
    assert caveat.startswith(f"held, but would not have seen {drop['said']} (it would have seen: pass rate −")
    assert caveat.endswith("holding is no evidence it is better")
    assert unseen(sharp, dropped) == unseen(dropped, blind) == ""


def test_a_recovery_is_only_a_return_to_where_the_measure_was():
    """A slowdown that eases but stays severalfold is not "recovered" (a real embedded night slowed by CPU-bound
    processes: 0.07 → 0.63 s per completion token, then 0.16 while they still ran); a return to within what matters
    of the level before it is."""
    per_token = UNSTREAMED[1]
    slowed = Finding(per_token, "change", 6, 0.07, 0.63, 1e-6)
    eased = Finding(per_token, "change", 8, 0.63, 0.16, 1e-5)
    back = Finding(per_token, "change", 8, 0.63, 0.08, 1e-5)
    assert degraded([slowed, eased], [], START, 15) == f"degraded from {clock(START + 90, 15)}: {said(slowed)}"
    assert degraded([slowed, back], [], START, 15).endswith(f"; recovered from {clock(START + 120, 15)}")
