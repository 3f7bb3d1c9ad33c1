"""An external agent as a driver of the attempt core: the agent runs jailed in the task's workspace with a temporary
HOME, reaches the model only through the recording proxy (which charges the attempt's ledger), and its entry file on
disk is judged exactly as soak's own loop's is; a failed round starts the agent again with the real error tail.

Outcomes as for soak's loop, plus `agent_error`: the agent exited non-zero (or died) without writing the entry file,
which counts against the stack; an agent that exits 0 without it is `no_artifact`.
"""

import asyncio
import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from soak.agent.adapters import COMMON_ENV, Adapter, AgentInstall, adapter_for, fill, write_home
from soak.agent.attempt import (
    AgentFailure,
    AttemptContext,
    AttemptCore,
    AttemptEnded,
    InfraFailure,
    Judge,
    Ledger,
    NoArtifact,
    WallBudget,
)
from soak.agent.commands import ran_tests
from soak.agent.finish import closing
from soak.agent.prompts import opening, revision
from soak.agent.proxy import ProxiedAttempt, RecordingProxy
from soak.config import SoakConfig
from soak.errors import BadInput
from soak.record.schema import TaskRow
from soak.sandbox.disk import remove_tree
from soak.sandbox.jail import Contained, ResourceLimits, Wiring, launch, wrap
from soak.sandbox.judge import isolation_kind, tail
from soak.sandbox.judge import judge as judge_solution
from soak.sandbox.sized import SizedDisk
from soak.sandbox.visible import JailView, allow_listed, allowed, module_file, run_module, venv_dirs
from soak.tasks.spec import TaskSpec

OUTPUT_BYTES = 256 * 1024
AGENT_PROCESSES = 1024
"""pids.max of an agent's cgroup: an agent runs shells, test runs and language servers, a fork bomb far more."""
BRIDGE = "soak.agent.bridge"
SCRIPT_SUFFIXES = (".py", ".sh", ".js", ".mjs", ".ts", ".rb", ".pl")
"""An agent command's argument with one of these names a script, which must exist."""
NOT_KEPT = "not-kept.txt"
"""Written beside an agent's kept transcript files when a file its adapter keeps was left behind: its name and why."""


def agent_isolation(config: SoakConfig) -> str:
    """The isolation an agent gets on this host. Every kind but a plain session keeps the judged party from writing
    its own verdict (the run folder) and from reaching the model around the proxy: in a session an agent runs only
    when soak.toml opts in."""
    kind = isolation_kind()
    if not allow_listed(kind) and not config.agent.uncontained:
        raise BadInput(f"an agent on this host would run under '{kind}', which cannot keep it from writing the night's "
                       "records or calling the model around the proxy: install bubblewrap (apt-get install "
                       "bubblewrap) or let soak use unshare, or set [agent] uncontained = true in soak.toml")
    return kind


class ExternalAgent:
    """An agent CLI resolved for a night: its adapter, executable, version and jail settings."""

    def __init__(self, config: SoakConfig) -> None:
        self.config = config
        self.isolation = agent_isolation(config)
        self.adapter: Adapter = adapter_for(config.agent.name)
        self.visible: list[Path] = [path.expanduser() for path in config.agent.readable]
        """What the agent reads outside the jail's allow-list: its venv and the Python it was made from, `readable`."""
        if self.adapter.package:
            install = AgentInstall(self.adapter)
            self.executable = str(install.executable())
            self.visible.extend(venv_dirs(install.venv))
            self.path = f"{install.bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
            self.label = f"{self.adapter.package.split('==')[0]} {install.version()}".strip()
        else:
            found = shutil.which(self.adapter.command[0])
            if found is None:
                raise BadInput(f"agent command '{self.adapter.command[0]}' is not on PATH")
            executable = Path(found).absolute()
            self.executable, self.label = str(executable), self.adapter.name
            self.path = os.environ.get("PATH", "/usr/bin:/bin")
            if not any(executable.is_relative_to(shown) for shown in [*allowed()[1], *self.visible]):
                self.visible.append(executable)  # a program of the user's own, outside the system the jail shows
        arguments = self.adapter.command[1:]  # a built-in adapter's are soak's own words, never the user's files
        self.arguments = list(arguments) if self.adapter.package else [self.own_file(part) for part in arguments]
        self.endpoint = config.endpoint_for("coder")
        self.limits = ResourceLimits(address_space_bytes=config.agent.address_space_bytes, open_files=4096,
                                     output_bytes=OUTPUT_BYTES, workspace_bytes=config.agent.disk_bytes,
                                     max_processes=AGENT_PROCESSES)

    def own_file(self, argument: str) -> str:
        """An argument that names a file of the host (the agent's own script) by its absolute path, made visible
        read-only: the agent runs in its workspace, in a jail that shows nothing else of the host. A script that does
        not exist is refused before the night starts, not found by every attempt."""
        if "{" in argument or argument.startswith("-"):
            return argument
        path = Path(argument).expanduser()
        if path.is_file():
            self.visible.append(path.absolute())
            return str(path.absolute())
        if path.suffix in SCRIPT_SUFFIXES:
            raise BadInput(f"agent command: {argument} is not a file (a path in the command is read from "
                           f"{Path.cwd()}); give its full path")
        return argument

    def argv(self, values: dict[str, str]) -> list[str]:
        return [self.executable, *fill(self.arguments, values)]

    def env(self, values: dict[str, str]) -> dict[str, str]:
        env = fill({**COMMON_ENV, **self.adapter.env, **self.config.agent.env}, values)
        if self.config.agent.stale_seconds is not None:
            env |= dict.fromkeys(self.adapter.stale_env, f"{self.config.agent.stale_seconds:g}")
        return {**env, "PATH": self.path}


