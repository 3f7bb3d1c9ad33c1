"""A run's plan: from the flags, soak.toml, the routing file and the embedded default to the resolved config,
the tasks and the contents of run.json. Reads files; writes nothing (lifecycle creates and resumes the folder)."""

import os
import platform
import re
import secrets
import socket
import time
from importlib import metadata
from pathlib import Path
from typing import Any, get_args

import psutil
from pydantic import BaseModel, ValidationError

from soak.config import SoakConfig, load_config, redact, with_cli_endpoint
from soak.decisions.routing import applied, load_routing
from soak.errors import BadInput
from soak.files import describe_validation_error
from soak.night.loop import finished_attempts
from soak.paths import data_dir
from soak.record.info import Host, Routing, StartedStack
from soak.record.layout import RunLayout
from soak.record.read import read_attempts
from soak.record.schema import MODEL_OUTCOMES, OUTCOME_MEANINGS, Outcome, RunInfo, RunLimits
from soak.tasks.canary import night_canaries
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import load_suites

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")


class RunOptions(BaseModel):
    """`soak run` flags; None means "not given" (soak.toml or the run's own config decides)."""

    config_path: Path | None = None
    hours: float | None = None
    minutes: float | None = None
    tasks: int | None = None
    repeat: int | None = None
    """`--repeat K`: each task K times per cycle (RunLimits.repeats)."""
    suite: str | None = None
    concurrency: int | None = None
    seed: int | None = None
    run_id: str | None = None
    mode: str | None = None
    agent: str | None = None
    """`--agent NAME_OR_COMMAND`: mode "agent" with this agent."""
    base_url: str | None = None
    model: str | None = None
    routing: Path | None = None
    metrics_port: int | None = None
    quiet: bool = False
    resume: str | None = None
    retry: tuple[str, ...] = ()
    """`--retry OUTCOMES` (with --resume): run the attempts that ended so again; the new rows supersede the old."""
    detach: bool = False
    detached: bool = False
    """Set in the child a detached run starts."""
    rehearse: bool = False
    """`--rehearse`: soak starts `soak sim` itself as both roles (soak.night.rehearsal) for a short night."""
    cluster: str | None = None
    """`--cluster ADDRESS`: `[cluster] address`, each attempt a task on that Ray cluster (soak.night.cluster)."""

    def limits(self) -> RunLimits | None:
        """The flags' limits; None when none is given (one pass over the suite, or a resumed run's own)."""
        given = [x for x in (self.hours, self.minutes, self.tasks) if x is not None]
        if len(given) > 1:
            raise BadInput("give one of --hours, --minutes and --tasks")
        if any(x <= 0 for x in given):
            raise BadInput("--hours, --minutes and --tasks must be positive")
        if self.repeat is not None and not 1 <= self.repeat <= MAX_REPEATS:
            raise BadInput(f"--repeat must be from 1 to {MAX_REPEATS}")
        repeats = {"repeats": self.repeat} if self.repeat is not None else {}
        if self.tasks is not None:
            return RunLimits(max_tasks=self.tasks, **repeats)
        if self.hours is not None:
            return RunLimits(duration_seconds=self.hours * 3600, **repeats)
        if self.minutes is not None:
            return RunLimits(duration_seconds=self.minutes * 60, **repeats)
        return RunLimits(max_cycles=1, **repeats) if repeats else None


MAX_REPEATS = 100
"""More tries of a task per cycle than pass^k needs (τ-bench goes to 8) is a typo."""

RESUME_FLAGS = ("config_path", "suite", "concurrency", "seed", "run_id", "mode", "agent", "base_url", "model",
                "routing", "repeat", "cluster")
"""Flags a resume refuses: a resumed run keeps its own config."""


