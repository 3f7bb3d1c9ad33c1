from typing import get_args

from soak.llm.integrity import ToolCall, judge_tool_calls
from soak.record.identity import AttemptId
from soak.record.layout import RunLayout
from soak.record.schema import MANGLED, Integrity
from soak.record.transcript import TranscriptLine, append_line, read_transcript

WRITE = {"name": "write_file", "parameters": {"required": ["path", "content"]}}


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_lines_written_are_read_back_in_order_and_a_torn_line_is_skipped(tmp_path):
    path = RunLayout(tmp_path / "run").attempt(AttemptId("word-frequency", 0)).transcript
    path.parent.mkdir(parents=True)
    said = {"role": "assistant", "content": "", "reasoning": "think", "tool_calls": [call("c1", "write_file", "{")]}
    with path.open("a") as handle:
        append_line(handle, TranscriptLine.of({"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                              "coder-1", 1))
        append_line(handle, TranscriptLine.of(said, "coder-1", 1, {"c1": "bad_json"}))
        handle.write('{"role": "assistant", "content": "cut sh')  # a crash mid-write
    lines = list(read_transcript(path))
    assert [(line.role, line.thread, line.round) for line in lines] == [("user", "coder-1", 1),
                                                                        ("assistant", "coder-1", 1)]
    assert lines[0].content == '[{"type": "text", "text": "hi"}]' and lines[0].verdicts is None
    assert lines[1].verdict("c1") == "bad_json" and lines[1].verdict("c2") is None
    assert list(read_transcript(tmp_path / "missing.jsonl")) == []


def test_chat_message_is_what_the_loop_sent_back():
    line = TranscriptLine.of({"role": "assistant", "content": "", "reasoning": "secret thoughts", "tool_calls": [
        call("a", "write_file", '{"path": "s.py"'), call("b", "write_file", "[1]"),
        call("c", "write_file", '{"path": "s.py", "content": ""}')]}, "orchestrator", 2, {"a": "bad_json"})
    sent = line.chat_message()
    assert set(sent) == {"role", "content", "tool_calls"}
    assert [c["function"]["arguments"] for c in sent["tool_calls"]] == ["{}", "{}", '{"path": "s.py", "content": ""}']
    assert line.tool_calls[0]["function"]["arguments"] == '{"path": "s.py"'  # the line keeps what the model wrote


def test_mangled_is_every_verdict_but_ok_and_none_in_the_order_the_judge_ranks_them():
    assert set(MANGLED) == set(get_args(Integrity)) - {"ok", "none"} and len(MANGLED) == len(set(MANGLED))
    tools = [{"type": "function", "function": WRITE}]
    calls = [ToolCall(id="1", name="write_file", arguments='{"path": "/etc/x", "content": ""}'),
             ToolCall(id="2", name="write_file", arguments="{"),
             ToolCall(id="3", name="read_file", arguments="{}")]
    assert judge_tool_calls(calls, tools, "tool_calls") == "unknown_tool"
    assert judge_tool_calls(calls[:2], tools, "tool_calls") == "bad_json"
    assert judge_tool_calls([], tools, "tool_calls") == "missing" in MANGLED
