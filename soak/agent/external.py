"""One task attempt by an external agent: the agent runs jailed in the task's workspace with a temporary HOME,
reaches the model only through the recording proxy, and its entry file on disk is judged exactly as soak's own loop's
is; a failed round starts the agent again with the real error tail.

Outcomes as for soak's loop, plus `agent_error`: the agent exited non-zero (or died) without writing the entry file,
which counts against the stack; an agent that exits 0 without it is `no_artifact`.
"""

import asyncio
import glob
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from soak.agent.adapters import COMMON_ENV, Adapter, AgentInstall, adapter_for, fill, write_home
from soak.agent.loop import Judge, final, judged, opening, revision, token_cap_detail
from soak.agent.proxy import AttemptBudget, RecordingProxy
from soak.config import SoakConfig
from soak.errors import BadInput
from soak.record.schema import CallRow, Outcome, TaskRow
from soak.sandbox.jail import Contained, ResourceLimits, launch, remove_tree, wrap
from soak.sandbox.judge import Verdict, isolation_kind, tail
from soak.sandbox.judge import judge as judge_solution
from soak.tasks.spec import TaskSpec

OUTPUT_BYTES = 256 * 1024


class Attempt(Protocol):
    """Where an attempt belongs (the night's Attempt)."""

    run_id: str
    cycle: int
    workdir: Path
    on_call: Callable[[CallRow], None]


class ExternalAgent:
    """An agent CLI resolved for a night: its adapter, executable, version and jail settings."""

    def __init__(self, config: SoakConfig) -> None:
        self.config = config
        self.adapter: Adapter = adapter_for(config.agent.name)
        if self.adapter.package:
            install = AgentInstall(self.adapter)
            self.executable = str(install.executable())
            self.path = f"{install.bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
            self.label = f"{self.adapter.package.split('==')[0]} {install.version()}".strip()
        else:
            found = shutil.which(self.adapter.command[0])
            if found is None:
                raise BadInput(f"agent command '{self.adapter.command[0]}' is not on PATH")
            self.executable, self.path, self.label = found, os.environ.get("PATH", "/usr/bin:/bin"), self.adapter.name
        self.endpoint = config.endpoint_for("coder")
        self.limits = ResourceLimits(address_space_bytes=config.agent.address_space_bytes, open_files=4096,
                                     output_bytes=OUTPUT_BYTES)

    def argv(self, values: dict[str, str]) -> list[str]:
        return [self.executable, *fill(self.adapter.command[1:], values)]

    def env(self, values: dict[str, str]) -> dict[str, str]:
        env = fill({**COMMON_ENV, **self.adapter.env, **self.config.agent.env}, values)
        if self.config.agent.stale_seconds is not None:
            env |= dict.fromkeys(self.adapter.stale_env, f"{self.config.agent.stale_seconds:g}")
        return {**env, "PATH": self.path}


