"""`soak export --format atif` of sim nights of soak's own loop (delegate and direct): the export read back keeps every
message, tool call and token count of the run folder; it reads a run still going and a folder of schema version 1;
bad input is one line and exit 2; and (slow) every trajectory validates against Harbor's own model of the format.
The external agents' exports are checked in tests/agent/test_external.py, on the real agents' nights."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.record.identity import AttemptId
from soak.record.layout import RunLayout
from soak.record.read import read_attempts
from soak.record.transcript import TranscriptLine, read_transcript
from soak.sim.scenario import Coder, Fault, Reasoning, Scenario, Timing
from soak.sim.server import SimServer
from tests.atif import assert_calls_kept, export, index_of, read_back, reference_problems
from tests.helpers import EXERCISM_SUITE
from tests.record.test_versions import as_version_1

# The coder is wrong at first half the time (revision rounds), thinks aloud, its first request's arguments are no
# JSON (a mangled call, refused), and the night's fourth request is a 500 (a failed try, then its retry).
SCENARIO = Scenario(timing=Timing(ttft_seconds=0, decode_tokens_per_second=0, tokens_per_chunk=8),
                    coder=Coder(p_correct=0.5, p_fix=1.0), reasoning=Reasoning(enabled=True),
                    faults=[Fault(kind="http_500", at_requests=[4]),
                            Fault(kind="bad_json_args", at_requests=[1], roles=["coder"])])


@pytest.fixture(scope="module", params=["delegate", "direct"])
def night(request, tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp(request.param)
    with SimServer(SCENARIO, seed=3, suite=EXERCISM_SUITE) as sim:
        (home / "soak.toml").write_text(f"""
