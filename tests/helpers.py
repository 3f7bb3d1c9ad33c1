"""What many tests share: where the fixtures are, one way to wait for something to happen, and the one-task night of
an agent script of a test's own."""

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_not_result,
    stop_after_delay,
    wait_fixed,
)

from soak.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
EXERCISM_SUITE = f"exercism:{FIXTURES / 'exercism'}"
SMALL_SESSIONS = """
[gates]
session_system_tokens = 100
session_start_tokens = 200
session_turn_tokens = 100
session_answer_tokens = 8
session_turns = 3
session_think_seconds = 0.2
sessions_ramp = [1, 2, 4, 8]
min_warm_sessions = 4
"""
"""The sessions gate at sim scale: sessions of about 300, 420 and 540 tokens over their three turns, 27 blocks of 16
once their second turn is cached, so 4 of them (and the shared prompt) fit in 110 blocks, and 2 in 60."""
"""The small Exercism fixture suite the simulated coder knows (tests do not depend on the bank)."""

T = TypeVar("T")


def _policy(timeout: float, interval: float, what: str, ignoring: tuple[type[Exception], ...],
            detail: Callable[[], str] | None) -> dict[str, Any]:
    """Retry while the condition is falsy (or raises one of `ignoring`); fail the test naming `what` at the end."""

    def timed_out(state: RetryCallState) -> None:
        last = state.outcome.exception() if state.outcome else None
        raised = f" (last: {last!r})" if last else ""
        pytest.fail(f"timed out after {timeout:g} s waiting for {what}{raised}{'; ' + detail() if detail else ''}")

    return dict(stop=stop_after_delay(timeout), wait=wait_fixed(interval), retry_error_callback=timed_out,
                retry=retry_if_not_result(bool) | retry_if_exception_type(ignoring))


def _alive(process: subprocess.Popen | None, what: str, detail: Callable[[], str] | None) -> None:
    if process is not None and process.poll() is not None:
        pytest.fail(f"the process exited ({process.returncode}) before {what}{'; ' + detail() if detail else ''}")


def wait_until(condition: Callable[[], T], *, timeout: float, what: str, interval: float = 0.05,
               process: subprocess.Popen | None = None, ignoring: tuple[type[Exception], ...] = (),
               detail: Callable[[], str] | None = None) -> T:
    """The first truthy value of `condition()`, polled every `interval` s. The test fails naming `what` after
    `timeout` s, or at once with its exit code when `process` exits first; `detail()` adds context to a failure."""

    def check() -> T:
        _alive(process, what, detail)
        return condition()

    return Retrying(**_policy(timeout, interval, what, ignoring, detail))(check)


async def until(condition: Callable[[], T], *, timeout: float, what: str, interval: float = 0.05) -> T:
    """`wait_until` inside an event loop: the loop runs on between checks."""

    async def check() -> T:
        return condition()

    return await AsyncRetrying(**_policy(timeout, interval, what, (), None))(check)


def script_night_args(tmp_path: Path, base_url: str, script: str, *args: str, budgets: str = "task_seconds = 120",
                      endpoint: str = "", agent: str = "") -> list[str]:
    """The `soak` arguments of `script_night`'s night (its config and agent written under `tmp_path`), for a night run
    in a process of its own."""
    agent_dir = tmp_path / "agent"  # Only this folder of the test's is readable inside the jail.
    agent_dir.mkdir(exist_ok=True)
    (agent_dir / "agent.py").write_text(textwrap.dedent(script))
    config = tmp_path / "soak.toml"
    config.write_text(textwrap.dedent(f"""
        suite = "{EXERCISM_SUITE}"
        concurrency = 1
        [agent]
        readable = [{json.dumps(str(agent_dir))}]
        {agent}
        [endpoints.sim]
        base_url = "{base_url}"
        model = "soak-sim"
        {endpoint}
        [roles]
        orchestrator = "sim"
        coder = "sim"
        [budgets]
        max_rounds = 1
        """) + budgets + "\n")
    command = " ".join([sys.executable, str(agent_dir / "agent.py"), "{prompt_file}", "{workspace}", "{base_url}",
                        "{api_key}", *args])
    return ["run", "--config", str(config), "--agent", command, "--tasks", "1", "--quiet", "--run-id", "night"]


def script_night(tmp_path: Path, base_url: str, script: str, *args: str, budgets: str = "task_seconds = 120",
                 endpoint: str = "", agent: str = "") -> Path:
    """One task of the Exercism fixture suite with `script` as the agent (its arguments: prompt file, workspace, base
    URL, API key, then `args`), against the sim at `base_url` (`endpoint`, `agent`: more lines of those tables); the
    run folder."""
    arguments = script_night_args(tmp_path, base_url, script, *args, budgets=budgets, endpoint=endpoint, agent=agent)
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    return tmp_path / "data" / "night"


def supervised_sim(folder: Path, sim_args: str = "") -> Path:
    """A soak.toml (written in `folder`) whose one endpoint is `soak sim` on a free port, started, watched and
    restarted by soak as a `[[stack.servers]]` server (health checked every 0.3 s, down after 2 failures)."""
    from soak.stack.servers import free_port

    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = f"exec {sys.executable} -m soak.cli sim --port {port} --suite {EXERCISM_SUITE} {sim_args}".rstrip()
    config = folder / "soak.toml"
    config.write_text(f"""
suite = "{EXERCISM_SUITE}"
concurrency = 1
[endpoints.sim]
base_url = "{base_url}"
model = "soak-sim"
[roles]
orchestrator = "sim"
coder = "sim"
[sampling]
interval_seconds = 0.5
[stack]
health_interval_seconds = 0.3
failures_before_down = 2
[[stack.servers]]
name = "sim"
up = "{up}"
base_url = "{base_url}"
start_timeout_seconds = 30
""")
    return config