class AgentRounds:
    """The external agent as a driver of the attempt core: each round runs the agent once, jailed, in a fresh HOME,
    with the opening prompt (plus the real error tail after a failed round); the proxy charges the core's ledger."""

    def __init__(self, agent: ExternalAgent, proxy: RecordingProxy, core: AttemptCore) -> None:
        self.agent, self.proxy, self.core = agent, proxy, core
        self.exit: int | None = None
        self.run: Contained | None = None

    async def __aenter__(self) -> "AgentRounds":
        core, context = self.core, self.core.context
        self.base_url, self.token = self.proxy.open(ProxiedAttempt(core.ledger, context.run_id, context.attempt))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.proxy.close(self.token)

    def row_fields(self) -> dict[str, Any]:
        return {"coder_model": self.agent.endpoint.model, "agent": self.agent.label, "agent_exit": self.exit}

    async def write(self, core: AttemptCore, number: int) -> None:
        prompt = opening(core.task)
        if core.verdict is not None:
            prompt += "\n\n" + revision(core.verdict, core.task.entry)
        seconds = core.left() - core.reserve
        if seconds <= 1:
            raise WallBudget(f"wall budget of {core.seconds:g} s spent")
        core.context.on_step(number, "agent")
        self.run = run = await self._agent(prompt, number, seconds)
        self.exit = run.returncode
        ending = closing(self.agent.adapter.name, core.layout.agent_files(number), run.output, core.ledger.last_words)
        core.claimed(ending.claim, ending.source, ending.text)
        core.coder_claim = ending.model
        core.ledger.raise_ended()
        if run.timed_out:
            raise WallBudget(f"wall budget of {core.seconds:g} s spent (the agent was killed)\n{tail(run.output)}")
        limits = self.agent.limits
        if run.out_of_memory:
            raise AgentFailure(f"the agent's memory (anonymous, memfd, shm and tmpfs pages) passed its limit of "
                               f"{limits.address_space_bytes >> 20} MiB and it was killed\n{tail(run.output)}",
                               "MemoryLimit")
        if run.over_quota:
            raise AgentFailure(f"the agent's workspace and HOME (unlinked files held open included) filled their "
                               f"limit of {limits.workspace_bytes >> 20} MiB and it was killed\n{tail(run.output)}",
                               "DiskQuota")

    def ran_tests(self, ledger: Ledger) -> bool | None:
        """From the commands its replies asked to run (tool calls, shell blocks); None when it asked for none, as an
        agent without tools (aider) may still run tests of its own accord."""
        return ran_tests(ledger.commands) if ledger.commands or ledger.seen_calls else None

    def missing(self, core: AttemptCore, number: int) -> AttemptEnded:
        """No entry file after the agent ended: whose failure it was. The stack's only when every call failed at the
        server (connection, 5xx, stall, cut stream); a request the proxy refused (`bad_request`: malformed, too
        large) is the agent's own error, so an agent that sent only those is judged by its exit."""
        run, totals = self.run, core.ledger.totals
        assert run is not None
        output = tail(run.output, 30)
        if totals.calls and totals.infra_failures == totals.calls:
            return InfraFailure(f"every call failed ({totals.last_error})\n{output}", "InfraError")
        if run.returncode != 0:
            return AgentFailure(f"the agent exited {run.returncode} without writing {core.task.entry}\n{output}",
                                "AgentExit")
        return NoArtifact(f"{core.task.entry} was not written in round {number}\n{output}")

    async def _agent(self, prompt: str, number: int, seconds: float) -> Contained:
        """Run the agent once, in a fresh temporary HOME; its transcript and output land in the round's folder."""
        home = Path(tempfile.mkdtemp(prefix="soak-agent-home-")).resolve()
        (home / "tmp").mkdir()
        (home / "prompt.md").write_text(prompt)
        ws, kind = self.core.workspace.resolve(), isolation_kind()
        # In a jail the workspace and HOME lie on one tmpfs of the disk cap's size; the agent finds its HOME there.
        disk = SizedDisk(ws, home, self.agent.limits.workspace_bytes, kind) if allow_listed(kind) else None
        seen_home = disk.home if disk else home
        values = {
            "prompt": prompt, "prompt_file": str(seen_home / "prompt.md"), "workspace": str(ws), "home": str(seen_home),
            "base_url": self.base_url, "api_key": self.token, "model": self.agent.endpoint.model,
            "max_tokens": str(self.agent.endpoint.max_tokens),
            "stale_seconds": f"{self.agent.config.agent.stale_seconds or self.agent.config.budgets.stale_seconds:g}",
        }
        write_home(self.agent.adapter, home, values)
        argv = self.agent.argv(values)
        if disk is not None:  # no network at all but the proxy, reached through its socket
            bridge = [sys.executable, "-I", *run_module(kind, BRIDGE), str(self.proxy.socket_path),
                      str(self.proxy.port), "--"]
            cmd = wrap(kind, ws, [*disk.command(), *bridge, *argv], JailView(
                visible=(*self.agent.visible, self.proxy.socket_path), harness=(module_file(BRIDGE), *disk.harness),
                disk=disk.mounts()))
        else:  # the host's network: the proxy on its loopback; the workspace and HOME polled
            cmd = wrap(kind, ws, argv)
        stop = self.core.ledger.stop
        wiring = Wiring(env=self.agent.env(values), stop=stop, writable=() if disk else (ws, home), disk=disk)
        job = asyncio.ensure_future(asyncio.to_thread(launch, cmd, ws, self.agent.limits, seconds, kind, wiring))
        keep = self.core.layout.agent_files(number)
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            stop.set()  # the jail kills the agent's whole tree; wait for that before going on
            await asyncio.gather(job, return_exceptions=True)
            raise
        finally:
            await asyncio.to_thread(self._keep, home, keep)
            if job.done() and job.exception() is None:  # also what an agent cut off by the wall budget printed
                self.core.layout.agent_output(number).write_text(job.result().output)

    def _keep(self, home: Path, keep: Path) -> None:
        """Copy the agent's own transcript files out of its HOME, then delete the HOME; run in a thread, as a HOME the
        agent left deep takes a while. Only readable regular files that lie in the HOME, named in UTF-8: the agent
        (dead by now) may have left links there to any file of the host, a pipe, or a file it made unreadable. What is
        left behind is named in NOT_KEPT."""
        keep.mkdir(parents=True, exist_ok=True)
        left = []
        for pattern in self.agent.adapter.transcripts:
            for found in glob.glob(str(home / pattern)):
                source = Path(found)
                name = source.relative_to(home)
                if not (why := unkept(source)):
                    try:
                        (keep / name).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(source, keep / name)
                    except OSError as error:
                        why = error.strerror or str(error)
                left += [f"{name}: {why}"] if why else []
        if left:
            (keep / NOT_KEPT).write_text("\n".join(left) + "\n", errors="backslashreplace")
        remove_tree(home)