mode = "{request.param}"
suite = "{EXERCISM_SUITE}"
concurrency = 1
[endpoints.sim]
base_url = "{sim.base_url}"
model = "soak-sim"
retry_backoff_seconds = 0.01
[roles]
orchestrator = "sim"
coder = "sim"
""")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SOAK_DATA_DIR", str(home / "data"))
            result = CliRunner().invoke(main, ["run", "--config", str(home / "soak.toml"), "--tasks", "4", "--quiet",
                                               "--run-id", "night"])
    assert result.exit_code == 0, result.output
    return home / "data" / "night"


def said(trajectory, name: str = "root", into: dict | None = None) -> dict[str, list[tuple]]:
    """Each conversation of a trajectory and its subagents (by the subagent's thread name) as message tuples."""
    into = {} if into is None else into
    messages = into.setdefault(name, [])
    for step in trajectory.steps:
        facts = (step.extra or {}).get("soak", {})
        if step.source != "agent" and step.observation is None:
            messages.append((step.source, step.message))
        elif step.source == "agent" and "note" not in facts:
            calls = [(call.tool_call_id, call.function_name, (call.extra or {}).get("soak", {}).get(
                "raw_arguments", call.arguments)) for call in step.tool_calls or []]
            messages.append(("assistant", step.message, step.reasoning_content, calls))
        for result in step.observation.results if step.observation else []:
            if result.content is not None:
                call_id = result.source_call_id or (result.extra or {})["soak"]["tool_call_id"]
                messages.append(("tool", call_id, result.content))
    for subagent in trajectory.subagent_trajectories or []:
        said(subagent, subagent.trajectory_id.rsplit("/", 1)[1], into)
    return into


def arguments(raw: str):
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def as_said(line: TranscriptLine) -> tuple:
    if line.role == "assistant":
        calls = [(call["id"], call["function"]["name"], arguments(call["function"]["arguments"]))
                 for call in line.tool_calls or []]
        return "assistant", line.content or "", line.reasoning or None, calls
    if line.role == "tool":
        return "tool", line.tool_call_id, line.content
    return line.role, line.content


def transcript_said(path: Path) -> dict[str, list[tuple]]:
    threads: dict[str, list[tuple]] = {}
    for line in read_transcript(path):
        threads.setdefault(line.thread if line.thread.startswith("coder-") else "root", []).append(as_said(line))
    return threads


def assert_round_trip(run: Path, out: Path) -> None:
    """Every message of every transcript, in order per conversation, with every tool call (its id, name and arguments
    as the model wrote them) and every tool result; and every call's token counts."""
    exported = list(read_back(out))
    assert exported
    for task, cycle, trajectory in exported:
        transcript = RunLayout(run).attempt(AttemptId(task, cycle)).transcript
        assert said(trajectory) == transcript_said(transcript), (task, cycle)
    assert_calls_kept(run, out)


def test_a_night_exports_every_attempt_and_reads_back_whole(night, tmp_path):
    output = export(night, tmp_path / "atif")
    index = index_of(tmp_path / "atif")
    rows = read_attempts(night / "tasks.csv")
    assert output.splitlines() == [f"{len(rows)} attempts as ATIF-v1.8 trajectories", str(tmp_path / "atif" /
                                                                                           "index.json")]
    assert [(e.task_id, e.cycle, e.outcome) for e in index.trajectories] == [(r.task_id, r.cycle, r.outcome)
                                                                             for r in rows]
    assert not index.running and not index.skipped
    assert_round_trip(night, tmp_path / "atif")


def test_the_night_had_what_the_export_must_carry(night, tmp_path):
    """The scenario did make revision rounds, a failed try, a mangled tool call and reasoning, so the round trip
    above covered them; and delegation became subagents the delegate calls' observations point at."""
    export(night, tmp_path / "atif")
    trajectories = [trajectory for _, _, trajectory in read_back(tmp_path / "atif")]
    steps = [step for t in trajectories for s in [t, *(t.subagent_trajectories or [])] for step in s.steps]
    assert any(len(t.extra["soak"]["rounds"]) == 2 for t in trajectories)
    assert any(step.extra["soak"].get("note") == "no answer: the call failed" for step in steps)
    assert any("raw_arguments" in call.extra["soak"] for step in steps for call in step.tool_calls or []
               if call.extra)
    assert any(step.reasoning_content for step in steps)
    for trajectory in trajectories:
        subagents = {s.trajectory_id for s in trajectory.subagent_trajectories or []}
        refs = {ref.trajectory_id for step in trajectory.steps for result in (
            step.observation.results if step.observation else []) for ref in result.subagent_trajectory_ref or []}
        assert refs == subagents
        assert bool(subagents) == (trajectory.agent.extra["role"] == "orchestrator")


def test_a_run_still_going_exports_its_finished_attempts_only(night, tmp_path):
    """The last attempt has no tasks.csv row yet (in flight, its calls recorded, a torn row being written); another is
    being redone (a finished row, its folder the new attempt's): neither is exported."""
    run = tmp_path / "night"
    shutil.copytree(night, run)
    rows = read_attempts(run / "tasks.csv")
    lines = (run / "tasks.csv").read_text().splitlines(keepends=True)
    (run / "tasks.csv").write_text("".join(lines[:-1]) + lines[-1][:40])
    redone = rows[0]
    info = json.loads((run / "run.json").read_text())
    info.update(ended_at=None, in_flight=[f"{redone.task_id}/{redone.cycle}", f"{rows[-1].task_id}/{rows[-1].cycle}"])
    (run / "run.json").write_text(json.dumps(info))
    output = export(run, tmp_path / "atif")
    index = index_of(tmp_path / "atif")
    assert index.running and "still going" in output
    assert [(e.task_id, e.cycle) for e in index.trajectories] == [(r.task_id, r.cycle) for r in rows[1:-1]]
    assert [(s.task_id, s.cycle) for s in index.skipped] == [(redone.task_id, redone.cycle)]
    assert_round_trip(run, tmp_path / "atif")


def test_a_schema_version_1_folder_exports(night, tmp_path):
    """calls.csv says `attempt` for `retry`, tasks.csv lacks the later columns, transcripts keep no verdicts."""
    run = tmp_path / "old"
    shutil.copytree(night, run)
    layout = RunLayout(run)
    as_version_1(type("Folder", (), {"layout": layout})())
    for path in layout.transcripts():
        lines = [json.loads(text) for text in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "verdicts"}) + "\n"
                                for line in lines))
    export(run, tmp_path / "atif")
    assert len(index_of(tmp_path / "atif").trajectories) == len(read_attempts(night / "tasks.csv"))
    assert_round_trip(run, tmp_path / "atif")


def test_bad_input_is_one_line_and_exit_2(night, tmp_path):
    unknown = CliRunner().invoke(main, ["export", str(tmp_path / "nowhere")])
    assert unknown.exit_code == 2 and unknown.output.startswith("error: no run ") and len(
        unknown.output.strip().splitlines()) == 1
    assert CliRunner().invoke(main, ["export", str(night), "--format", "json"]).exit_code == 2
    (tmp_path / "file").write_text("")
    assert CliRunner().invoke(main, ["export", str(night), "--out", str(tmp_path / "file")]).exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    not_a_run = CliRunner().invoke(main, ["export", str(empty), "--out", str(tmp_path / "out")])
    assert not_a_run.exit_code == 2 and "not a run folder" in not_a_run.output and not (tmp_path / "out").exists()
    broken = tmp_path / "broken"
    shutil.copytree(night, broken)
    (broken / "calls.csv").write_text((broken / "calls.csv").read_text().replace(",coder,", ",someone,", 1))
    unreadable = CliRunner().invoke(main, ["export", str(broken), "--out", str(tmp_path / "out")])
    assert unreadable.exit_code == 2 and "role: Input should be" in unreadable.output
    assert len(unreadable.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_every_trajectory_validates_against_harbors_own_model(night, tmp_path):
    export(night, tmp_path / "atif")
    assert reference_problems(tmp_path / "atif") == {}
