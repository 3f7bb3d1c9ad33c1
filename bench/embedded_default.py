"""The embedded default's speed: real `soak run` nights with today's server settings and with the new ones.

Each night is `soak run --tasks N --seed S` with no endpoint configured, so soak starts its embedded llama-cpp-python
server with the bundled SmolLM2-135M model for both roles, exactly as a new user's first run does. The variants
differ only in `soak.stack.servers.embedded_tuning`, `EMBEDDED_MAX_TOKENS` and the chat format: "before" is what
soak did before (no tuning: llama-cpp-python's own defaults for threads, batch, logits and cache; a 768-token cap;
its `chatml-function-calling` format), "server" the current server settings with the old cap and format, "after"
everything current (soak's own chat format, `soak.stack.embedded_chat`, and a 384-token cap). Nights rotate
(before, server, after, then reversed, ...) so machine noise from other work hits all alike, and every night runs
the same tasks in the same order (same suite and seed). Prints, per variant: calls and attempts per minute of the
run's wall time (server start included), median call seconds, prompt tokens per call (what the conversation
holds) and evaluated prompt tokens per call (what the server really computed, from its log), then the ratios to
"before". Load averages before and after.

    .venv/bin/python bench/embedded_default.py [--tasks 4] [--rounds 2] [--seed 0] [--task-seconds S] [--keep]
    .venv/bin/python bench/embedded_default.py --smoke      # one task per variant, one round, 45 s: the CI check
"""

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNNER = """
import sys
import soak.stack.servers as servers
if sys.argv[1] == "before":
    servers.embedded_tuning = lambda: {}
if sys.argv[1] in ("before", "server"):
    servers.EMBEDDED_MAX_TOKENS = 768
    servers.CHAT_FORMAT, servers.EMBEDDED_SERVER = "chatml-function-calling", "llama_cpp.server"
from soak.cli import main
sys.argv = ["soak", *sys.argv[2:]]
main()
"""
PROMPT_EVAL = re.compile(r"prompt eval time =\s*[0-9.]+ ms /\s*(\d+) tokens")
VARIANTS = ("before", "server", "after")


def night(variant: str, round_index: int, workdir: Path, tasks: int, seed: int, config: Path | None) -> dict:
    """One real run of the embedded default; its figures from the run folder."""
    run_id = f"{variant}-{round_index}"
    argv = [sys.executable, "-c", RUNNER, variant, "run", "--tasks", str(tasks), "--seed", str(seed), "--quiet",
            "--run-id", run_id, *(["--config", str(config)] if config else [])]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{run_id}: soak run ended {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    folder = workdir / "data" / run_id
    info = json.loads((folder / "run.json").read_text())
    with (folder / "calls.csv").open() as handle:
        calls = [row for row in csv.DictReader(handle) if row["status"] == "ok"]
    with (folder / "tasks.csv").open() as handle:
        attempts = list(csv.DictReader(handle))
    log = "\n".join(path.read_text(errors="replace") for path in (folder / "logs").glob("*.log"))
    evaluated = [int(n) for n in PROMPT_EVAL.findall(log)]
    return {
        "variant": variant, "run_id": run_id, "wall_s": info["ended_at"] - info["started_at"], "process_s": wall,
        "calls": len(calls), "attempts": len(attempts),
        "call_s": [float(c["duration_s"]) for c in calls],
        "prompt_tokens": [int(c["prompt_tokens"]) for c in calls if c["prompt_tokens"]],
        "evaluated_tokens": evaluated,
        "settings": info["stack"]["settings"] if isinstance(info["stack"], dict) else {},
    }


def summary(nights: list[dict]) -> dict:
    wall = sum(n["wall_s"] for n in nights)
    calls = sum(n["calls"] for n in nights)
    durations = [d for n in nights for d in n["call_s"]]
    prompts = [p for n in nights for p in n["prompt_tokens"]]
    evaluated = [e for n in nights for e in n["evaluated_tokens"]]
    return {
        "nights": len(nights), "attempts": sum(n["attempts"] for n in nights), "calls": calls, "wall_s": wall,
        "calls_per_min": calls / (wall / 60) if wall else 0.0,
        "attempts_per_min": sum(n["attempts"] for n in nights) / (wall / 60) if wall else 0.0,
        "median_call_s": statistics.median(durations) if durations else 0.0,
        "prompt_tokens_per_call": statistics.mean(prompts) if prompts else 0.0,
        "evaluated_tokens_per_call": sum(evaluated) / len(evaluated) if evaluated else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4, help="finished attempts per night")
    parser.add_argument("--rounds", type=int, default=2, help="nights per variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the run folders (their path is printed)")
    parser.add_argument("--task-seconds", type=float, help="each attempt's wall budget (soak's default otherwise)")
    parser.add_argument("--smoke", action="store_true", help="one task, one round, 45 s: checks the bench runs")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds, args.task_seconds = 1, 1, 45
    workdir = Path(tempfile.mkdtemp(prefix="soak-bench-embedded-"))
    config = None
    if args.task_seconds:
        config = workdir / "soak.toml"
        config.write_text(f"[budgets]\ntask_seconds = {args.task_seconds:g}\n")
    load_before = os.getloadavg()
    nights: list[dict] = []
    try:
        for round_index in range(args.rounds):
            order = VARIANTS if round_index % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                result = night(variant, round_index, workdir, args.tasks, args.seed, config)
                nights.append(result)
                print(f"{result['run_id']:>9}: {result['calls']:3d} calls, {result['attempts']} attempts in "
                      f"{result['wall_s']:6.1f} s ({result['calls'] / (result['wall_s'] / 60):5.2f} calls/min), "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        if args.keep:
            print(f"run folders in {workdir / 'data'}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    load_after = os.getloadavg()
    figures = {variant: summary([n for n in nights if n["variant"] == variant]) for variant in VARIANTS}
    last = [n for n in nights if n["variant"] == "after"][-1:]
    tuned = {k: v for k, v in last[0]["settings"].items() if k not in ("model", "port")} if last else {}
    print(f"\n{args.tasks} tasks x {args.rounds} rounds per variant, seed {args.seed}, {os.cpu_count()} cores")
    print(f"{'variant':>8} {'nights':>6} {'attempts':>8} {'calls':>5} {'wall s':>7} {'calls/min':>9} "
          f"{'attempts/min':>12} {'median call s':>13} {'prompt tok/call':>15} {'evaluated tok/call':>18}")
    for variant, f in figures.items():
        print(f"{variant:>8} {f['nights']:6d} {f['attempts']:8d} {f['calls']:5d} {f['wall_s']:7.1f} "
              f"{f['calls_per_min']:9.2f} {f['attempts_per_min']:12.2f} {f['median_call_s']:13.2f} "
              f"{f['prompt_tokens_per_call']:15.0f} {f['evaluated_tokens_per_call']:18.0f}")
    for measure in ("calls_per_min", "attempts_per_min"):
        before = figures["before"][measure]
        for variant in VARIANTS[1:]:
            now = figures[variant][measure]
            print(f"ratio ({variant} / before, {measure.replace('_per_min', ' per minute')}): "
                  f"{now / before if before else float('nan'):.2f}")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if tuned:
        print("server settings after:", json.dumps(tuned))


if __name__ == "__main__":
    main()
