"""Every task can tell right from wrong: the reference passes, the stub and wrong.py fail, in the sandbox."""

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from soak.sandbox.validate import task_problems
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import load_suites

BUILTIN = load_suites("builtin")


def test_bank_size_and_spread():
    spread = Counter(task.difficulty for task in BUILTIN)
    assert len(BUILTIN) >= 60 and spread["hard"] >= 15 and min(spread.values()) >= 15
    assert all(task.wrong for task in BUILTIN), "every built-in task keeps a plausible wrong.py"


def broken_tasks(tasks: list[TaskSpec]) -> dict[str, list[str]]:
    # Three at a time: sandbox runs are subprocesses, and the concurrency tasks' wrong.py mostly wait out timeouts.
    with ThreadPoolExecutor(3) as pool:
        return {t.id: p for t, p in zip(tasks, pool.map(task_problems, tasks), strict=True) if p}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_builtin_task_is_sound():
    """Reference, stub, wrong.py, always-equal objects and the canary of each of the 60 tasks."""
    assert broken_tasks(BUILTIN) == {}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_seeded_sample_of_the_humaneval_suite_is_sound():
    """HumanEval is a fixed, pinned dataset, checked whole by `soak tasks validate --suite humaneval` (all 164 were
    sound when its loader was written); CI checks a fixed sample of 48 and its canaries to stay within its time."""
    tasks = load_suites("humaneval")
    assert len(tasks) == 164 and broken_tasks(random.Random(0).sample(tasks, 48)) == {}
