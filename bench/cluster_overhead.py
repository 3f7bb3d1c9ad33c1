"""What the cluster path costs: attempts per minute of `soak run --cluster` against the same night on this machine,
at equal cores.

One `soak sim` in its own process serves both nights (a TTFT per call, so an attempt is mostly waiting, as against a
real server); each night is `--tasks` attempts over the built-in bank, their real tests judged in the jail. The local
night runs `soak run --concurrency N`; the cluster night runs the same with `--cluster` against a Ray cluster started
here: a head with no cores and one worker node offering N attempt slots (`--num-cpus N`, `soak_jail: N`), so both
nights hold N attempts at once on the same cores, the cluster's with Ray's processes, the object store and shipping
rows and work folders back on top. Nights alternate (local, cluster, cluster, local, ...) so drift hits both alike.
Prints each night's attempts per minute (finished attempts over the span from the first start to the last end), the
median of each path and their ratio (goal: cluster >= 0.9 x local), and the load average before and after.

    .venv/bin/python bench/cluster_overhead.py [--tasks 24] [--concurrency 4] [--rounds 2] [--ttft 0.3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the local cluster is test code

from soak.sim.scenario import Scenario  # noqa: E402
from soak.sim.server import start_subprocess  # noqa: E402
from tests.cluster import LocalCluster  # noqa: E402

SOAK = [sys.executable, "-m", "soak.cli"]


def night(config: Path, data: Path, run_id: str, tasks: int, cluster: str | None, env: dict[str, str]) -> float:
    """Attempts per minute of one night."""
    where = ["--cluster", cluster] if cluster else []
    done = subprocess.run([*SOAK, "run", "--config", str(config), "--run-id", run_id, "--tasks", str(tasks),
                           "--quiet", *where], capture_output=True, text=True, env={**env, "SOAK_DATA_DIR": str(data)})
    if done.returncode != 0:
        raise SystemExit(f"{run_id} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    rows = pd.read_csv(data / run_id / "tasks.csv")
    return len(rows) / ((rows["ended_at"].max() - rows["started_at"].min()) / 60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ttft", type=float, default=0.3)
    args = parser.parse_args()
    scenario = Scenario.model_validate({"timing": {"ttft_seconds": args.ttft, "decode_tokens_per_second": 0,
                                                   "tokens_per_chunk": 64}})
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        data = Path(tmp) / "data"
        sim, sim_url = start_subprocess(scenario)
        cluster = LocalCluster(Path(tmp))
        try:
            cluster.start("head")
            cluster.wait_for({"head"})
            cluster.worker("worker", args.concurrency)
            cluster.wait_for({"head", "worker"})
            config = Path(tmp) / "soak.toml"
            config.write_text(f"concurrency = {args.concurrency}\ncanary_share = 0\n[endpoints.default]\n"
                              f'base_url = "{sim_url}"\nmodel = "soak-sim"\n')
            rates: dict[str, list[float]] = {"local": [], "cluster": []}
            order = ["local", "cluster"]
            for round_ in range(args.rounds):
                for path in order if round_ % 2 == 0 else order[::-1]:
                    rate = night(config, data, f"{path}-{round_}", args.tasks,
                                 cluster.address if path == "cluster" else None, cluster.env)
                    rates[path].append(rate)
                    print(f"{path:8} night {round_ + 1}: {rate:6.1f} attempts/min", flush=True)
        finally:
            cluster.stop()
            sim.terminate()
            sim.wait()
    local, cluster = statistics.median(rates["local"]), statistics.median(rates["cluster"])
    print(f"median: local {local:.1f} attempts/min, cluster {cluster:.1f} attempts/min; "
          f"cluster/local {cluster / local:.3f} (goal >= 0.9)")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
