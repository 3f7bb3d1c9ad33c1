import shutil

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.paths import builtin_tasks_dir
from soak.sim.scenario import Scenario, Timing
from soak.sim.server import SimServer
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import find_task
from tests.helpers import EXERCISM_SUITE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Real engines in one xdist group (`--dist loadgroup` runs a group on one worker): two vLLM or llama-server
    processes at once would starve each other on a 2-core machine. The tests on a real Ray cluster in another, so its
    module's one cluster serves them all."""
    for item in items:
        if item.get_closest_marker("engine"):
            item.add_marker(pytest.mark.xdist_group("engines"))
        elif "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("cluster"))


@pytest.fixture
def fast_sim():
    """Start zero-latency sims with scenario fields as keywords; returns (server, base_url). All stop at teardown.

    The simulated coder knows only the small Exercism fixture suite, so these tests do not depend on the bank.
    """
    servers = []

    def start(engine: str = "vllm", **scenario) -> tuple[SimServer, str]:
        timing = Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8)
        server = SimServer(Scenario(timing=timing, **scenario), seed=3, engine=engine,
                           suite=EXERCISM_SUITE)
        servers.append(server)
        return server, server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> TaskSpec:
    """word-frequency as a one-task suite of its own, so the sim and the loop do not depend on the rest of the bank."""
    bank = tmp_path_factory.mktemp("bank")
    shutil.copytree(builtin_tasks_dir() / "word-frequency", bank / "word-frequency")
    return find_task(str(bank / "word-frequency"))


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """Run folders and reports under the test's own folder."""
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOAK_REPORTS_DIR", str(tmp_path / "reports"))
    return tmp_path / "data"


@pytest.fixture
def soak():
    """The `soak` command in this process; an exit is a result, any other exception fails the test."""

    def invoke(*args: str):
        result = CliRunner().invoke(main, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result

    return invoke
