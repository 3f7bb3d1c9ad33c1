"""The external agents' own transcripts as the export reads them, from small files in each agent's shape (the real
agents' files are read in the slow nights of tests/agent/test_external.py)."""

import json
from pathlib import Path

import pytest

from soak.export import conversation
from soak.export.conversation import agent_round
from soak.record.layout import AttemptLayout

AIDER_LOG = """\
TO LLM 2026-12-02T00:57:11
-------
SYSTEM Act as an expert software developer.
SYSTEM\x20
SYSTEM
SYSTEM Reply in English.
-------
USER Change the greeting
-------
ASSISTANT Ok, I will.
ASSISTANT -------
-------
USER Write two_fer.py.
USER TO LLM is not a header here
LLM RESPONSE 2026-12-02T00:57:12
ASSISTANT two_fer.py
ASSISTANT ```
ASSISTANT def two_fer(name="you"):
ASSISTANT ```
TO LLM 2026-12-02T00:57:13
-------
SYSTEM Act as an expert software developer.
-------
USER Write two_fer.py.
-------
ASSISTANT two_fer.py
-------
USER Fix the lint errors.
LLM RESPONSE 2026-12-02T00:57:14
ASSISTANT Fixed.
"""


def round_folder(tmp_path: Path, files: dict[str, str]) -> AttemptLayout:
    attempt = AttemptLayout(tmp_path / "attempt")
    for name, text in files.items():
        path = attempt.agent_files(1) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return attempt


def test_aiders_llm_history_gives_its_prompt_its_examples_as_context_and_every_reply(tmp_path):
    said = agent_round(round_folder(tmp_path, {"llm.log": AIDER_LOG}), 1, "round-1")
    assert said.source == said.read_from == "round-1/agent/llm.log"
    assert [(m.line.role, m.line.content, m.context) for m in said.messages] == [
        ("system", "Act as an expert software developer.\n\n\nReply in English.", False),
        ("user", "Change the greeting", True),
        ("assistant", "Ok, I will.\n-------", True),
        ("user", "Write two_fer.py.\nTO LLM is not a header here", False),
        ("assistant", 'two_fer.py\n```\ndef two_fer(name="you"):\n```', False),
        ("user", "Fix the lint errors.", False),
        ("assistant", "Fixed.", False),
    ]


def test_aiders_llm_history_is_read_up_to_its_cap_and_the_export_names_the_cut(tmp_path, monkeypatch):
    """The agent writes the log, so its size is the agent's to choose: the export reads its head only."""
    head = AIDER_LOG[:AIDER_LOG.index("TO LLM 2026-12-02T00:57:13")]
    monkeypatch.setattr(conversation, "AIDER_LOG_BYTES", len(head))
    said = agent_round(round_folder(tmp_path, {"llm.log": AIDER_LOG}), 1, "round-1")
    assert said.read_from == f"round-1/agent/llm.log (its first {len(head)} bytes)"
    assert [m.line.content for m in said.messages][-1] == 'two_fer.py\n```\ndef two_fer(name="you"):\n```'


def test_a_hermes_session_gives_its_system_prompt_tools_and_messages(tmp_path):
    call = {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"a.py\"}"}}
    session = {"system_prompt": "You are Hermes.", "tools": [{"type": "function", "function": {"name": "write_file"}}],
               "messages": [{"role": "user", "content": "Do it."},
                            {"role": "assistant", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"},
                            {"role": "tool", "tool_call_id": "c1", "content": "{\"bytes_written\": 3}"},
                            {"role": "assistant", "content": "Done."}]}
    said = agent_round(round_folder(tmp_path, {".hermes/sessions/session_1.json": json.dumps(session)}), 1, "round-1")
    assert said.tools == session["tools"]
    assert [(m.line.role, m.line.content, m.line.thread, m.line.round) for m in said.messages] == [
        ("system", "You are Hermes.", "round-1", 1), ("user", "Do it.", "round-1", 1),
        ("assistant", "", "round-1", 1), ("tool", "{\"bytes_written\": 3}", "round-1", 1),
        ("assistant", "Done.", "round-1", 1)]
    assert said.messages[2].line.tool_calls == [call]


def test_mini_swe_agents_trajectory_gives_its_messages_but_not_its_exit(tmp_path):
    trajectory = {"trajectory_format": "mini-swe-agent-1.1", "messages": [
        {"role": "system", "content": "You can run bash."}, {"role": "user", "content": "Solve it."},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}]}
    said = agent_round(round_folder(tmp_path, {"trajectory.json": json.dumps(trajectory)}), 1, "round-1")
    assert [m.line.role for m in said.messages] == ["system", "user", "assistant"]


@pytest.mark.parametrize("text", ["{torn", "[1, 2]", '{"messages": "no list"}'])
def test_a_transcript_soak_cannot_read_gives_no_messages(tmp_path, text):
    said = agent_round(round_folder(tmp_path, {"output.txt": "hello", "trajectory.json": text}), 1, "round-1")
    assert said.messages == [] and said.source == "round-1/agent/trajectory.json"
