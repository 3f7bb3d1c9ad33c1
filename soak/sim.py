"""`soak sim`: a fault-injecting OpenAI-compatible server for tests, benchmarks and rehearsals."""

from soak.sim_scenario import Scenario, load_scenario

__all__ = ["Scenario", "SimServer", "load_scenario"]


class SimServer:
    """A simulated vLLM / llama.cpp server on uvicorn in a background thread."""

    def __init__(self, scenario: Scenario, seed: int = 0, engine: str = "vllm", suite: str = "builtin") -> None:
        self.scenario, self.seed, self.engine, self.suite = scenario, seed, engine, suite
        self.base_url = ""

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve until stop(); returns the base URL ("http://HOST:PORT/v1") once it accepts connections."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError
