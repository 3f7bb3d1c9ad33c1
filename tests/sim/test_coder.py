"""The simulated coder's `per_task`: right or wrong drawn once per task (by seed and task id), not per write, so
every try of a task goes the same way; the ground truth of a stack whose pass^k equals its pass rate."""

import random

from soak.llm.tools import CODER_TOOLS
from soak.sim.reply import Planner
from soak.sim.scenario import Scenario
from soak.tasks.suites import load_builtin


def writes(per_task: bool, seed: int, tries: int = 5) -> dict[str, list[bool]]:
    """Per bank task, whether each of `tries` first writes was the reference, at p_correct 0.6."""
    tasks = load_builtin()
    scenario = Scenario.model_validate({"coder": {"p_correct": 0.6, "p_fix": 0.6, "per_task": per_task}})
    planner = Planner(scenario, tasks, seed=seed, engine="vllm")
    rng = random.Random(seed)
    found: dict[str, list[bool]] = {}
    for task in tasks:
        body = {"messages": [{"role": "user", "content": f"Task id: {task.id}\nWrite `{task.entry}`."}],
                "tools": CODER_TOOLS}
        found[task.id] = [bool(planner.plan(body, rng, [], 100_000).correct) for _ in range(tries)]
    return found


def test_per_task_makes_every_try_of_a_task_go_the_same_way_at_the_same_pass_rate():
    kept, fresh = writes(True, seed=3), writes(False, seed=3)
    assert all(len(set(tries)) == 1 for tries in kept.values())
    assert sum(len(set(tries)) > 1 for tries in fresh.values()) > len(fresh) / 2  # 1 - 0.6^5 - 0.4^5 = 0.91
    right = sum(tries[0] for tries in kept.values()) / len(kept)
    assert 0.4 < right < 0.8  # 60 bank tasks at 0.6: about 0.6 ± 0.06
    assert writes(True, seed=3) == kept  # keyed by seed and task: the same tasks every night of that seed
    assert writes(True, seed=4) != kept
