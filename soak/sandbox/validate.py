"""`soak tasks list/validate`: show a suite, and prove each task can tell right from wrong."""

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from soak.sandbox.judge import judge
from soak.tasks.spec import TaskSpec


def print_task_table(tasks: list[TaskSpec]) -> None:
    table = Table("id", "difficulty", "tags", "suite", "title")
    for task in tasks:
        table.add_row(task.id, task.difficulty, ", ".join(task.tags), task.suite, task.title)
    console = Console()
    console.print(table)
    spread = Counter(task.difficulty for task in tasks)
    console.print(f"{len(tasks)} tasks: " + ", ".join(f"{spread[d]} {d}" for d in ("easy", "medium", "hard")))


def task_problems(task: TaskSpec) -> list[str]:
    """Why a task is unsound; empty when the reference passes and the stub and wrong.py fail."""
    problems = []
    reference = judge(task, task.reference)
    if reference.outcome != "pass":
        problems.append(f"reference {reference.outcome}: {reference.error_kind} {reference.error_tail[-300:]}")
    if judge(task, task.stub).outcome == "pass":
        problems.append("the untouched stub passes")
    if task.wrong is not None and judge(task, task.wrong).outcome == "pass":
        problems.append("wrong.py passes: the tests are toothless")
    return problems


def validate_tasks(tasks: list[TaskSpec], jobs: int = 2) -> bool:
    """Check every task in the sandbox, print a summary, return True when all are sound."""
    console = Console(stderr=True)
    broken: dict[str, list[str]] = {}
    with Progress(console=console, transient=True) as progress, ThreadPoolExecutor(max(1, jobs)) as pool:
        bar = progress.add_task("validating", total=len(tasks))
        for task, problems in zip(tasks, pool.map(task_problems, tasks), strict=True):
            progress.advance(bar)
            if problems:
                broken[task.id] = problems
    for task_id, problems in broken.items():
        console.print(f"[red]BROKEN[/red] {task_id}: " + "; ".join(problems), markup=True, highlight=False)
    console.print(f"{len(tasks) - len(broken)}/{len(tasks)} tasks sound")
    return not broken
