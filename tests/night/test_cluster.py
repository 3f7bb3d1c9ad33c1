"""A night on a real Ray cluster on this machine: a head and two worker nodes, each a `ray start` process of its own
with its own cores and the jail's resource; the night's driver is a `soak run --cluster` process of its own too."""

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import psutil
import pytest

from soak import __version__
from soak.night.cluster import ATTEMPT_PREFIX, worker_of
from soak.record.read import latest_attempts, load_run, read_rows
from soak.record.schema import CallRow, TaskRow
from soak.sim.server import Scenario, SimServer
from tests.cluster import LocalCluster
from tests.helpers import wait_until
from tests.night.test_loop import write_bank

pytestmark = pytest.mark.slow
SOAK = [sys.executable, "-m", "soak.cli"]


def attempt_folders() -> dict[Path, int]:
    """The attempt folders on this machine, each with the worker process it is named for."""
    return {folder: worker[1] for folder in Path(tempfile.gettempdir()).glob(f"{ATTEMPT_PREFIX}*")
            if (worker := worker_of(folder))}


def left_by_a_dead_worker() -> None:
    """An attempt folder named for a worker process of this pid namespace that is gone, with a file in it."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    namespace = os.stat("/proc/self/ns/pid").st_ino
    folder = Path(tempfile.mkdtemp(prefix=f"{ATTEMPT_PREFIX}{namespace}.{gone.pid}-"))
    (folder / "solution.py").write_text("print('cut short')\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module (three nodes take seconds each to start): the doctor sees it whole first."""
    nodes = LocalCluster(tmp_path_factory.mktemp("ray"))
    try:
        nodes.start("head")
        nodes.wait_for({"head"})  # one node at a time: two starting at once can pick the same free port
        nodes.worker("worker-a", 2)
        nodes.wait_for({"head", "worker-a"})
        nodes.worker("worker-b", 2)
        nodes.wait_for({"head", "worker-a", "worker-b"})
        yield nodes
    finally:
        nodes.stop()


