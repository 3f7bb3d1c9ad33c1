"""Attribution by evidence: a directory chain 5,000 deep (past the recursion limit of any recursive walk, past PATH_MAX
for a path-based one) left by an agent in its workspace or made by a solution at import ends the attempt as the
model's (`no_artifact`, `fail`) under bubblewrap and the unshare fallback, never `harness_error`; a redo of an attempt
cut short removes the chain it left without recursion."""

import asyncio
import inspect
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from soak.night.loop import Attempt
from soak.record.schema import RunLimits, TaskRow
from tests.agent.test_attacks import ENTRY
from tests.helpers import script_night
from tests.night.test_loop import FakeTasks, new_folder, run, tasks_of

DEPTH = 5000


def chain(top: str, depth: int) -> None:
    """`depth` folders, each inside the last, made relative to an open folder: no path grows long for the maker."""
    import os

    here = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=here)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
        os.close(here)
        here = below
    os.close(here)


CHAIN = inspect.getsource(chain)

AGENT_CHAIN = f'''
import sys
{CHAIN}
chain(sys.argv[2], {DEPTH})
print("chained")
'''
"""An agent that leaves the chain in its workspace and writes no entry file."""

SOLUTION_CHAIN = f'''{CHAIN}
chain(".", {DEPTH})
raise RuntimeError("chained {DEPTH} deep")
'''
"""A solution that makes the chain where the tests import it, then fails them."""

WRITES_SOLUTION = ENTRY + f'''
open(workspace + "/" + entry, "w").write({SOLUTION_CHAIN!r})
print("wrote", entry)
'''


@pytest.fixture
def removed(tmp_path):
    """The test's folder, removed afterwards by a remover that walks any depth (pytest's own would recurse)."""
    yield tmp_path
    subprocess.run(["rm", "-rf", str(tmp_path)], check=True)


@pytest.mark.slow
@pytest.mark.parametrize(("script", "outcome", "evidence"), [
    (AGENT_CHAIN, "no_artifact", "was not written in round 1\nchained"),
    (WRITES_SOLUTION, "fail", f"chained {DEPTH} deep"),
], ids=["left-by-the-agent", "made-by-the-solution"])
def test_a_deep_chain_ends_the_attempt_as_the_models(jail, fast_sim, data_dir, removed, script, outcome, evidence):
    _, base_url = fast_sim()
    path = script_night(removed, base_url, script, budgets="task_seconds = 60")
    [row] = pd.read_csv(path / "tasks.csv", keep_default_na=False).to_dict("records")
    assert (row["outcome"], evidence in row["error_tail"]) == (outcome, True), row["error_tail"]


@pytest.fixture(scope="module")
def redone(tmp_path_factory) -> Iterator[tuple[list[TaskRow], Path]]:
    """A night stopped while its one attempt's workspace holds the chain, then resumed: the rows and that workspace."""
    top = tmp_path_factory.mktemp("redo")
    folder, info, config = new_folder(top, RunLimits(max_tasks=1), concurrency=1)
    workspaces: list[Path] = []

    async def chained_then_interrupted(task, attempt: Attempt) -> TaskRow:
        workspaces.append(attempt.workdir / "workspace")
        workspaces[0].mkdir()
        chain(str(workspaces[0]), DEPTH)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.Event().wait()  # until the signal cancels the attempt
        raise AssertionError("not cancelled")

    end, _ = run(folder, info, config, chained_then_interrupted)
    assert end.reason == "signal" and (workspaces[0] / "d" / "d").is_dir()
    end, _ = run(folder, folder.read_info(), config, FakeTasks(outcome=lambda task_id, n: "fail"))
    assert end.reason == "tasks"
    yield tasks_of(folder), workspaces[0]
    subprocess.run(["rm", "-rf", str(top)], check=True)


@pytest.mark.slow
def test_a_redo_after_a_deep_chain_runs_and_the_night_goes_on(redone):
    rows, _ = redone
    assert [row.outcome for row in rows] == ["cancelled", "fail"]


@pytest.mark.slow
def test_a_redo_starts_from_an_empty_folder_however_deep_the_chain(redone):
    _, workspace = redone
    assert not workspace.exists()
