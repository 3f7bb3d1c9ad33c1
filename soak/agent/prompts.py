"""What both drivers say to the model: the task as an attempt opens and the real error as a revision round starts."""

from soak.sandbox.judge import Verdict, tail
from soak.tasks.spec import TaskSpec


def opening(task: TaskSpec) -> str:
    """The task as the first message of an attempt: its prompt, stub, entry file and module. Not its id: that helps
    nobody solve it and is a key to search the disk for the task's folder with."""
    stub = f"\n\nStarting point for {task.entry}:\n```python\n{task.stub}\n```" if task.stub else ""
    return (
        f"{task.prompt.strip()}{stub}\n\n"
        f"Write the solution to `{task.entry}` in the workspace; the tests import it as module `{task.module}`."
    )


def revision(verdict: Verdict, entry: str, ask: str = "") -> str:
    """The message that starts a revision round: the real error tail of the tests."""
    return (
        f"The tests failed ({verdict.tests_passed}/{verdict.tests_total} passed, {verdict.error_kind}):\n"
        f"{tail(verdict.error_tail)}\n\nThe tests are correct, fix the code in {entry}.{ask}"
    )