def test_the_doctor_checks_every_node(cluster):
    result = subprocess.run([*SOAK, "doctor", "--cluster", cluster.address, "--json"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    nodes = {item["node"].split("/")[0]: {f["check"]: f for f in item["findings"]} for item in report["nodes"]}
    assert set(nodes) == {"node head", "node worker-a", "node worker-b"} and report["ok"]
    for name in ("node worker-a", "node worker-b"):
        found = nodes[name]
        assert found["attempts"]["result"] == "takes attempts" and found["jail"]["ok"], found
        assert found["soak"]["result"] == __version__ and found["python"]["result"] == platform.python_version()
        assert found["tasks"]["result"].startswith("builtin: ") and "2 declared to Ray" in found["cores"]["result"]
    assert nodes["node head"]["attempts"]["result"] == "takes none (no soak_jail)"


def rows(folder: Path) -> list[TaskRow]:
    return list(read_rows(folder / "tasks.csv", TaskRow)) if (folder / "tasks.csv").exists() else []


def calls(folder: Path) -> list[CallRow]:
    return list(read_rows(folder / "calls.csv", CallRow)) if (folder / "calls.csv").exists() else []


def in_flight_on(folder: Path, node: str) -> bool:
    """A try on `node` has made one or two calls and has no row yet: it is running there, with seconds to go (four
    calls of 0.4 s each make an attempt)."""
    finished = {r.attempt for r in rows(folder)}
    made = Counter(c.attempt for c in calls(folder) if c.node.startswith(node))
    return any(key not in finished and n <= 2 for key, n in made.items())


def night(tmp_path: Path, cluster: LocalCluster, run_id: str, tasks: int) -> subprocess.Popen:
    """`soak run --cluster` of tmp_path's soak.toml, a process of its own."""
    return subprocess.Popen([*SOAK, "run", "--config", str(tmp_path / "soak.toml"), "--cluster", cluster.address,
                             "--run-id", run_id,
                             "--tasks", str(tasks), "--quiet"], stdout=(tmp_path / f"{run_id}.log").open("wb"),
                            stderr=subprocess.STDOUT, env={**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data")})


def test_a_night_on_two_workers_survives_a_lost_node_and_a_killed_driver(tmp_path, cluster):
    """Attempts run on both workers, one counting row each and every call recorded under its try; a worker killed
    mid-night ends its attempts `node_lost`, each retried once on the other node; a driver killed with SIGKILL leaves
    a run that `--resume` finishes, nothing written twice."""
    suite = write_bank(tmp_path / "bank", 4)
    scenario = Scenario.model_validate({"timing": {"ttft_seconds": 0.4, "decode_tokens_per_second": 0,
                                                   "tokens_per_chunk": 64}})
    with SimServer(scenario, suite=suite) as sim:
        (tmp_path / "soak.toml").write_text(
            f'suite = "{suite}"\nconcurrency = 4\ncanary_share = 0\n[endpoints.default]\nbase_url = "{sim.base_url}"\n'
            'model = "soak-sim"\n')
        log = lambda name: lambda: (tmp_path / f"{name}.log").read_text()[-3000:]  # noqa: E731
        data = tmp_path / "data"

        # A worker lost mid-night.
        driver = night(tmp_path, cluster, "lost", 12)
        wait_until(lambda: {r.node.split("/")[0] for r in rows(data / "lost")} == {"worker-a", "worker-b"}
                   and in_flight_on(data / "lost", "worker-a"), timeout=120, interval=0.1, process=driver,
                   what="attempts finished on both workers and one in flight on worker-a", detail=log("lost"))
        cluster.kill("worker-a")
        assert driver.wait(timeout=300) == 0, log("lost")()
        every = rows(data / "lost")
        lost = [r for r in every if r.outcome == "node_lost"]
        assert lost and all(r.node.startswith("worker-a/") for r in lost), [(r.task_id, r.node) for r in every]
        run = load_run(data / "lost")
        assert len(run.tasks) == 12 and not run.tasks.duplicated(["task_id", "cycle", "repeat"]).any()
        assert "node_lost" not in set(run.tasks["outcome"]) and set(run.tasks["outcome"]) == {"pass"}
        for row in lost:  # each retried once, on the other node, and its work folder came back
            again = [r for r in every if (r.task_id, r.cycle, r.repeat) == (row.task_id, row.cycle, row.repeat)
                     and r.outcome != "node_lost"]
            assert len(again) == 1 and again[0].node.startswith("worker-b/"), again
            assert (data / "lost" / "work" / row.task_id / str(row.cycle) / "workspace" / "solution.py").is_file()
        assert {r.node.split("/")[0] for r in run.tasks.itertuples()} == {"worker-a", "worker-b"}
        tries = {r.attempt for r in every}
        assert all(c.attempt in tries for c in calls(data / "lost"))  # every call under its try
        for attempt in (run.attempt(key) for key in run.attempt_ids()):
            assert attempt.calls and {c.node for c in attempt.calls} == {attempt.row.node}
        events = run.events[run.events["kind"] == "node_lost"]
        assert len(events) == len(lost) and set(events["source"]) == {r.node for r in lost}

        # The report shows the lost tries under their node.
        result = subprocess.run([*SOAK, "report", "lost", "--output", str(tmp_path / "report")], capture_output=True,
                                text=True, env={**os.environ, "SOAK_DATA_DIR": str(data)})
        assert result.returncode == 0, result.stdout + result.stderr
        page = (tmp_path / "report" / "index.html").read_text()
        assert "Where the attempts ran" in page and "worker-a/" in page and "worker-b/" in page

        # The driver killed with SIGKILL mid-night, then resumed.
        cluster.worker("worker-a", 2)  # back, under a new node id
        cluster.wait_for({"head", "worker-a", "worker-b"})
        driver = night(tmp_path, cluster, "killed", 16)
        wait_until(lambda: len(rows(data / "killed")) >= 3 and in_flight_on(data / "killed", "worker"),
                   timeout=120, interval=0.1, what="finished attempts and one in flight", process=driver,
                   detail=log("killed"))
        driver.kill()
        driver.wait()
        # What the killed workers left on the nodes (here, this machine's /tmp): Ray may take them down before their
        # own cleanup runs, or after it where the cleanup is quick; one folder as a worker killed mid-attempt leaves it.
        left_by_a_dead_worker()
        cut_short = attempt_folders()
        wait_until(lambda: not any(psutil.pid_exists(owner) for owner in cut_short.values()), timeout=60,
                   interval=0.2, what="the killed driver's workers gone with it")
        before = rows(data / "killed")
        resume = subprocess.run([*SOAK, "run", "--resume", "killed", "--quiet"], capture_output=True, text=True,
                                env={**os.environ, "SOAK_DATA_DIR": str(data)}, timeout=300)
        assert resume.returncode == 0, resume.stdout[-3000:] + resume.stderr[-3000:]
    assert not any(folder.exists() for folder in cut_short)  # the resume's attempts cleared what the dead workers left
    after = rows(data / "killed")
    assert after[:len(before)] == before  # nothing recorded was lost or rewritten
    keys = Counter((r.task_id, r.cycle, r.repeat, r.session, r.node) for r in after)
    assert max(keys.values()) == 1  # nothing written twice
    run = load_run(data / "killed")
    assert len(run.tasks) == 16 and set(run.tasks["outcome"]) == {"pass"}
    assert {r.session for r in after} == {0, 1} and len(latest_attempts(run.tasks)) == 16
    cut = {c.attempt for c in calls(data / "killed")} - {r.attempt for r in after}
    assert cut and all(key.session == 0 for key in cut)  # the calls of the attempts cut short by the kill are kept


def test_an_external_agent_runs_on_the_workers_behind_a_proxy_of_their_own(tmp_path, cluster):
    """Mode agent on the cluster: the agent on each node asks the model through that node's recording proxy, writes
    the file, and its calls come back to the head as `agent` rows of the node it ran on. The server wants an API key:
    the proxies on the nodes have it, though the Ray job carries none in its runtime environment."""
    from tests.agent.test_attacks import HONEST
    from tests.helpers import EXERCISM_SUITE, script_night_args

    timing = {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 64}
    scenario = Scenario.model_validate({"timing": timing, "api_key": "sk-served-on-the-head"})
    with SimServer(scenario, suite=EXERCISM_SUITE) as sim:
        arguments = script_night_args(tmp_path, sim.base_url, HONEST, endpoint='api_key_env = "SOAK_CLUSTER_KEY"')
        arguments[arguments.index("--tasks") + 1] = "3"
        result = subprocess.run([*SOAK, *arguments, "--cluster", cluster.address], capture_output=True, text=True,
                                env={**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data"),
                                     "SOAK_CLUSTER_KEY": "sk-served-on-the-head"}, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = load_run(tmp_path / "data" / "night")
    assert list(run.tasks["outcome"]) == ["pass"] * 3 and list(run.tasks["agent_calls"]) == [1] * 3
    assert all(node.startswith("worker-") for node in run.tasks["node"])
    for attempt in (run.attempt(key) for key in run.attempt_ids()):
        assert [(c.role, c.node) for c in attempt.calls] == [("agent", attempt.row.node)]
        assert "wrote" in (attempt.layout.path / "round-1" / "agent" / "output.txt").read_text()


def test_stopping_the_night_kills_the_attempts_on_the_nodes(tmp_path, cluster):
    """SIGTERM to the driver (`soak stop`) mid-attempt: the attempts on the nodes are cancelled there, the agent's
    processes killed, and each is a `cancelled` row of the node it ran on."""
    from tests.helpers import EXERCISM_SUITE, script_night_args

    marker = f"soak-cluster-stop-{os.getpid()}"
    sleeper = "import time\ntime.sleep(600)\n"
    def running() -> list[psutil.Process]:  # the agents' own Pythons, not the jail around them
        return [p for p in psutil.process_iter(["cmdline"]) if (cmd := p.info["cmdline"] or [])
                and marker in cmd and Path(cmd[0]).name.startswith("python")]

    with SimServer(Scenario.model_validate({}), suite=EXERCISM_SUITE) as sim:
        arguments = script_night_args(tmp_path, sim.base_url, sleeper, marker)
        arguments[arguments.index("--tasks") + 1] = "2"
        driver = subprocess.Popen([*SOAK, *arguments, "--cluster", cluster.address, "--concurrency", "2"],
                                  stdout=(tmp_path / "stop.log").open("wb"), stderr=subprocess.STDOUT,
                                  env={**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data")})
        wait_until(lambda: len(running()) >= 2, timeout=120, interval=0.2, what="both agents asleep on the nodes",
                   process=driver, detail=lambda: (tmp_path / "stop.log").read_text()[-3000:])
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=120) == 130, (tmp_path / "stop.log").read_text()[-3000:]
    wait_until(lambda: not running(), timeout=60, interval=0.2, what="the agents killed on their nodes")
    run = load_run(tmp_path / "data" / "night")
    assert list(run.tasks["outcome"]) == ["cancelled"] * 2 and all(n.startswith("worker-") for n in run.tasks["node"])
