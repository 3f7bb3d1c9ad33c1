"""Checks of `soak export --format atif`: the export read back against the run folder it came from, and Harbor's own
ATIF model, the reference every trajectory is validated against, in a venv of its own.

Harbor (PyPI `harbor`, which defines the format) declares Python >= 3.12 and pins a job runner's worth of libraries
(litellm, supabase, fastmcp...) that its trajectory models never import: the venv gets the package without them,
pydantic at harbor's own floor, and a Python >= 3.12 where one is found (on PATH or built by pyenv), else this one
told to ignore harbor's floor (the models use nothing newer). About 20 s the first time, then cached beside the
agents in $SOAK_CACHE_DIR. `python -m tests.atif` prepares it (.ci/run does, before the tests); a test that finds it
missing prepares it too."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner

from soak.cli import main
from soak.export.atif import AtifIndex, Step, Trajectory
from soak.record.read import read_attempts, read_rows
from soak.record.schema import CallRow
from soak.venvs import CachedVenv

HARBOR = "harbor==0.26.0"
PYDANTIC = "pydantic>=2.14"
"""harbor 0.26.0's own requirement of pydantic."""
CACHE = Path(os.environ.get("SOAK_CACHE_DIR") or "/tmp/soak-engine-cache")
CHECK = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
validator = TrajectoryValidator()
print(json.dumps({path: validator.errors for path in sys.argv[1:] if not validator.validate(path)}))
"""


def runs_312(python: str | None) -> bool:
    """A Python that starts and is 3.12 or later (a pyenv shim of a version not selected does not start)."""
    if not python:
        return False
    check = [python, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
    return subprocess.run(check, capture_output=True).returncode == 0


def interpreter() -> tuple[str, list[str]]:
    """(a Python harbor supports, else this one; the pip flags it needs)."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [shutil.which("python3.13"), shutil.which("python3.12"),
             *(str(p) for p in sorted(pyenv.glob("versions/3.1[2-9]*/bin/python"), reverse=True))]
    newer = next((python for python in found if runs_312(python)), None)
    return (newer, []) if newer else (sys.executable, ["--ignore-requires-python"])


def reference_venv(cache: Path = CACHE) -> CachedVenv:
    """The venv with harbor in it, made once (a finished setup of the same pin is kept)."""
    venv = CachedVenv(cache / "atif-reference")
    if venv.read_stamp().get("package") == HARBOR and venv.python.is_file():
        return venv
    python, flags = interpreter()
    venv.stamp.unlink(missing_ok=True)
    shutil.rmtree(venv.venv, ignore_errors=True)
    venv.root.mkdir(parents=True, exist_ok=True)
    venv.log.write_text("")
    venv.step([python, "-m", "venv", str(venv.venv)], "creating the venv")
    venv.step([str(venv.python), "-m", "pip", "install", "-q", PYDANTIC], "installing pydantic")
    venv.step([str(venv.python), "-m", "pip", "install", "-q", "--no-deps", *flags, HARBOR], f"installing {HARBOR}")
    venv.stamp.write_text(json.dumps({"package": HARBOR, "python": python}))
    return venv


def reference_problems(folder: Path) -> dict[str, list[str]]:
    """Harbor's TrajectoryValidator on every trajectory of an export: {file: its errors} for each file it rejects."""
    paths = [folder / entry.path for entry in index_of(folder).trajectories]
    assert paths, f"nothing was exported to {folder}"
    done = subprocess.run([str(reference_venv().python), "-c", CHECK, *map(str, paths)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --- the export, read back ------------------------------------------------------------------------------------------


def export(run: Path, out: Path, *more: str) -> str:
    """`soak export RUN --format atif --out OUT`, which must succeed; its output."""
    result = CliRunner().invoke(main, ["export", str(run), "--format", "atif", "--out", str(out), *more])
    assert result.exit_code == 0, result.output
    return result.output


def index_of(folder: Path) -> AtifIndex:
    return AtifIndex.model_validate_json((folder / "index.json").read_text())


def read_back(folder: Path) -> Iterator[tuple[str, int, Trajectory]]:
    """(task id, cycle, trajectory) of each exported attempt, read with soak's own model of the format."""
    for entry in index_of(folder).trajectories:
        yield entry.task_id, entry.cycle, Trajectory.model_validate_json((folder / entry.path).read_text())


def every_step(trajectory: Trajectory) -> Iterator[Step]:
    yield from trajectory.steps
    for subagent in trajectory.subagent_trajectories or []:
        yield from every_step(subagent)


def soak_facts(part: Step | Trajectory) -> dict:
    return (part.extra or {}).get("soak", {})


def assert_calls_kept(run: Path, folder: Path) -> None:
    """Every calls.csv row of each exported attempt is the call of exactly one step, with its tokens as the step's
    metrics, and the root's totals are the attempt's tasks.csv totals."""
    rows = {(row.task_id, row.cycle): row for row in read_attempts(run / "tasks.csv")}
    calls = list(read_rows(run / "calls.csv", CallRow))
    exported = list(read_back(folder))
    assert {(task, cycle) for task, cycle, _ in exported} <= set(rows)
    for task, cycle, trajectory in exported:
        row = rows[(task, cycle)]
        expected = sorted((c.call_index, c.retry, c.prompt_tokens, c.completion_tokens, c.cached_tokens,
                           c.reasoning_tokens) for c in calls if (c.task_id, c.cycle, c.session) == (task, cycle,
                                                                                                   row.session))
        kept = []
        for step in every_step(trajectory):
            call = soak_facts(step).get("call")
            if call is None:
                continue
            metrics = step.metrics
            assert metrics is not None and step.llm_call_count == 1
            assert (metrics.prompt_tokens, metrics.completion_tokens, metrics.cached_tokens) == (
                call.get("prompt_tokens"), call.get("completion_tokens"), call.get("cached_tokens"))
            kept.append((call["call_index"], call["retry"], call.get("prompt_tokens"), call.get("completion_tokens"),
                         call.get("cached_tokens"), call.get("reasoning_tokens")))
        assert sorted(kept) == expected, (task, cycle)
        totals = trajectory.final_metrics
        assert (totals.total_prompt_tokens or 0, totals.total_completion_tokens or 0,
                totals.total_cached_tokens or 0, (totals.extra or {}).get("total_reasoning_tokens", 0)) == (
            row.prompt_tokens, row.completion_tokens, row.cached_tokens, row.reasoning_tokens), (task, cycle)
        assert soak_facts(trajectory)["attempt"]["outcome"] == row.outcome


if __name__ == "__main__":
    print(f"ATIF reference: {HARBOR} in {reference_venv().venv}")