class AgentAttempt:
    """The rounds of one attempt; every way it ends becomes its TaskRow here."""

    def __init__(self, agent: ExternalAgent, proxy: RecordingProxy, task: TaskSpec, attempt: Attempt,
                 judge: Judge) -> None:
        budgets = agent.config.budgets
        self.agent, self.proxy, self.task, self.judge = agent, proxy, task, judge
        self.workdir = attempt.workdir
        self.workspace = self.workdir / "workspace"
        self.entry = self.workspace / task.entry
        self.task_seconds = task.budget_seconds or budgets.task_seconds
        self.budget = AttemptBudget(attempt.run_id, task.id, attempt.cycle, task.max_calls or budgets.max_calls,
                                    budgets.max_completion_tokens, attempt.on_call)
        self.verdict: Verdict | None = None
        self.test_seconds = 0.0
        self.round = 0
        self.exit: int | None = None

    async def run(self) -> TaskRow:
        started_at, clock = time.time(), time.monotonic()
        self.deadline = clock + self.task_seconds
        self.workspace.mkdir(parents=True, exist_ok=True)
        base_url, token = self.proxy.open(self.budget)
        try:
            outcome, kind, detail = await self._rounds(base_url, token)
        finally:
            self.proxy.close(token)
        return self._row(started_at, time.monotonic() - clock, outcome, kind, detail)

    async def _rounds(self, base_url: str, token: str) -> tuple[Outcome, str, str]:
        budgets = self.agent.config.budgets
        reserve = min(budgets.final_test_seconds, self.task_seconds / 4)
        for number in range(1, budgets.max_rounds + 1):
            self.round = number
            prompt = opening(self.task)
            if self.verdict is not None:
                prompt += "\n\n" + revision(self.verdict, self.task.entry)
            seconds = self.deadline - time.monotonic() - reserve
            if seconds <= 1:
                return "timeout", "", f"wall budget of {self.task_seconds:g} s spent"
            run = await self._agent(prompt, base_url, token, seconds)
            self.exit = run.returncode
            if self.budget.ended:
                await self._judge_if_written()
                detail = f"{self.budget.ended} after {self.budget.calls} calls"
                if self.budget.ended == "token_cap":
                    detail = token_cap_detail(self.budget.max_completion_tokens, self.budget.estimated_tokens)
                return self.budget.ended, "", detail
            if run.timed_out:
                await self._judge_if_written()
                killed = f"wall budget of {self.task_seconds:g} s spent (the agent was killed)"
                return "timeout", "", f"{killed}\n{tail(run.output)}"
            if not self.entry.is_file():
                return self._missing(run)
            if (ended := final(await self._judge())) is not None:
                return ended
        return "fail", "", ""

    def _missing(self, run: Contained) -> tuple[Outcome, str, str]:
        """No entry file after the agent ended: whose failure it was."""
        totals = self.budget.totals
        output = tail(run.output, 30)
        if totals.calls and totals.infra_failures == totals.calls:
            return "infra_error", "InfraError", f"every call failed ({totals.last_error})\n{output}"
        if run.returncode != 0:
            exited = f"the agent exited {run.returncode} without writing {self.task.entry}"
            return "agent_error", "AgentExit", f"{exited}\n{output}"
        return "no_artifact", "", f"{self.task.entry} was not written in round {self.round}\n{output}"

    async def _agent(self, prompt: str, base_url: str, token: str, seconds: float) -> Contained:
        """Run the agent once, in a fresh temporary HOME; its transcript and output land in the round's folder."""
        home = Path(tempfile.mkdtemp(prefix="soak-agent-home-")).resolve()
        (home / "tmp").mkdir()
        prompt_file = home / "prompt.md"
        prompt_file.write_text(prompt)
        values = {
            "prompt": prompt, "prompt_file": str(prompt_file), "workspace": str(self.workspace.resolve()),
            "home": str(home), "base_url": base_url, "api_key": token, "model": self.agent.endpoint.model,
            "max_tokens": str(self.agent.endpoint.max_tokens),
            "stale_seconds": f"{self.agent.config.agent.stale_seconds or self.agent.config.budgets.stale_seconds:g}",
        }
        write_home(self.agent.adapter, home, values)
        kind = isolation_kind()
        ws = self.workspace.resolve()
        argv = self.agent.argv(values)
        if kind == "bwrap":  # no network at all but the proxy, reached through its socket
            bridge = [sys.executable, "-I", "-m", "soak.agent.bridge", str(self.proxy.socket_path),
                      str(self.proxy.port), "--"]
            cmd = wrap(kind, ws, [], [*bridge, *argv], writable=(home,))
        else:
            cmd = wrap(kind, ws, [], argv, writable=(home,), network=True)
        job = asyncio.ensure_future(asyncio.to_thread(
            launch, cmd, ws, self.agent.limits, seconds, kind, env=self.agent.env(values), stop=self.budget.stop,
        ))
        try:
            run = await asyncio.shield(job)
        except asyncio.CancelledError:
            self.budget.stop.set()  # the jail kills the agent's whole tree; wait for that before going on
            await asyncio.gather(job, return_exceptions=True)
            raise
        finally:
            self._keep(home)
        (self.workdir / f"round-{self.round}" / "agent" / "output.txt").write_text(run.output)
        return run

    def _keep(self, home: Path) -> None:
        """Copy the agent's own transcript files out of its HOME, then delete the HOME."""
        keep = self.workdir / f"round-{self.round}" / "agent"
        keep.mkdir(parents=True, exist_ok=True)
        for pattern in self.agent.adapter.transcripts:
            for found in glob.glob(str(home / pattern)):
                target = keep / Path(found).relative_to(home)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found, target)
        remove_tree(home)

    async def _judge(self) -> Verdict:
        source = self.entry.read_text(errors="replace")
        verdict = await judged(self.judge, self.task, source, self.workdir / f"round-{self.round}")
        self.verdict = verdict
        self.test_seconds += verdict.duration_s
        return verdict

    async def _judge_if_written(self) -> None:
        """After a budget ended the agent, the file it left is still judged, for the record (tests passed)."""
        if self.entry.is_file() and time.monotonic() < self.deadline:
            await self._judge()

    def _row(self, started_at: float, duration: float, outcome: Outcome, kind: str, detail: str) -> TaskRow:
        verdict, totals = self.verdict, self.budget.totals
        if outcome == "fail" and verdict is not None:
            kind, detail = verdict.error_kind, verdict.error_tail
        return TaskRow(
            run_id=self.budget.run_id, cycle=self.budget.cycle, task_id=self.task.id, suite=self.task.suite,
            started_at=started_at, ended_at=time.time(), duration_s=duration, outcome=outcome,
            rounds=self.round, agent_calls=totals.calls, prompt_tokens=totals.prompt_tokens,
            completion_tokens=totals.completion_tokens, reasoning_tokens=totals.reasoning_tokens,
            cached_tokens=totals.cached_tokens,
            tests_passed=verdict.tests_passed if verdict else 0, tests_total=verdict.tests_total if verdict else 0,
            test_seconds=self.test_seconds, error_kind=kind, error_tail=tail(detail),
            mangled_tool_calls=totals.mangled_tool_calls, reasoning_exhausted=totals.reasoning_exhausted,
            coder_model=self.agent.endpoint.model, agent=self.agent.label, agent_exit=self.exit,
            suspicious=verdict.suspicious if verdict else "",
        )


class AgentNight:
    """The night's task function in mode "agent": one proxy for the night, one AgentAttempt per task attempt."""

    def __init__(self, config: SoakConfig, judge: Judge | None = None) -> None:
        self.agent = ExternalAgent(config)
        endpoint = self.agent.endpoint
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        self.proxy = RecordingProxy(config.roles.coder, endpoint, key, config.budgets)
        self.judge = judge or judge_solution

    async def start(self) -> None:
        await self.proxy.start()

    async def __call__(self, task: TaskSpec, attempt: Attempt) -> TaskRow:
        return await AgentAttempt(self.agent, self.proxy, task, attempt, self.judge).run()

    async def close(self) -> None:
        await self.proxy.stop()