def resolve_config(opts: RunOptions) -> SoakConfig:
    """soak.toml, then the flags on top."""
    config = with_cli_endpoint(load_config(opts.config_path), opts.base_url, opts.model)
    flags = {"suite": opts.suite, "concurrency": opts.concurrency, "seed": opts.seed, "mode": opts.mode}
    overrides: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    if opts.agent:
        overrides |= {"mode": "agent", "agent": {**config.agent.model_dump(), "name": opts.agent}}
    if opts.cluster:
        overrides["cluster"] = {**config.cluster.model_dump(), "address": opts.cluster}
    try:
        config = SoakConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as error:
        raise BadInput(describe_validation_error("flags", error)) from None
    if config.concurrency < 1:
        raise BadInput("--concurrency must be at least 1")
    check_agent(config)
    if config.cluster.address:
        from soak.night.cluster import check_cluster

        check_cluster(config.cluster.address)
    return config


def check_agent(config: SoakConfig) -> None:
    """An unknown or uninstalled agent is bad input before any folder exists."""
    if config.mode == "agent":
        from soak.agent.external import ExternalAgent

        ExternalAgent(config)


def embed_default_stack(config: SoakConfig) -> tuple[SoakConfig, StartedStack]:
    """No endpoint configured: the embedded llama.cpp server with the bundled model serves both roles."""
    from soak.stack.servers import embedded_default

    server, endpoint, stack_info = embedded_default()
    stack = config.stack.model_copy(update={"servers": [server, *config.stack.servers]})
    update = {"endpoints": {"embedded": endpoint}, "roles": {"orchestrator": "embedded", "coder": "embedded"},
              "stack": stack}
    started = StartedStack.model_validate({**stack_info, "embedded": True})
    return SoakConfig.model_validate({**config.model_dump(), **update}), started


def select_tasks(config: SoakConfig, routing: Routing) -> list[TaskSpec]:
    """The suite with its canary twins (picked from the whole suite, so routing leaves them as they are) minus the
    tasks the routing file skips; every escalation must name a defined endpoint."""
    routing.check(config.endpoints)
    suite = load_suites(config.suite)
    suite += night_canaries(suite, config.canary_share, config.seed)
    tasks = [t for t in suite if not applied(routing, t).skip]
    if not tasks:
        raise BadInput(f"the routing file skips every task of suite {config.suite}")
    return tasks


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("soak", "openai", "pydantic", "httpx2", "rich"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def host(config: SoakConfig) -> Host:
    """The machine the night runs on, and what it offers an external agent (agent_host)."""
    return Host(hostname=socket.gethostname(), platform=platform.platform(), cpus=os.cpu_count(),
                memory_bytes=psutil.virtual_memory().total, **agent_host(config).model_dump())


def agent_host(config: SoakConfig) -> Host:
    """What the host offers an external agent: its isolation kind (the report tells an uncontained night by it); and
    the agent's own stale-stream watchdog as it runs here (None when none is known), which the report sets the
    night's longest silences against."""
    if config.mode != "agent":
        return Host()
    from soak.agent.adapters import adapter_for
    from soak.agent.external import agent_isolation

    adapter = adapter_for(config.agent.name)
    return Host(agent_isolation=agent_isolation(config), agent_name=adapter.name,
                agent_stale_seconds=adapter.watchdog_seconds(config.agent.stale_seconds))


def plan_new_run(opts: RunOptions) -> tuple[RunInfo, SoakConfig, list[TaskSpec]]:
    """Everything that can be wrong with a new run, found before anything is written: run.json's contents (config
    redacted), the resolved config and the tasks."""
    run_id = opts.run_id or new_run_id()
    check_run_id(run_id)
    stack = StartedStack()
    if opts.rehearse:
        from soak.night.rehearsal import refuse_flags, rehearsal_config

        refuse_flags(opts)
        config, stack = rehearsal_config(data_dir() / run_id, opts.concurrency, opts.seed), StartedStack(rehearsal=True)
    else:
        config = resolve_config(opts)
    return plan_run(config, run_id, opts.limits() or RunLimits(max_cycles=1), load_routing(opts.routing), stack)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def check_run_id(run_id: str) -> None:
    if not RUN_ID.match(run_id):
        raise BadInput(f"run id '{run_id}': use letters, digits, '-', '_' and '.' (up to 100)")


def plan_run(config: SoakConfig, run_id: str, limits: RunLimits, routing: Routing | None = None,
             stack: StartedStack | None = None) -> tuple[RunInfo, SoakConfig, list[TaskSpec]]:
    """A resolved config -> run.json's contents, the config (the embedded default when it names no endpoint) and
    the tasks; `soak run` and each configuration of `soak sweep` plan here."""
    routing, stack = routing or Routing(), stack or StartedStack()
    if not config.endpoints:
        config, stack = embed_default_stack(config)
    for role in ("coder",) if config.mode == "direct" else ("orchestrator", "coder"):
        config.endpoint_for(role)
    tasks = select_tasks(config, routing)
    info = RunInfo(
        run_id=run_id, created_at=time.time(), config=SoakConfig.model_validate(redact(config.model_dump(mode="json"))),
        limits=limits, routing=routing, stack=stack, versions=versions(), host=host(config),
    )
    return info, config, tasks


RETRYABLE_OUTCOMES = tuple(o for o in get_args(Outcome) if o not in MODEL_OUTCOMES)
"""What `--retry` may name: outcomes that say something about the stack or the harness, not the model. A verdict
on the model (fail, timeout, ...) is never re-rolled into a better one."""


def retry_help() -> str:
    """`soak run --retry`'s help: the outcomes it may name, each with its meaning."""
    listed = ", ".join(f"{name} ({OUTCOME_MEANINGS[name]})" for name in RETRYABLE_OUTCOMES)
    return ("With --resume: run again the attempts that ended so; each new row supersedes the old one, which stays "
            f"in tasks.csv. OUTCOMES, comma-separated, of: {listed}.")


def parse_retry(text: str | None) -> tuple[str, ...]:
    """`--retry infra_error,harness_error` -> the outcomes, checked."""
    names = tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))
    for name in names:
        if name in MODEL_OUTCOMES:
            raise BadInput(f"--retry {name}: a verdict on the model is not re-run (that would re-roll it); "
                           f"retry one of {', '.join(RETRYABLE_OUTCOMES)}")
        if name not in RETRYABLE_OUTCOMES:
            raise BadInput(f"--retry: unknown outcome '{name}' (retryable: {', '.join(RETRYABLE_OUTCOMES)})")
    return names


