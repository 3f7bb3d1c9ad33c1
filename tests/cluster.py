"""A real Ray cluster on this machine for the cluster tests and bench: a head and worker nodes, each a `ray start
--block` process in a session of its own, started one at a time (two starting at once can pick the same free port)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from soak.stack.servers import free_port
from tests.helpers import wait_until

RAY = str(Path(sys.executable).parent / "ray")


class LocalCluster:
    """The nodes by name; `kill` is a node dying as a machine would."""

    def __init__(self, logs: Path):
        self.port, self.logs = free_port(), logs
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self.nodes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str) -> None:
        """A node of this name (`head` starts the cluster, with no cores of its own)."""
        where = ["--head", "--port", str(self.port), "--num-cpus", "0", "--include-dashboard=false",
                 "--disable-usage-stats"] if name == "head" else ["--address", self.address]
        log = (self.logs / f"ray-{name}.log").open("ab")
        self.nodes[name] = subprocess.Popen(
            [RAY, "start", *where, "--node-name", name, "--dashboard-agent-listen-port", str(free_port()), *args,
             "--block"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env)

    def worker(self, name: str, slots: int) -> None:
        """A worker node that takes `slots` attempts at once: as many cores and units of the jail's resource."""
        self.start(name, "--num-cpus", str(slots), "--resources", json.dumps({"soak_jail": slots}))

    def alive(self) -> set[str]:
        """The names of the nodes the cluster holds alive, asked by a driver of its own."""
        probe = (f"import ray, json; ray.init(address={self.address!r}, logging_level='ERROR'); "
                 "print('nodes', json.dumps(sorted(n['NodeName'] for n in ray.nodes() if n['Alive'])))")
        run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=self.env, timeout=60)
        said = [line.removeprefix("nodes ") for line in run.stdout.splitlines() if line.startswith("nodes ")]
        return set(json.loads(said[-1])) if run.returncode == 0 and said else set()

    def wait_for(self, names: set[str]) -> None:
        wait_until(lambda: self.alive() == names, timeout=120, interval=1, what=f"the nodes {sorted(names)}")

    def kill(self, name: str) -> None:
        """The node dies as a machine would: `ray start`, its raylet and every process under it (the workers running
        attempts are the raylet's children, in sessions of their own) at once."""
        node = self.nodes.pop(name)
        with contextlib.suppress(psutil.Error):
            tree = [psutil.Process(node.pid), *psutil.Process(node.pid).children(recursive=True)]
            for process in tree:
                with contextlib.suppress(psutil.Error):
                    process.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.wait()

    def stop(self) -> None:
        for name in list(self.nodes):
            self.kill(name)
