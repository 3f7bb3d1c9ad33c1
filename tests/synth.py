"""Synthetic run folders written through the row models and the run folder's layout: report tests and the scale
benchmark (bench/report_scale.py)."""

import json
import math
import random
from collections.abc import Iterable
from pathlib import Path

from soak.config import Agent, Budgets, SoakConfig
from soak.files import write_atomic
from soak.record.folder import CsvLog
from soak.record.identity import AttemptId
from soak.record.info import Host
from soak.record.layout import AttemptLayout, RunLayout
from soak.record.schema import CallRow, EventRow, Row, RunInfo, RunLimits, SampleRow, Session, TaskRow

START = 1_760_000_000.0
PROBLEMS = [
    "word-frequency", "luhn-checksum", "roman-numerals", "matrix-spiral", "lru-cache", "interval-merge",
    "json-pointer", "csv-quoting", "topo-sort", "rate-limiter", "diff-lines", "bank-account",
    "markdown-table", "cron-parser", "trie-autocomplete", "dijkstra",
]
BAD_JSON = 'Expecting value: line 1 column 12 (char 11) <tool_call>{"name": write_file'
HOSTILE_CODE = "print('<script>alert(1)</script>')"
TRANSCRIPTS = 40
"""Tasks that get a transcript of their broken tool calls (the report shows the first few)."""
LONG_EVERY, LONG_AT = 50, 7
"""With work folders, attempt i with i % 50 == 7 has a long transcript (over a page: cut, with the raw file)."""
HOSTILE_TAIL = "AssertionError: got '<script>alert(\"pwned\")</script>' & friends\n</pre><b>not bold</b>"
TAMPERED_EVERY, TAMPERED_AT = 29, 13
"""Attempt i with i % 29 == 13 (unless an infra error) tampered with its judging."""
SUSPICIOUS_EVERY, SUSPICIOUS_AT = 11, 4
"""Attempt i with i % 11 == 4 carries reasons from the static look (a pass then is a suspicious pass)."""
TOUCHED_EVERY, TOUCHED_AT = 13, 6
"""Attempt i with i % 13 == 6 (unless an infra error) left a conftest and a test file in its workspace."""
TOUCHED = "conftest.py; test_solution.py"
HOSTILE_TOUCHED = "<script>alert('touched')</script>.pth; conftest.py"
TAMPER_TAIL = ("Tampering: pytest plugins registered after the session started: solution_plugin\n"
               "hook pytest_runtest_makereport added\n3 of 5 tests passed")
HOSTILE_TAMPER_TAIL = "Tampering: conftest.py added: <script>alert('tamper')</script>\n</pre><i>not italic</i>"
SUSPICIOUS = "Anything.__eq__ always answers True (line 3); imports gc (line 1)"
HOSTILE_SUSPICIOUS = ("names the test harness or files ('<script>alert(\"sus\")</script>') (line 2); "
                      "imports pytest (line 1)")


def write_rows(path: Path, model: type[Row], rows: Iterable[Row]) -> None:
    """Through the run's own CSV writer, so the fixture has exactly the format a real run has."""
    log = CsvLog(path, model)
    try:
        for row in rows:
            log.append(row)
    finally:
        log.close()


