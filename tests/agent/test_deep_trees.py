"""Attribution by evidence: a directory chain 5,000 deep (past the recursion limit of any recursive walk, past PATH_MAX
for a path-based one) left by an agent in its workspace or its HOME or made by a solution at import ends the attempt
as the model's (`no_artifact`, `fail`) under bubblewrap and the unshare fallback, never `harness_error`, and its HOME
is removed off the night's event loop; what the agent left unreadable among its transcripts is named, not kept; a redo
of an attempt cut short removes the chain it left without recursion."""

import asyncio
import inspect
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from soak.agent import external
from soak.agent.adapters import adapter_for
from soak.agent.attempt import AttemptContext
from soak.record.schema import RunLimits, TaskRow
from tests.agent.test_attacks import ENTRY, night
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


HOME_LEFT = f'''
import os
{CHAIN}
home = os.environ["HOME"]
with open(os.path.join(home, "chat.md"), "w") as chat:
    chat.write("made unreadable")
os.chmod(os.path.join(home, "chat.md"), 0)
os.mkfifo(os.path.join(home, "llm.log"))
os.symlink("loop.json", os.path.join(home, "loop.json"))
chain(home, {DEPTH})
print("left", home)
'''
"""An agent that leaves in its HOME, under the names its adapter keeps, a file it made unreadable, a pipe and a link
to itself, and the chain beside them; it writes no entry file."""


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


@pytest.mark.slow
def test_a_home_left_deep_and_unreadable_ends_the_attempt_as_the_agents(jail, fast_sim, data_dir, removed,
                                                                       monkeypatch):
    def keeping(name: str):
        return adapter_for(name).model_copy(update={"transcripts": ("chat.md", "llm.log", "loop.json")})

    removing_in_the_loop: list[bool] = []

    def removing(path: Path) -> None:
        try:
            asyncio.get_running_loop()
            removing_in_the_loop.append(True)
        except RuntimeError:
            removing_in_the_loop.append(False)
        remove_tree(path)

    remove_tree = external.remove_tree
    monkeypatch.setattr(external, "adapter_for", keeping)
    monkeypatch.setattr(external, "remove_tree", removing)
    _, base_url = fast_sim()
    done = night(removed, base_url, HOME_LEFT)
    assert done.row["outcome"] == "no_artifact", done.row["error_tail"]
    home = Path(done.output().split("left ")[1].split()[0])
    assert not home.exists() and removing_in_the_loop == [False]
    kept = next(done.path.glob("work/*/*/round-1/agent"))
    readable = os.geteuid() == 0  # root reads a file whatever its mode
    assert (kept / "chat.md").is_file() is readable and not (kept / "llm.log").exists()
    assert (kept / external.NOT_KEPT).read_text().splitlines() == [
        *([] if readable else ["chat.md: Permission denied"]),
        "llm.log: a link, or not a regular file", "loop.json: a link, or not a regular file"]


@pytest.fixture(scope="module")
def redone(tmp_path_factory) -> Iterator[tuple[list[TaskRow], Path]]:
    """A night stopped while its one attempt's workspace holds the chain, then resumed: the rows and that workspace."""
    top = tmp_path_factory.mktemp("redo")
    folder, info, config = new_folder(top, RunLimits(max_tasks=1), concurrency=1)
    workspaces: list[Path] = []

    async def chained_then_interrupted(task, attempt: AttemptContext) -> TaskRow:
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
