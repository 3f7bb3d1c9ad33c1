"""`soak sweep FILE`: stack configurations one after another, unattended, each an ordinary run on the same tasks
in the same order; `--resume SWEEP_ID` carries on at the configuration and attempt where it stopped.

A sweep file:

    base = "soak.toml"          # optional: what every configuration starts from (budgets, endpoints, ...)
    suite = "builtin"           # shared by every configuration, with the seed: same tasks, same order
    seed = 0
    canary_share = 0.05         # shared too: every configuration runs the same canaries
    tasks = 12                  # or minutes = 30; a configuration may give its own
    gates = ["prefix-twin"]     # probed once a configuration's stack is up, before its first attempt

    [[configurations]]
    name = "prefix-on"
    [configurations.overrides]  # soak.toml keys on top of the base: tables merge, values and lists replace
    stack.servers = [{name = "vllm", up = "soak engine serve vllm --port 8011", base_url = "..."}]

Per configuration soak starts its servers (the stack supervisor, as `soak run` does), runs the gates, runs the
night, stops the servers and goes on. One whose stack never comes up is recorded `stack_down` and skipped. The
sweep folder (`data/sweeps/<id>/sweep.json`) holds the plan, every configuration resolved before the first
starts, and each one's progress; the runs are `data/<id>.<name>/`, so report, route and compare work on each.

`concurrency = [1, 2, 4, 8]` makes it a capacity sweep: one stack at each level of concurrency, judged by
soak.decisions.capacity (soak.night.capacity says why this is an axis of the sweep and not a command of its own).
"""

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from rich.console import Console

from soak.config import SoakConfig, Strict, load_config, redact
from soak.errors import BadInput
from soak.files import describe_validation_error, load_model, write_atomic
from soak.night import capacity
from soak.night.lifecycle import create_run, reopen_run
from soak.night.loop import RunEnd
from soak.night.plan import MAX_REPEATS, RunOptions, check_agent, check_run_id, new_run_id, plan_run
from soak.night.wiring import SessionOptions, run_night
from soak.paths import data_dir, sweeps_dir
from soak.probes.gate import gate_role
from soak.record.layout import RunLayout
from soak.record.read import load_sweep
from soak.record.schema import RunLimits
from soak.record.sweeps import SweepEntry, SweepInfo

GateName = Literal["prefill", "long-prompt", "prefix-twin", "sessions"]
"""The gates a sweep can probe by itself: soak.probes.gate.SWEEP_GATES, spelled out for the type checker."""
SHARED_KEYS = ("suite", "seed", "canary_share")
SWEEP_FILE = "sweep.json"
ENDED = ("deadline", "tasks", "cycles")


class Length(Strict):
    tasks: int | None = Field(default=None, gt=0)
    """Attempts (the shared seed orders them: every configuration gets the same ones)."""
    minutes: float | None = Field(default=None, gt=0)
    """Running time, its stack's start included."""

    @model_validator(mode="after")
    def _one_length(self) -> "Length":
        if self.tasks is not None and self.minutes is not None:
            raise ValueError("give tasks or minutes, not both")
        return self


class SweepConfiguration(Length):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,40}$")
    """Letters, digits, '-' and '_': it names the run folder `<sweep_id>.<name>`."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """soak.toml keys on top of the base: tables merge key by key, values and lists (stack.servers) replace."""
    gates: list[GateName] | None = None
    """None: the sweep's gates."""


