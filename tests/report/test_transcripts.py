import json

from soak.record.identity import AttemptId
from soak.record.layout import RunLayout
from soak.record.schema import CallRow
from soak.record.transcript import TranscriptLine, answering_calls, read_transcript
from soak.report.transcripts import mangled_tool_calls


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def said(*calls: dict, verdicts: dict | None = None) -> dict:
    line = {"role": "assistant", "content": "", "tool_calls": list(calls), "thread": "coder-1", "round": 1}
    return {**line, "verdicts": verdicts} if verdicts is not None else line


def write(tmp_path, lines: list[dict]):
    attempt = RunLayout(tmp_path / "run").attempt(AttemptId("lru-cache", 0))
    attempt.path.mkdir(parents=True)
    attempt.transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return attempt


def names(found: list[str]) -> list[str]:
    return [json.loads(excerpt)["name"] for excerpt in found]


def excerpts(attempt, calls: list[tuple[str, str]]) -> list[str]:
    """The mangled calls of the attempt's transcript, paired with answered calls of these (tool names, integrity)."""
    rows = [CallRow(run_id="r", task_id="lru-cache", cycle=0, call_index=n, role="coder", endpoint="e", model="m",
                    stream=True, started_at=n, duration_s=1, tool_names=tools, integrity=integrity)
            for n, (tools, integrity) in enumerate(calls)]
    lines = list(read_transcript(attempt.transcript))
    return mangled_tool_calls(list(zip(lines, answering_calls(lines, rows), strict=True)))


def test_the_recorded_verdicts_decide_not_a_second_judging(tmp_path):
    escaped = call("a", "write_file", '{"path": "../../x.py", "content": ""}')
    unoffered = call("b", "run_tests", "{}")
    odd_but_ok = call("c", "write_file(", "{}")  # the loop judged it ok: the report does not judge again
    attempt = write(tmp_path, [
        {"role": "user", "content": "go", "thread": "coder-1", "round": 1},
        said(escaped, unoffered, verdicts={"a": "path_escape", "b": "unknown_tool"}),
        {"role": "tool", "tool_call_id": "a", "content": "refused", "thread": "coder-1", "round": 1},
        said(odd_but_ok, verdicts={"c": "ok"}),
    ])
    assert names(excerpts(attempt, [("write_file,run_tests", "ok"), ("write_file(", "ok")])) == ["write_file",
                                                                                             "run_tests"]
    assert TranscriptLine.model_validate(said(escaped, verdicts={"a": "path_escape"})).verdict("a") == "path_escape"


def test_an_older_transcript_falls_back_to_its_calls_verdicts_then_to_how_the_call_looks(tmp_path):
    attempt = write(tmp_path, [
        said(call("1", "write_file", '{"path": "s.py", "content": ""}')),
        said(call("2", "run_tests", "{}")),  # calls.csv: unknown_tool
        said(call("3", 'write_file{"path": "s.py"}', "")),  # no call row left: it looks mangled
        said(call("4", "write_file", '{"path": "s.py", "content": ""}')),
    ])
    found = excerpts(attempt, [("write_file", "ok"), ("run_tests", "unknown_tool")])
    assert names(found) == ["run_tests", 'write_file{"path": "s.py"}']
    assert excerpts(RunLayout(tmp_path / "none").attempt(AttemptId("x", 0)), []) == []
