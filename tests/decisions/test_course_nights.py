"""Nights of known truth (soak.sim.nights) read back as `soak report` reads a run folder: a quiet night has the noise
it promises (tasks of their own difficulty, a heavy TTFT tail, restarts, a server that fills up at the start), a
change is there at its size from its onset and nowhere before, a non-streamed night has no TTFT, and a seed is a
night."""

import numpy as np
import pytest

from soak.record.read import load_run, time_span
from soak.sim.nights import GIB, START, Night, write

HOUR = 3600.0


def read(night: Night, tmp_path):
    run = load_run(write(night, tmp_path / f"night-{night.seed}"))
    assert not run.notes, run.notes
    return run


def test_a_quiet_night_is_noisy_the_way_real_ones_are(tmp_path):
    run = read(Night(2, 1000, seed=1), tmp_path)
    assert time_span(run) == (START, START + 2 * HOUR)
    assert 1500 < len(run.tasks) < 2500
    rates = run.tasks.assign(passed=run.tasks["outcome"] == "pass").groupby("task_id")["passed"].mean()
    assert rates.max() - rates.min() > 0.5, "tasks of their own difficulty, not one coin"
    ttft = run.calls["ttft_s"]
    assert ttft.quantile(0.999) > 4 * ttft.median(), "a heavy tail"
    gaps = np.diff(np.sort(run.tasks["started_at"].to_numpy()))
    assert gaps.max() > 0.02 * 2 * HOUR, "an idle stretch"
    rss = run.samples.sort_values("at")["value"].to_numpy()
    assert rss[0] < 0.5 * np.median(rss), "a server that fills up after it starts"
    restarts = run.events.loc[run.events["kind"] == "restart", "at"]
    for at in restarts:
        after = run.samples[(run.samples["at"] > at) & (run.samples["at"] < at + 20)]["value"]
        assert after.min() < 0.6 * np.median(rss), "a restart empties the server"


@pytest.mark.parametrize(("change", "size"), [("pass_rate", 0.3), ("ttft", 2.0), ("decode", 2.0), ("leak", 20.0)])
def test_a_change_is_there_at_its_size_from_its_onset(tmp_path, change, size):
    onset = 1.25 * HOUR
    run = read(Night(2, 2000, seed=2, change=change, size=size, onset_s=onset), tmp_path)
    cut = START + onset
    tasks, calls = run.tasks, run.calls
    if change == "pass_rate":
        passed = tasks["outcome"] == "pass"
        drop = passed[tasks["started_at"] < cut].mean() - passed[tasks["started_at"] >= cut].mean()
        assert drop == pytest.approx(size, abs=0.05)
    elif change in ("ttft", "decode"):
        column = "ttft_s" if change == "ttft" else "decode_tps"
        before = calls.loc[calls["started_at"] < cut, column].median()
        after = calls.loc[calls["started_at"] >= cut, column].median()
        assert (after / before if change == "ttft" else before / after) == pytest.approx(size, rel=0.1)
    else:
        rss = run.samples
        late = rss[rss["at"] > cut + 0.5 * HOUR]
        slope = np.polyfit(late["at"], late["value"], 1)[0] * 60 / 1e6
        assert slope == pytest.approx(size, rel=0.2)
        early = rss[(rss["at"] > START + 0.5 * HOUR) & (rss["at"] < cut)]
        assert abs(np.polyfit(early["at"], early["value"], 1)[0] * 60 / 1e6) < 1, "nothing leaks before the onset"


def test_a_night_not_streamed_has_durations_only(tmp_path):
    calls = read(Night(1, 200, seed=3, streamed=False), tmp_path).calls
    assert calls["ttft_s"].isna().all() and calls["decode_tps"].isna().all()
    assert (calls["duration_s"] > 0).all() and not calls["stream"].any()


def test_a_seed_is_a_night(tmp_path):
    first = write(Night(1, 300, seed=4), tmp_path / "a")
    again = write(Night(1, 300, seed=4), tmp_path / "b")
    other = write(Night(1, 300, seed=5), tmp_path / "c")
    for name in ("tasks.csv", "calls.csv", "samples.csv", "events.csv"):
        assert (first / name).read_bytes() == (again / name).read_bytes()
    assert (first / "calls.csv").read_bytes() != (other / "calls.csv").read_bytes()
    assert load_run(first).samples["value"].max() < 5 * GIB
