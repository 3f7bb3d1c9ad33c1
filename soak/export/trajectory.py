"""Each finished attempt of a run as one ATIF trajectory, written one file per attempt beside an index.json.

soak's own loop: the root is the orchestrator's conversation (the coder's in mode direct) and each delegation an
embedded subagent trajectory, which the delegate call's observation refers to. An external agent: the root is soak's
harness, which runs the agent once per round (a step without an LLM call) and observes the round's test verdict; each
run of the agent is a subagent, its messages from the agent's own transcript and its calls from the proxy's rows.
soak's facts about the attempt (its whole tasks.csv row, each judged round's rounds.csv row) are the root's
`extra.soak`."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from soak.errors import BadInput
from soak.export.atif import (
    ATIF_VERSION,
    Agent,
    AtifIndex,
    FinalMetrics,
    IndexEntry,
    ObservationResult,
    Skipped,
    Step,
    SubagentTrajectoryRef,
    ToolCall,
    Trajectory,
)
from soak.export.conversation import agent_round, soak_messages
from soak.export.steps import ATTEMPT_FIELDS, Thread, soak_extra, walk
from soak.files import describe_validation_error, write_atomic
from soak.llm.tools import DELEGATE
from soak.paths import reports_dir
from soak.record.layout import TRANSCRIPT
from soak.record.read import AttemptRecord, load_run, resolve_run_dir
from soak.record.schema import OUTCOME_MEANINGS, CallRow, RoundRow

ROOT = "root"
DELEGATE_TOOL = DELEGATE["function"]["name"]
RUN_AGENT = "run_agent"
"""The harness's one action on an external agent's root: run the agent for a round."""


@dataclass(frozen=True)
class Exported:
    """An attempt as the export reads it: its record and the soak version that wrote the run."""

    record: AttemptRecord
    soak_version: str

    @property
    def id(self) -> str:
        row = self.record.row
        return f"{row.run_id}/{row.attempt.name}"


def round_facts(rounds: list[RoundRow]) -> list[dict[str, Any]]:
    """Each judged round as rounds.csv keeps it (the attempt names it once: the trajectory's session)."""
    return [item.model_dump(mode="json", exclude=ATTEMPT_FIELDS) for item in rounds]


def verdict_text(verdict: RoundRow | None) -> str:
    if verdict is None:
        return "not judged: the round left no file to test"
    if verdict.derived and not verdict.tests_total:
        return "judged: the tests printed no summary (a crash, a timeout or tampering)"
    failing = f"; failing: {', '.join(verdict.failing)}" if verdict.failing else ""
    return f"tests: {verdict.tests_passed}/{verdict.tests_total} passed{failing}"


def final_metrics(steps: list[Step], subagents: list[Trajectory]) -> FinalMetrics:
    """Totals of the steps' metrics, the subagents' totals included (as Harbor's producers count them)."""
    metrics = [step.metrics for step in steps if step.metrics]
    finals = [subagent.final_metrics for subagent in subagents]

    def total(own: list[int | None], theirs: list[int | None]) -> int | None:
        known = [n for n in own + theirs if n is not None]
        return sum(known) if known else None

    reasoning = total([(m.extra or {}).get("reasoning_tokens") for m in metrics],
                      [(f.extra or {}).get("total_reasoning_tokens") for f in finals])
    return FinalMetrics(
        total_prompt_tokens=total([m.prompt_tokens for m in metrics], [f.total_prompt_tokens for f in finals]),
        total_completion_tokens=total([m.completion_tokens for m in metrics],
                                      [f.total_completion_tokens for f in finals]),
        total_cached_tokens=total([m.cached_tokens for m in metrics], [f.total_cached_tokens for f in finals]),
        total_steps=len(steps), extra=None if reasoning is None else {"total_reasoning_tokens": reasoning},
    )


def trajectory(attempt: Exported, trajectory_id: str, agent: Agent, thread: Thread,
               subagents: list[Trajectory] | None = None, **fields: Any) -> Trajectory:
    subagents = subagents or []
    return Trajectory(session_id=attempt.id, trajectory_id=trajectory_id, agent=agent, steps=thread.steps,
                      final_metrics=final_metrics(thread.steps, subagents), subagent_trajectories=subagents or None,
                      **fields)


def refer(thread: Thread, call_id: str, subagent: Trajectory) -> None:
    """Point the observation of the call that started `subagent` at it (a result of its own if the call got none)."""
    step = thread.callers[call_id]
    results = step.observation.results if step.observation else []
    result = next((r for r in results if r.source_call_id == call_id), None)
    if result is None:
        result = ObservationResult()
        thread.answer(call_id, result)
    result.subagent_trajectory_ref = [SubagentTrajectoryRef(trajectory_id=subagent.trajectory_id)]


def delegations(root: Thread) -> list[str]:
    """The ids of the delegate calls that started a coder, in order: those the loop judged ok (in a transcript
    without verdicts, those whose arguments parsed)."""
    found = []
    for step in root.steps:
        for call in step.tool_calls or []:
            verdict = ((call.extra or {}).get("soak") or {}).get("integrity")
            if call.function_name == DELEGATE_TOOL and (verdict == "ok" or (verdict is None and call.arguments)):
                found.append(call.tool_call_id)
    return found


def soak_trajectory(attempt: Exported) -> Trajectory | None:
    """soak's own loop: the orchestrator's thread as the root, coder-<n> as the subagent of the n-th delegation."""
    record = attempt.record
    row = record.row
    threads = walk(soak_messages(record.layout), record.calls, ROOT,
                   lambda name: name if name.startswith("coder-") else ROOT)
    root = threads.pop(ROOT, None)
    if root is None:
        return None
    coder = Agent(name="soak", version=attempt.soak_version, model_name=row.coder_model or None,
                  extra={"role": "coder"})
    started = delegations(root)
    subagents = []
    for name, thread in threads.items():
        subagent = trajectory(attempt, f"{attempt.id}/{name}", coder, thread)
        subagents.append(subagent)
        number = name.removeprefix("coder-")
        if number.isdigit() and 0 < int(number) <= len(started):
            refer(root, started[int(number) - 1], subagent)
    delegate = bool(row.orchestrator_model)
    agent = Agent(name="soak", version=attempt.soak_version,
                  model_name=(row.orchestrator_model if delegate else row.coder_model) or None,
                  extra={"role": "orchestrator" if delegate else "direct"})
    sources = [TRANSCRIPT] if record.layout.transcript.is_file() else []
    return trajectory(attempt, attempt.id, agent, root, subagents, notes=notes(attempt, sources),
                      extra=facts(attempt, sources))


def calls_by_round(record: AttemptRecord, numbers: list[int]) -> dict[int, list[CallRow]]:
    """Each call to the round it started in: the first round whose agent output was written after it (soak writes
    it when the agent's run ends); the last round takes the rest."""
    ends = []
    for number in numbers:
        output = record.layout.agent_output(number)
        ends += [(number, os.stat(output).st_mtime)] if output.is_file() else []
    found: dict[int, list[CallRow]] = {number: [] for number in numbers}
    for call in record.calls:
        found[next((n for n, end in ends if call.started_at < end), numbers[-1])].append(call)
    return found


def agent_trajectory(attempt: Exported) -> Trajectory | None:
    """An external agent: soak's harness as the root, one step and one subagent per round the agent ran."""
    record = attempt.record
    row = record.row
    numbers = record.layout.rounds() or ([1] if record.calls else [])
    if not numbers:
        return None
    name, _, version = row.agent.rpartition(" ") if " " in row.agent else (row.agent, "", "unknown")
    by_number = {verdict.round: verdict for verdict in record.rounds}
    harness, subagents, sources = Thread(), [], []
    for number, calls in calls_by_round(record, numbers).items():
        thread_name = f"round-{number}"
        said = agent_round(record.layout, number, thread_name)
        sources += [said.read_from] if said.source else []
        ran = ToolCall(tool_call_id=thread_name, function_name=RUN_AGENT, arguments={"round": number})
        harness.add(source="agent", message=f"Round {number}: run {row.agent} in the task's workspace, then judge the "
                    "file it leaves with the task's tests.", tool_calls=[ran], llm_call_count=0,
                    extra=soak_extra(number, None, **({"transcript": said.source} if said.source else {})))
        harness.answer(thread_name, ObservationResult(content=verdict_text(by_number.get(number))))
        thread = walk(said.messages, calls, thread_name).get(thread_name)
        if thread is not None:
            agent = Agent(name=name, version=version, model_name=row.coder_model or None, tool_definitions=said.tools)
            subagents.append(trajectory(attempt, f"{attempt.id}/{thread_name}", agent, thread))
            refer(harness, thread_name, subagents[-1])
    agent = Agent(name="soak", version=attempt.soak_version, extra={"role": "harness", "agent": row.agent})
    return trajectory(attempt, attempt.id, agent, harness, subagents, notes=notes(attempt, sources),
                      extra=facts(attempt, sources))


def notes(attempt: Exported, sources: list[str]) -> str:
    row = attempt.record.row
    read = ", ".join(sources) or "no transcript soak reads (calls only)"
    repeat = f" repeat {row.repeat}" if row.repeat > 1 else ""
    return (f"soak attempt {row.task_id} cycle {row.cycle}{repeat} (session {row.session}) of run {row.run_id}: "
            f"{row.outcome}. Messages from {read}; each LLM call from "
            "calls.csv, its row under the step's extra.soak.call; soak's facts under the root's extra.soak.")


def facts(attempt: Exported, sources: list[str]) -> dict[str, Any]:
    row = attempt.record.row
    dumped = row.model_dump(mode="json")
    return {"soak": {"attempt": {name: dumped[name] for name in row.columns()},
                     "outcome_meaning": OUTCOME_MEANINGS.get(row.outcome), "rounds": round_facts(attempt.record.rounds),
                     "messages_from": sources}}


def steps_in(trajectory: Trajectory) -> int:
    return len(trajectory.steps) + sum(steps_in(sub) for sub in trajectory.subagent_trajectories or [])


def export_run(ref: str | None, out: Path | None) -> tuple[Path, AtifIndex]:
    """Write every finished attempt of a run (its tasks.csv rows that count) as a trajectory file under `out`
    (default reports/<run_id>/atif/), then index.json; (the index's path, the index). Every attempt is read before
    anything is written: an unreadable row writes nothing."""
    path = resolve_run_dir(ref)
    run = load_run(path)
    if not run.layout.is_run():
        raise BadInput(f"{path}: not a run folder (no run.json or tasks.csv)")
    in_flight = set(run.info.in_flight) if run.running and run.info else set()
    out = Path(out) if out is not None else reports_dir() / run.run_id / "atif"
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out}: exists and is not a folder")
    version = (run.info.versions.get("soak") if run.info else None) or "unknown"
    index = AtifIndex(run_id=run.run_id, run_folder=str(path), running=run.running, trajectories=[])
    try:
        attempts = [run.attempt(key) for key in run.attempt_ids()]
    except ValidationError as error:
        raise BadInput(describe_validation_error(str(path), error)) from None
    out.mkdir(parents=True, exist_ok=True)
    for record in attempts:
        row = record.row
        name = row.attempt.name
        if name in in_flight:
            index.skipped.append(Skipped(task_id=row.task_id, cycle=row.cycle, repeat=row.repeat,
                                         reason="being redone: its folder holds the attempt in flight"))
            continue
        attempt = Exported(record, version)
        made = agent_trajectory(attempt) if row.agent else soak_trajectory(attempt)
        if made is None:
            index.skipped.append(Skipped(task_id=row.task_id, cycle=row.cycle, repeat=row.repeat,
                                         reason=f"no message and no call recorded ({row.outcome})"))
            continue
        relative = f"{name}.json"
        (out / row.task_id).mkdir(exist_ok=True)
        write_atomic(out / relative, made.json_text())
        index.trajectories.append(IndexEntry(
            path=relative, task_id=row.task_id, cycle=row.cycle, repeat=row.repeat, session=row.session,
            outcome=row.outcome,
            agent=row.agent or f"soak {version}", model=made.agent.model_name or row.coder_model,
            steps=steps_in(made), subagents=len(made.subagent_trajectories or [])))
    write_atomic(out / "index.json", index.model_dump_json(indent=1) + "\n")
    return out / "index.json", index


def export_command(ref: str | None, out: Path | None) -> str:
    path, index = export_run(ref, out)
    skipped = f", {len(index.skipped)} left out (see the index)" if index.skipped else ""
    still = " (the run is still going: its finished attempts only)" if index.running else ""
    return f"{len(index.trajectories)} attempts as {ATIF_VERSION} trajectories{skipped}{still}\n{path}"