def refuse_resume_flags(opts: RunOptions) -> None:
    given = [f"--{name.replace('_', '-')}" for name in RESUME_FLAGS if getattr(opts, name) is not None]
    if given:
        raise BadInput(f"--resume continues a run with its own config; drop {', '.join(given)}")


def plan_resume(opts: RunOptions, info: RunInfo, layout: RunLayout) -> tuple[RunInfo, SoakConfig, list[TaskSpec]]:
    """A resumed run: its own config (the embedded server re-embedded), its own routing, and new limits
    (--hours/--minutes/--tasks) counted from now; returns run.json's new contents, the config and the tasks."""
    config = info.config
    if config is None:
        raise BadInput(f"{layout.info}: no config recorded, so the run cannot be resumed")
    from soak.stack.servers import still_running

    if info.stack.embedded and not still_running(layout.server_logs, "embedded"):
        # The embedded server takes a fresh free port each session: the recorded one may be taken by now. One that
        # outlived its session (soak killed) keeps its port and is taken back.
        others = [s for s in config.stack.servers if s.name != "embedded"]
        bare = config.model_copy(update={"endpoints": {}, "stack": config.stack.model_copy(update={"servers": others})})
        config, _ = embed_default_stack(bare)
    limits = opts.limits()
    tasks = select_tasks(config, info.routing)
    if limits is not None:
        done = len(finished_attempts(read_attempts(layout.tasks), opts.retry))
        info = info.model_copy(update={"limits": RunLimits(
            duration_seconds=None if limits.duration_seconds is None else info.active_seconds + limits.duration_seconds,
            max_tasks=None if limits.max_tasks is None else done + limits.max_tasks, repeats=info.limits.repeats,
        )})
    return info, config, tasks