class SweepFile(Length):
    base: Path | None = None
    """A soak.toml every configuration starts from; relative to the sweep file."""
    suite: str = "builtin"
    seed: int = 0
    repeat: int = Field(default=1, ge=1, le=MAX_REPEATS)
    """Tries of each task per cycle (`soak run --repeat`), the same for every configuration: pass^k to rank by."""
    canary_share: float = Field(default=SoakConfig.model_fields["canary_share"].default, ge=0, le=1)
    """Shared like the seed: every configuration runs the same canaries."""
    gates: list[GateName] = Field(default_factory=list)
    concurrency: list[int] = Field(default_factory=list)
    """Agents at once, one level after another (soak.night.capacity): a capacity sweep of one configuration."""
    configurations: list[SweepConfiguration] = Field(default_factory=list)

    _levels = field_validator("concurrency", mode="before")(capacity.check_levels)

    @model_validator(mode="after")
    def _distinct(self) -> "SweepFile":
        if self.concurrency:
            self.configurations = self.levels()
        if not self.configurations:
            raise ValueError(f"give [[configurations]], or the levels of a capacity sweep: {capacity.EXAMPLE}")
        names = [c.name for c in self.configurations]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"configuration names must differ: {', '.join(twice)} given twice")
        for configuration in self.configurations:
            shared = [key for key in SHARED_KEYS if key in configuration.overrides]
            if shared:
                raise ValueError(f"configuration {configuration.name}: {', '.join(shared)} belong to the whole sweep "
                                 "(every configuration sees the same tasks in the same order)")
        return self

    def levels(self) -> list[SweepConfiguration]:
        """The capacity sweep's configurations: its one configuration (or none) at each level of concurrency."""
        if len(self.configurations) > 1:
            raise ValueError("a capacity sweep (concurrency = [...]) measures one stack: give at most one "
                             "[[configurations]], or sweep the stacks first and measure the chosen one")
        one = self.configurations[0] if self.configurations else SweepConfiguration(name="c")
        prefix = one.name if self.configurations else ""
        return [one.model_copy(update={"name": capacity.level_name(prefix, agents),
                                       "overrides": capacity.level_overrides(one.overrides, agents)})
                for agents in self.concurrency]

    def limits(self, configuration: SweepConfiguration) -> RunLimits:
        """The configuration's own length, else the sweep's, else one pass over the suite."""
        own = configuration if configuration.tasks or configuration.minutes else self
        if own.tasks:
            return RunLimits(max_tasks=own.tasks, repeats=self.repeat)
        if own.minutes:
            return RunLimits(duration_seconds=own.minutes * 60, repeats=self.repeat)
        return RunLimits(max_cycles=1, repeats=self.repeat)


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` on top of `base`: tables merge key by key, everything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def check_repeats(repeat: int, limits: RunLimits, suite_tasks: int) -> None:
    """A task's tries are one pass over the suite apart, so `tasks` short of `repeat` passes leaves some task with
    fewer tries, and pass^k (which ranks the configurations) only reaches the fewest: bad input, with the fix."""
    if repeat == 1 or limits.max_tasks is None or limits.max_tasks >= suite_tasks * repeat:
        return
    raise BadInput(f"tasks = {limits.max_tasks} with repeat = {repeat} leaves some of a pass's {suite_tasks} tasks "
                   f"(canaries included) with fewer than {repeat} tries (a task's tries are one pass over the suite "
                   f"apart), so pass^{repeat} cannot rank: give tasks = {suite_tasks * repeat}, a suite of at most "
                   f"{max(1, limits.max_tasks // repeat)} tasks, or minutes")


def plan_sweep(path: Path, sweep_id: str | None) -> tuple[SweepInfo, list[SoakConfig]]:
    """Every configuration resolved and checked before anything is written (a bad one is bad input, exit 2)."""
    spec = load_model(path, SweepFile, "sweep file")
    sweep_id = sweep_id or new_run_id()
    check_run_id(sweep_id)
    base = load_config(path.parent / spec.base if spec.base else None).model_dump()
    entries, configs = [], []
    for configuration in spec.configurations:
        shared = {"suite": spec.suite, "seed": spec.seed, "canary_share": spec.canary_share}
        raw = merged(base, {**configuration.overrides, **shared})
        try:
            config = SoakConfig.model_validate(raw)
        except ValidationError as error:
            raise BadInput(describe_validation_error(f"{path}: configuration {configuration.name}", error)) from None
        check_agent(config)
        run_id = f"{sweep_id}.{configuration.name}"
        limits = spec.limits(configuration)
        _, _, tasks = plan_run(config, run_id, limits)  # roles, endpoints and the suite, checked now
        check_repeats(spec.repeat, limits, len(tasks))
        if spec.concurrency:
            capacity.check_room(config.concurrency, limits, len(tasks) * spec.repeat)
        if (data_dir() / run_id).exists():
            raise BadInput(f"run {run_id} already exists in {data_dir()}: pick another --sweep-id")
        gates = spec.gates if configuration.gates is None else configuration.gates
        entries.append(SweepEntry(name=configuration.name, run_id=run_id, config=config.model_dump(mode="json"),
                                  limits=limits, gates=list(gates)))
        configs.append(config)
    info = SweepInfo(sweep_id=sweep_id, created_at=time.time(), source=str(path.resolve()), suite=spec.suite,
                     seed=spec.seed, configurations=entries, levels=spec.concurrency)
    return info, configs


class Sweep:
    """A sweep folder and its sweep.json, rewritten atomically at every step so a kill loses nothing."""

    def __init__(self, folder: Path, info: SweepInfo, configs: list[SoakConfig], console: Console, quiet: bool):
        self.folder, self.info, self.configs, self.console, self.quiet = folder, info, configs, console, quiet

    @classmethod
    def start(cls, path: Path, sweep_id: str | None, console: Console, quiet: bool) -> "Sweep":
        info, configs = plan_sweep(path, sweep_id)
        folder = sweeps_dir() / info.sweep_id
        if folder.exists():
            raise BadInput(f"sweep {info.sweep_id} already exists in {folder.parent}; "
                           f"continue it with soak sweep --resume {info.sweep_id}")
        folder.mkdir(parents=True)
        sweep = cls(folder, info, configs, console, quiet)
        sweep.save()
        return sweep

    @classmethod
    def resume(cls, sweep_id: str, console: Console, quiet: bool) -> "Sweep":
        folder, info = load_sweep(sweep_id)
        try:
            configs = [SoakConfig.model_validate(entry.config) for entry in info.configurations]
        except ValidationError as error:
            raise BadInput(describe_validation_error(str(folder / SWEEP_FILE), error)) from None
        return cls(folder, info, configs, console, quiet)

    def save(self) -> None:
        """sweep.json with every configuration's config redacted, as run.json keeps it."""
        shown = self.info.model_copy(update={"configurations": [
            entry.model_copy(update={"config": redact(entry.config)}) for entry in self.info.configurations]})
        write_atomic(self.folder / SWEEP_FILE, shown.model_dump_json(indent=2) + "\n")

    def say(self, text: str) -> None:
        self.console.print(f"sweep {self.info.sweep_id}: {text}", markup=False, soft_wrap=True)

    def run(self) -> int:
        """Each configuration not yet ended, in order; the exit code of the sweep so far (a signal stops it)."""
        total = len(self.info.configurations)
        for number, (entry, config) in enumerate(zip(self.info.configurations, self.configs, strict=True), 1):
            if entry.status not in ("pending", "running"):
                continue
            self.say(f"configuration {number}/{total} {entry.name}: "
                     f"{'resuming' if entry.status == 'running' else 'starting'} its stack")
            end = self.run_configuration(entry, config)
            if end is not None and end.reason == "signal":
                self.say(f"stopped in configuration {entry.name}; carry on with soak sweep --resume "
                         f"{self.info.sweep_id}")
                return end.exit_code
        return self.verdict()

    def run_configuration(self, entry: SweepEntry, config: SoakConfig) -> RunEnd | None:
        """One configuration's night (started, or resumed where it stopped); None when its stack never came up."""
        if entry.status == "running" and RunLayout(data_dir() / entry.run_id).info.is_file():
            folder, info, config, tasks = reopen_run(RunOptions(resume=entry.run_id))
        else:
            info, config, tasks = plan_run(config, entry.run_id, entry.limits)
            folder = create_run(info)
        entry.status, entry.started_at = "running", entry.started_at or time.time()
        self.save()

        async def gates() -> None:
            if not entry.gates or entry.gate_results:
                return
            results = await gate_role(config, "coder", list(entry.gates), config.gates)
            entry.gate_results = [result.record() for result in results]
            write_atomic(folder.layout.gates, "[\n" + ",\n".join(
                r.model_dump_json() for r in entry.gate_results) + "\n]\n")
            self.save()
            for result in results:
                self.say(f"{entry.name}: {result.line()}")

        try:
            end = run_night(folder, info, config, tasks,
                                SessionOptions(quiet=self.quiet, console=self.console, stack_up=gates))
        except BadInput as error:
            entry.status, entry.detail, entry.ended_at = "stack_down", str(error), time.time()
            self.save()
            self.say(f"{entry.name}: skipped, its stack did not come up: {error}")
            return None
        if end.reason != "signal":
            entry.status = "done" if end.reason in ENDED else "stopped"
            entry.detail, entry.ended_at = end.detail, time.time()
            self.save()
        return end

    def verdict(self) -> int:
        """The standings and the recommendation; 0 when there is one, 1 when no configuration qualified."""
        from soak.decisions.sweep import recommend, standings

        if self.info.levels:
            return self.capacity_verdict()
        found = standings(self.info)
        recommendation = recommend(found)
        self.console.print("\n".join(recommendation.lines(found)), markup=False, soft_wrap=True)
        self.say(f"report: soak report {self.info.sweep_id}")
        return 0 if recommendation.choice else 1


    def capacity_verdict(self) -> int:
        """A capacity sweep's answer: how many agents to run, and what limits the next level; 1 when none qualified."""
        from soak.decisions.capacity import answer, levels

        found = levels(self.info)
        verdict = answer(found)
        self.console.print("\n".join(verdict.lines(found)), markup=False, soft_wrap=True)
        self.say(f"report: soak report {self.info.sweep_id}")
        return 0 if verdict.agents else 1


def sweep_command(path: Path | None, resume: str | None, sweep_id: str | None, quiet: bool,
                  console: Console | None = None) -> int:
    """`soak sweep FILE` or `soak sweep --resume SWEEP_ID`; returns the exit code."""
    console = console or Console()
    if path is not None and resume is None:
        sweep = Sweep.start(path, sweep_id, console, quiet)
    elif resume is not None and path is None:
        if sweep_id:
            raise BadInput("--resume continues a sweep with its own id; drop --sweep-id")
        sweep = Sweep.resume(resume, console, quiet)
    else:
        raise BadInput("give a sweep file, or --resume SWEEP_ID")
    return sweep.run()

