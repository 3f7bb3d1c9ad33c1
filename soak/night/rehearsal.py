"""`soak run --rehearse`: a short night against `soak sim` that soak starts itself, so a newcomer sees in about two
minutes what a night shows (passes, a revision that fixes a failure, an over-iterating problem, a mangled tool call,
a server restart) and then the report.

The sim is an ordinary `[[stack.servers]]` entry (`python -m soak.cli sim --scenario rehearsal --state FILE`), so
the stack supervisor starts it, watches it and restarts it when the scenario's crash fault ends it: the same path a
real server takes. It serves both roles; the night is one pass over the built-in bank.
"""

import shlex
import sys
from pathlib import Path

from soak.config import Endpoint, ErrorBudget, Roles, Sampling, Server, SoakConfig, Stack
from soak.errors import BadInput

SCENARIO = "rehearsal"
STATE_FILE = "sim-state.json"
"""In the run folder: the sim's request count across its restarts, so the crash happens once."""
REFUSED = ("config_path", "suite", "mode", "agent", "base_url", "model", "routing")
"""Flags a rehearsal refuses: it brings its own endpoint, suite and stack."""


def refuse_flags(opts: object) -> None:
    given = [f"--{name.replace('_', '-')}" for name in REFUSED if getattr(opts, name) is not None]
    if given:
        raise BadInput(f"--rehearse brings its own server, suite and config; drop {', '.join(given)}")


def rehearsal_config(run_dir: Path, concurrency: int | None, seed: int | None) -> SoakConfig:
    """Both roles on a `soak sim` stack server on a free port; its state file in the run folder."""
    from soak.stack.servers import free_port

    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = shlex.join([sys.executable, "-m", "soak.cli", "sim", "--port", str(port), "--scenario", SCENARIO,
                     "--seed", str(seed or 0), "--state", str(run_dir.resolve() / STATE_FILE)])
    return SoakConfig(
        # max_tokens: every reference fits; the sim's DCGM-style exporter gives the night its energy.
        endpoints={"sim": Endpoint(base_url=base_url, model="soak-sim", max_tokens=8192,
                                   energy_metrics_url=f"http://127.0.0.1:{port}/dcgm/metrics")},
        roles=Roles(orchestrator="sim", coder="sim"),
        suite="builtin", concurrency=concurrency or 2, seed=seed or 0,
        stack=Stack(servers=[Server(name="sim", up=f"exec {up}", base_url=base_url, start_timeout_seconds=60)],
                    health_interval_seconds=0.5, failures_before_down=2),
        sampling=Sampling(interval_seconds=2),
        error_budget=ErrorBudget(wait_for_stack_seconds=120, probe_interval_seconds=1),
    )
