from pathlib import Path

import pytest

from soak.sim.scenario import Scenario, Timing
from soak.sim.server import SimServer

EXERCISM_FIXTURES = Path(__file__).parent / "fixtures" / "exercism"


@pytest.fixture
def fast_sim():
    """Start zero-latency sims with scenario fields as keywords; returns (server, base_url). All stop at teardown.

    The simulated coder knows only the small Exercism fixture suite, so these tests do not depend on the bank.
    """
    servers = []

    def start(engine: str = "vllm", **scenario) -> tuple[SimServer, str]:
        timing = Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8)
        server = SimServer(Scenario(timing=timing, **scenario), seed=3, engine=engine,
                           suite=f"exercism:{EXERCISM_FIXTURES}")
        servers.append(server)
        return server, server.start()

    yield start
    for server in servers:
        server.stop()
