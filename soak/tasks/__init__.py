"""Tasks: the format, the suite loaders and validation."""

from soak.tasks.spec import TaskSpec, load_task_dir
from soak.tasks.suites import find_task, load_suites

__all__ = ["TaskSpec", "find_task", "load_suites", "load_task_dir"]