def build_run(
    root: Path, *, run_id: str = "night-1", tasks: int = 60, calls_per_task: int = 10, hours: float = 8.0,
    sample_seconds: float = 5.0, engine: str = "vllm", seed: int = 0, restarts: int = 2, in_progress: bool = False,
    torn: bool = False, hostile: bool = False, vary_calls: bool = True, work: bool = False,
) -> Path:
    """A run folder with realistic shapes: outcomes by problem difficulty, restarts, mangled calls, telemetry; with
    `work`, every attempt's work folder too (transcript, each round's solution and test output); without, the
    first attempts with mangled calls keep a transcript of just those, without verdicts (as older runs wrote it)."""
    rng = random.Random(seed)
    folder = root / run_id
    folder.mkdir(parents=True, exist_ok=True)
    layout = RunLayout(folder)
    end = START + hours * 3600
    restart_at = sorted(START + (i + 1) * hours * 3600 / (restarts + 1) for i in range(restarts))
    model = "Qwen3-Coder-30B" if engine == "vllm" else "SmolLM2-135M-Instruct"
    task_rows, call_rows = [], []
    gap = hours * 3600 / max(tasks, 1)
    for i in range(tasks):
        problem = PROBLEMS[i % len(PROBLEMS)]
        difficulty = (i % len(PROBLEMS)) / len(PROBLEMS)
        started = START + i * gap + rng.random() * gap * 0.2
        near_restart = any(0 <= started - r < 120 for r in restart_at)
        n_calls = calls_per_task
        if vary_calls:
            n_calls = max(2, round(rng.gauss(calls_per_task, calls_per_task / 4))) * (4 if rng.random() < 0.03 else 1)
        if near_restart:
            outcome = "infra_error"
        elif hostile and i == 1:
            outcome = "fail"
        else:
            roll = rng.random()
            outcome = "pass" if roll > difficulty * 0.8 else rng.choice(["fail", "fail", "timeout", "call_cap",
                                                                         "no_artifact"])
        duration = 600 + rng.random() * 5 if outcome == "timeout" else min(
            rng.lognormvariate(4.0, 0.6) * (1 + n_calls / 10), 599.0)
        rounds = 1 if outcome == "pass" and rng.random() < 0.7 else 2
        if i % TAMPERED_EVERY == TAMPERED_AT and outcome != "infra_error":
            outcome = "tampered"
        kind = {"fail": "AssertionError", "timeout": "budget", "call_cap": "call_cap", "no_artifact": "no_artifact",
                "infra_error": "ConnectionError", "tampered": "Tampering"}.get(outcome, "")
        tail = HOSTILE_TAIL if hostile and outcome == "fail" else (
            f"test_solution.py:{10 + i % 7}: in test_case\n    assert solve() == {i % 5}\n{kind}" if kind else "")
        if outcome == "tampered":
            tail = HOSTILE_TAMPER_TAIL if hostile else TAMPER_TAIL
        suspicious = ""
        if i % SUSPICIOUS_EVERY == SUSPICIOUS_AT and outcome != "infra_error":
            suspicious = HOSTILE_SUSPICIOUS if hostile else SUSPICIOUS
        touched = ""
        if i % TOUCHED_EVERY == TOUCHED_AT and outcome != "infra_error":
            touched = HOSTILE_TOUCHED if hostile else TOUCHED
        mangled = exhausted = 0
        broken: list[dict[str, str]] = []
        for c in range(n_calls):
            role = "orchestrator" if c % 3 == 0 else "coder"
            at = started + c * duration / n_calls
            verdict = rng.choices(["ok", "none", "mangled_name", "bad_json"], [70, 25, 3, 2])[0]
            mangled += verdict in ("mangled_name", "bad_json")
            name = "delegate" if role == "orchestrator" else "write_file"
            if verdict == "mangled_name":
                name = f'write_file(path="solution.py", content="{HOSTILE_CODE if hostile else "def solve(): ..."}")'
            if verdict in ("mangled_name", "bad_json"):
                broken.append({"name": name, "arguments": "" if verdict == "mangled_name" else '{"path": solution.py'})
            ran_out = rng.random() < 0.01
            exhausted += ran_out
            status = "connection" if outcome == "infra_error" and c == n_calls - 1 else "ok"
            ttft = rng.lognormvariate(-1.2, 0.5) * (1 + 0.3 * math.sin((at - START) / 3600))
            call_rows.append(CallRow(
                run_id=run_id, task_id=problem, cycle=i // len(PROBLEMS), call_index=c, role=role, endpoint="default",
                model=model, stream=True, started_at=at, first_byte_s=ttft * 0.9, ttft_s=ttft,
                duration_s=duration / n_calls, decode_tps=rng.gauss(60 if engine == "vllm" else 25, 6),
                prompt_tokens=rng.randint(800, 6000), completion_tokens=rng.randint(50, 900),
                reasoning_tokens=rng.randint(0, 300), cached_tokens=rng.randint(0, 800), max_tokens=2048,
                finish_reason="length" if ran_out else "tool_calls", tool_calls=int(verdict != "none"),
                tool_names=name, integrity=verdict,
                reasoning_exhausted=ran_out, status=status,
                error=(HOSTILE_TAIL if hostile else BAD_JSON) if verdict == "bad_json" else "",
            ))
        if work:
            write_work(layout.attempt(AttemptId(problem, i // len(PROBLEMS))), problem, rounds, outcome,
                       5 if outcome == "pass" else 2, broken, rng, long=i % LONG_EVERY == LONG_AT)
        elif broken and i < TRANSCRIPTS:
            kept = layout.attempt(AttemptId(problem, i // len(PROBLEMS)))
            kept.path.mkdir(parents=True, exist_ok=True)
            lines = [{"role": "assistant", "content": None, "thread": "coder-1", "round": 1,
                      "tool_calls": [{"id": f"call-{n}", "type": "function", "function": f}]}
                     for n, f in enumerate(broken)]
            kept.transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
        orchestrator_calls = sum(1 for c in range(n_calls) if c % 3 == 0)
        task_rows.append(TaskRow(
            run_id=run_id, cycle=i // len(PROBLEMS), task_id=problem, suite="builtin", route="coder-only" if
            difficulty > 0.8 else "", started_at=started, ended_at=started + duration, duration_s=duration,
            outcome=outcome, rounds=rounds, orchestrator_calls=orchestrator_calls,
            coder_calls=n_calls - orchestrator_calls, delegations=rounds, prompt_tokens=3000 * n_calls,
            completion_tokens=400 * n_calls, tests_passed=5 if outcome == "pass" else 2, tests_total=5,
            test_seconds=1.5, error_kind=kind, error_tail=tail, mangled_tool_calls=mangled,
            reasoning_exhausted=exhausted, orchestrator_model=model, coder_model=model, suspicious=suspicious,
            tests_touched=touched, limit_seconds=600.0, limit_calls=24, limit_tokens=200_000, limit_rounds=2,
        ))
    if in_progress:
        task_rows = [t for t in task_rows if t.ended_at < START + hours * 3600 * 0.9]
    events = [EventRow(run_id=run_id, at=START, kind="run_start")]
    for r in restart_at:
        events += [
            EventRow(run_id=run_id, at=r - 15, kind="health_fail", source=engine, detail="GET /health -> 503"),
            EventRow(run_id=run_id, at=r - 5, kind="down", source=engine, detail="3 health checks failed"),
            EventRow(run_id=run_id, at=r, kind="restart", source=engine, detail="exit code -9 <OOM>"),
            EventRow(run_id=run_id, at=r + 60, kind="up", source=engine),
        ]
    if not in_progress:
        events.append(EventRow(run_id=run_id, at=end, kind="run_end"))
    write_rows(layout.tasks, TaskRow, task_rows)
    write_rows(layout.calls, CallRow, call_rows)
    write_rows(layout.events, EventRow, events)
    write_rows(layout.samples, SampleRow, synth_samples(run_id, engine, hours, sample_seconds, restart_at, rng))
    if torn:
        with layout.tasks.open("a") as handle:
            handle.write(f"1,{run_id},9,word-frequency,builtin,,{end},")
    last_seen = max([t.ended_at for t in task_rows], default=START) if in_progress else end
    info = RunInfo(
        run_id=run_id, created_at=START, started_at=START, ended_at=None if in_progress else end,
        limits=RunLimits(duration_seconds=hours * 3600), versions={"soak": "0.1.0", "python": "3.11"},
        host=Host(hostname="box", cpus=16),
        sessions=[Session(session=0, pid=4242, started_at=START, last_seen_at=last_seen,
                          stopped_at=None if in_progress else end, reason="" if in_progress else "deadline")],
        config=SoakConfig.model_validate({
            "endpoints": {"default": {"base_url": "http://127.0.0.1:8000/v1", "model": model}},
            "roles": {"orchestrator": "default", "coder": "default"}, "mode": "delegate",
            "budgets": {"task_seconds": 600, "max_calls": 24, "stale_seconds": 360},
            "stack": {"servers": [{"name": engine, "base_url": "http://127.0.0.1:8000/v1"}]},
        }),
    )
    write_atomic(layout.info, info.model_dump_json(indent=2))
    return folder


def calls_run(root: Path, calls: list[CallRow], *, run_id: str = "calls", stale_seconds: float = 360.0,
              host: Host | None = None) -> Path:
    """A run folder of the given calls, one passed attempt per (task, cycle) they name, the stale budget in its
    config and `host` in run.json: for the figures taken from calls.csv."""
    folder = root / run_id
    folder.mkdir(parents=True, exist_ok=True)
    layout = RunLayout(folder)
    attempts = sorted({(call.task_id, call.cycle) for call in calls})
    write_rows(layout.tasks, TaskRow, [
        TaskRow(run_id=run_id, cycle=cycle, task_id=task_id, suite="builtin", started_at=START, ended_at=START + 60,
                duration_s=60, outcome="pass", rounds=1) for task_id, cycle in attempts])
    write_rows(layout.calls, CallRow, calls)
    info = RunInfo(run_id=run_id, created_at=START, started_at=START, ended_at=START + 3600,
                   limits=RunLimits(max_tasks=len(attempts)), host=host or Host(),
                   config=SoakConfig(mode="agent" if host else "delegate", agent=Agent(name="hermes" if host else ""),
                                     budgets=Budgets(stale_seconds=stale_seconds)))
    write_atomic(layout.info, info.model_dump_json(indent=2))
    return folder


def solution(problem: str, round_: int, rng: random.Random, lines: int = 60) -> str:
    """A plausible Python file, a few lines different in each round."""
    name = problem.replace("-", "_")
    body = [f"def {name}(data):", f'    """Solve {problem} (round {round_})."""', "    result = []"]
    body += [f"    result.append(step_{k}(data, {k * round_ if k % 7 == 0 else k}))" for k in range(lines)]
    body += ["    return result", ""]
    body += [f"def step_{k}(data, n):\n    return [x * n for x in data][: {k + 1}]\n" for k in range(lines // 3)]
    return "\n".join(body) + f"\n# seed {rng.randint(0, 9)}\n"


def test_output(passed: int, total: int, problem: str) -> str:
    failing = [f"test_solution.py::test_{problem.replace('-', '_')}_{k}" for k in range(passed, total)]
    lines = ["." * passed + "F" * (total - passed) + "    [100%]"]
    if failing:
        lines += ["=" * 20 + " FAILURES " + "=" * 20]
        for test in failing:
            lines += [f"____ {test} ____", f"    assert solve({test[-1]}) == {test[-1]}", "E   AssertionError"]
        lines += ["=" * 10 + " short test summary info " + "=" * 10]
        lines += [f"FAILED {test} - AssertionError" for test in failing]
        lines.append(f"{total - passed} failed, {passed} passed in 0.12s")
    else:
        lines.append(f"{passed} passed in 0.10s")
    return "\n".join(lines) + "\n"


def write_work(work: AttemptLayout, problem: str, rounds: int, outcome: str, final_passed: int,
               broken: list[dict[str, str]], rng: random.Random, long: bool = False, total: int = 5) -> None:
    """An attempt's work folder as the loop leaves it: transcript.jsonl (orchestrator and coder threads, tool calls
    with reasoning, broken calls among them) and round-N/ with the judged solution and its test output."""
    lines: list[dict] = [{"role": "system", "content": "You lead a coding task.", "thread": "orchestrator", "round": 1},
                         {"role": "user", "content": f"# Instructions\n\nSolve {problem}.\n" * 20,
                          "thread": "orchestrator", "round": 1}]
    counts = [rng.randint(0, total - 1) for _ in range(rounds - 1)] + [final_passed]
    for r in range(1, rounds + 1):
        coder, code = f"coder-{r}", solution(problem, r, rng)
        if r > 1:
            lines.append({"role": "user", "thread": "orchestrator", "round": r, "content": (
                f"The tests failed ({counts[r - 2]}/{total} passed, AssertionError):\n"
                f"{test_output(counts[r - 2], total, problem)}\nThe tests are correct, fix the code in solution.py.")})
        lines.append({"role": "assistant", "content": "", "thread": "orchestrator", "round": r, "tool_calls": [
            {"id": f"d{r}", "type": "function", "function": {"name": "delegate", "arguments": json.dumps(
                {"instructions": f"Write solution.py for {problem}."})}}], "verdicts": {f"d{r}": "ok"}})
        lines += [{"role": "system", "content": "You write code.", "thread": coder, "round": r},
                  {"role": "user", "content": f"Write solution.py for {problem}.", "thread": coder, "round": r}]
        extra = broken if r == 1 else []
        for n, function in enumerate(extra):
            lines += [{"role": "assistant", "content": None, "thread": coder, "round": r,
                       "tool_calls": [{"id": f"b{n}", "type": "function", "function": function}],
                       "verdicts": {f"b{n}": "bad_json" if function["arguments"] else "mangled_name"}},
                      {"role": "tool", "tool_call_id": f"b{n}", "thread": coder, "round": r,
                       "content": "error: there is no tool named that; the tools are write_file(path, content)"}]
        writes = 120 if long else 1
        for w in range(writes):
            lines += [{"role": "assistant", "content": "", "thread": coder, "round": r,
                       "reasoning": "Let me think about the edge cases. " * (400 if long else 30),
                       "tool_calls": [{"id": f"w{r}-{w}", "type": "function", "function": {
                           "name": "write_file", "arguments": json.dumps({"path": "solution.py", "content": code})}}],
                       "verdicts": {f"w{r}-{w}": "ok"}},
                      {"role": "tool", "tool_call_id": f"w{r}-{w}", "thread": coder, "round": r,
                       "content": f"wrote solution.py ({len(code)} characters)"}]
        lines += [{"role": "assistant", "content": "I wrote `solution.py`.", "thread": coder, "round": r},
                  {"role": "tool", "tool_call_id": f"d{r}", "thread": "orchestrator", "round": r,
                   "content": "Files written: solution.py."},
                  {"role": "assistant", "content": "Done.", "thread": "orchestrator", "round": r}]
        if outcome in ("infra_error", "no_artifact") and r == rounds:
            break
        work.round(r).mkdir(parents=True, exist_ok=True)
        (work.round(r) / "solution.py").write_text(code)
        work.test_output(r).write_text(test_output(counts[r - 1], total, problem))
    work.path.mkdir(parents=True, exist_ok=True)
    work.transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))


def synth_samples(
    run_id: str, engine: str, hours: float, step: float, restart_at: list[float], rng: random.Random
) -> Iterable[SampleRow]:
    """Host, harness, GPU (NVML's power and energy counter too) and server series every `step` seconds; server
    counters reset at each restart."""
    source = f"server:{engine}"
    counters: dict[str, float] = {}
    gpu_joules = 1e6
    total_mem, gpu_total = 64 * 2**30, 24 * 2**30
    ticks = int(hours * 3600 / step) + 1
    for k in range(ticks):
        at = START + k * step
        if any(at - step < r <= at for r in restart_at):
            counters.clear()
        frac = k / max(ticks - 1, 1)
        watts = 280 + rng.random() * 60
        gpu_joules += watts * step
        gauges: list[tuple[str, str, float | None, str]] = [
            ("host", "mem_available_bytes", total_mem * 0.6 - frac * 150 * 2**20 + rng.gauss(0, 2**25), ""),
            ("host", "mem_total_bytes", total_mem, ""),
            ("host", "swap_used_bytes", 0.0, ""),
            ("host", "load1", 2 + rng.random(), ""),
            ("harness", "rss_bytes", 180 * 2**20 + frac * 12 * 2**20, ""),
            ("harness", "cpu_percent", 5 + rng.random() * 10, ""),
            (source, "rss_bytes", 3 * 2**30 + rng.gauss(0, 2**22), ""),
            (source, "cpu_percent", 90 + rng.random() * 20, ""),
            ("gpu", "gpu_memory_used_bytes", gpu_total * 0.85, "gpu=0"),
            ("gpu", "gpu_memory_total_bytes", gpu_total, "gpu=0"),
            ("gpu", "gpu_utilization", 60 + rng.random() * 30, "gpu=0"),
            ("gpu", "gpu_power_watts", watts, "gpu=0"),
            ("gpu", "gpu_energy_joules", gpu_joules, "gpu=0"),
        ]
        increments: dict[str, float]
        if engine == "vllm":
            queries = rng.randint(2000, 9000)
            drafts = rng.randint(20, 60)
            increments = {
                "vllm:prefix_cache_queries_total": queries,
                "vllm:prefix_cache_hits_total": queries * (0.5 + 0.3 * frac),
                "vllm:spec_decode_num_drafts_total": drafts,
                "vllm:spec_decode_num_draft_tokens_total": drafts * 3,
                "vllm:spec_decode_num_accepted_tokens_total": drafts * 1.6,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total|position=0": drafts * 0.8,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total|position=1": drafts * 0.5,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total|position=2": drafts * 0.3,
            }
            gauges += [
                (source, "vllm:kv_cache_usage_perc", min(1.0, 0.2 + 0.5 * rng.random()), ""),
                (source, "vllm:num_requests_running", float(rng.randint(0, 2)), ""),
                (source, "vllm:num_requests_waiting", float(rng.randint(0, 1)), ""),
            ]
        else:
            predicted = rng.randint(100, 400)
            increments = {
                "llamacpp:prompt_tokens_total": rng.randint(500, 3000),
                "llamacpp:prompt_seconds_total": 1.0,
                "llamacpp:tokens_predicted_total": predicted,
                "llamacpp:tokens_predicted_seconds_total": predicted / rng.gauss(25, 2),
            }
        for key, step_value in increments.items():
            counters[key] = counters.get(key, 0.0) + step_value
            metric, _, labels = key.partition("|")
            gauges.append((source, metric, counters[key], labels))
        for src, metric, value, labels in gauges:
            yield SampleRow(run_id=run_id, at=at, source=src, metric=metric, value=value, labels=labels)
        if k == ticks // 3:
            yield SampleRow(run_id=run_id, at=at, source="gpu", metric="error", error="nvidia-smi timed out")