def unkept(source: Path) -> str:
    """Why a file of an agent's HOME that its adapter keeps stays there; "" for a regular file that lies in the HOME
    (no link on the way), named in UTF-8 (no report or export could name it otherwise)."""
    try:
        str(source).encode()
    except UnicodeEncodeError:
        return "a name that is not UTF-8"
    try:
        if source.resolve() == source and source.is_file():
            return ""
    except (OSError, RuntimeError):  # a loop of links
        pass
    return "a link, or not a regular file"


class AgentNight:
    """The night's task function in mode "agent": one proxy for the night; AgentRounds drives each attempt."""

    def __init__(self, config: SoakConfig, judge: Judge | None = None) -> None:
        self.agent = ExternalAgent(config)
        endpoint = self.agent.endpoint
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        self.proxy = RecordingProxy(config.roles.coder, endpoint, key, config.budgets,
                                    config.agent.max_request_bytes)
        self.judge = judge or judge_solution

    async def start(self) -> None:
        await self.proxy.start()

    async def __call__(self, task: TaskSpec, context: AttemptContext) -> TaskRow:
        core = AttemptCore(task, self.agent.config.budgets, context, judge=self.judge)
        return await core.run(AgentRounds(self.agent, self.proxy, core))

    async def close(self) -> None:
        await self.proxy.stop()

