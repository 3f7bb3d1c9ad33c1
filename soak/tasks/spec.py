"""The task format: `task.toml`, `prompt.md`, `test_solution.py`, `reference.py` (and `wrong.py`)."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from soak.errors import BadInput
from soak.files import load_model

Difficulty = Literal["easy", "medium", "hard"]


class TaskMeta(BaseModel):
    """What `task.toml` holds."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    title: str = Field(min_length=1)
    difficulty: Difficulty
    tags: list[str] = Field(default_factory=list)
    entry: str = Field(default="solution.py", pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.py$")
    """File the coder must write; the tests import it as a module."""
    test_timeout_seconds: float = Field(default=60, gt=0)
    budget_seconds: float | None = Field(default=None, gt=0)
    """Overrides the run's per-task wall budget."""
    max_calls: int | None = Field(default=None, gt=0)
    """Overrides the run's per-task call cap."""


class TaskSpec(TaskMeta):
    """A loaded task: metadata plus the texts the harness needs. Never shown whole to a model."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(~canary)?$")
    """As in task.toml; a canary twin's ends in `~canary` (soak.tasks.canary), which no task folder can name."""
    suite: str
    prompt: str
    tests: dict[str, str]
    """Test file name -> source; copied fresh into the workspace before every test run."""
    support: dict[str, str] = Field(default_factory=dict)
    """Helper file name -> source: files the tests or the solution import that are neither (Exercism's
    `test_utils.py`, `files.editor`); written beside the tests before every run and read-only like them."""
    reference: str
    """A correct solution (the entry file's content)."""
    stub: str = ""
    """The entry file's starting content (Exercism ships stubs; our own tasks start empty)."""
    wrong: str | None = None
    """A plausible wrong solution that the tests must reject."""
    source_dir: Path | None = None
    skip: str = ""
    """Why the task is never run (e.g. a refactoring exercise whose stub already passes): `soak tasks list`
    shows it; the suite loaders leave skipped tasks out unless asked for them."""
    canary: str | None = None
    """A canary twin's mutation in words (what in which test was changed so no honest solution passes); None for
    an ordinary task."""

    @property
    def module(self) -> str:
        return self.entry.removesuffix(".py")


REQUIRED_FILES = ("task.toml", "prompt.md", "test_solution.py", "reference.py")


def load_task_dir(folder: Path, suite: str) -> TaskSpec:
    """Load one task folder in soak's own format; a malformed one names the file and the field."""
    folder = Path(folder)
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise BadInput(f"{folder / name}: missing (a task folder needs {', '.join(REQUIRED_FILES)})")
    toml_path = folder / "task.toml"
    meta = load_model(toml_path, TaskMeta, "task file")
    wrong = folder / "wrong.py"
    return TaskSpec(
        **meta.model_dump(),
        suite=suite,
        prompt=(folder / "prompt.md").read_text(),
        tests={"test_solution.py": (folder / "test_solution.py").read_text()},
        reference=(folder / "reference.py").read_text(),
        wrong=wrong.read_text() if wrong.is_file() else None,
        source_dir=folder,
    )
