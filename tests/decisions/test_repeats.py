"""How repeatable a stack is: pass^k, pass@k and flaky tasks from a real night's tasks.csv, against a hand
computation from the CSV itself."""

import csv
from math import comb
from pathlib import Path

import pytest

from soak.decisions import repeats
from soak.record.read import load_run
from soak.record.schema import MODEL_OUTCOMES
from soak.sim.scenario import Coder
from tests.helpers import EXERCISM_SUITE


def test_the_estimators_are_the_unbiased_ones():
    """Three tries, two passes: pass^1 2/3, pass^2 C(2,2)/C(3,2) = 1/3, pass^3 0; pass@2 1; nothing past n."""
    assert [repeats.pass_hat_k(3, 2, k) for k in (1, 2, 3, 4)] == [pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0,
                                                                  None]
    assert [repeats.pass_at_k(3, 2, k) for k in (1, 2, 3)] == [pytest.approx(2 / 3), 1.0, 1.0]
    assert repeats.pass_at_k(4, 1, 2) == 1 - comb(3, 2) / comb(4, 2)


def test_pass_hat_k_and_flaky_tasks_of_a_night_equal_a_hand_computation(fast_sim, data_dir, soak):
    """A night of six cycles over two tasks, the coder right half the time with no revision: per task the tries and
    passes counted from tasks.csv by hand (model outcomes, canaries apart), pass^k as C(c, k) / C(n, k) averaged over
    the tasks, flaky where a task both passed and failed."""
    _, url = fast_sim(coder=Coder(p_correct=0.5, p_fix=0.0))
    night = soak("run", "--base-url", url, "--model", "soak-sim", "--suite", EXERCISM_SUITE, "--tasks", "12",
                 "--concurrency", "2", "--quiet", "--run-id", "repeats", "--seed", "5")
    assert night.exit_code == 0, night.output
    with Path(data_dir / "repeats" / "tasks.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["outcome"] in MODEL_OUTCOMES and not r["canary"]]
    by_task: dict[str, list[str]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row["outcome"])
    assert len(by_task) == 2 and all(len(tries) == 6 for tries in by_task.values()), by_task
    counts = {task: (len(tries), tries.count("pass")) for task, tries in by_task.items()}

    found = repeats.night(load_run(data_dir / "repeats").tasks)
    assert (found["tasks"], found["min_tries"], found["max_tries"]) == (2, 6, 6)
    for row in found["k"]:
        by_hand = sum(comb(c, row["k"]) / comb(n, row["k"]) for n, c in counts.values()) / len(counts)
        assert row["pass_hat_k"] == pytest.approx(by_hand)
        assert row["interval"][0] <= row["pass_hat_k"] <= row["interval"][1]
    assert [row["k"] for row in found["k"]] == [1, 2, 3, 4, 5, 6]
    assert {f["task_id"]: (f["tries"], f["passes"]) for f in found["flaky"]} == {
        task: (n, c) for task, (n, c) in counts.items() if 0 < c < n}
    per_task = repeats.per_task(load_run(data_dir / "repeats").tasks, 2)
    for task, (n, c) in counts.items():
        assert per_task.loc[task, "pass_hat_k"] == pytest.approx(comb(c, 2) / comb(n, 2))
        assert per_task.loc[task, "pass_at_k"] == pytest.approx(1 - comb(n - c, 2) / comb(n, 2))
