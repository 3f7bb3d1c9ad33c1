"""The recording proxy in a night: `soak run --agent` with a scripted agent against the in-process sim. A malformed
request is the agent's own error, answered by the proxy and never the server's (`infra_error`), even one the server
would have failed with a 5xx; a well-formed request the server fails stays `infra_error`; a request naming another
model is served by the configured one, and calls.csv keeps both names."""

import json
from pathlib import Path

import httpx2
import pandas as pd

from soak.sim.scenario import Fault
from tests.helpers import script_night

ASK = '''
import json, re, sys, urllib.error, urllib.request
prompt_file, workspace, base_url, api_key, body_file = sys.argv[1:6]
body = open(body_file).read().replace('"PROMPT"', json.dumps(open(prompt_file).read()))
request = urllib.request.Request(base_url + "/chat/completions", body.encode(), headers={
    "Authorization": "Bearer " + api_key, "Content-Type": "application/json"})
try:
    reply = json.load(urllib.request.urlopen(request, timeout=30))
except urllib.error.HTTPError as error:
    print("refused", error.code, json.load(error)["error"]["code"])
    sys.exit(1)
print("served by", reply["model"])
entry = re.search(r"Write the solution to `([^`]+)`", open(prompt_file).read()).group(1)
content = reply["choices"][0]["message"]["content"]
open(workspace + "/" + entry, "w").write(re.search(r"```python\\n(.*?)```", content, re.S).group(1))
'''
"""Sends the file of its fifth argument as the body of one chat call ("PROMPT" there: the task's prompt); on an error
exits 1, else writes the reply's code as the entry file."""


def night(tmp_path: Path, base_url: str, body: str) -> tuple[pd.Series, pd.DataFrame, str]:
    """A one-task night of ASK sending `body`: its tasks.csv row, its calls.csv and what the agent printed."""
    body_file = tmp_path / "agent" / "body.json"  # the folder script_night shows the agent
    body_file.parent.mkdir()
    body_file.write_text(body)
    path = script_night(tmp_path, base_url, ASK, str(body_file))
    tasks = pd.read_csv(path / "tasks.csv", keep_default_na=False)
    calls = pd.read_csv(path / "calls.csv", keep_default_na=False)
    output = next(path.glob("work/*/*/round-1/agent/output.txt")).read_text()
    assert len(tasks) == 1
    return tasks.iloc[0], calls, output


def test_an_agent_that_sends_only_a_malformed_request_is_charged_with_it_not_the_server(jail, fast_sim, data_dir,
                                                                                       tmp_path):
    sim, base_url = fast_sim()
    malformed = json.dumps({"model": "soak-sim", "messages": "write the solution"})
    row, calls, output = night(tmp_path, base_url, malformed)
    assert "refused 400 bad_request" in output
    assert row["outcome"] == "agent_error" and row["agent_calls"] == 1, row["error_tail"]
    assert calls[["status", "http_status", "role"]].values.tolist() == [["bad_request", 400, "agent"]]
    assert sim.stats.requests == 0


def test_a_tool_the_server_cannot_read_is_the_agents_error_though_the_server_would_have_failed_it(
        jail, fast_sim, data_dir, tmp_path):
    """A tool whose `function` is a string: the sim fails it with a 500, so forwarded it read as the stack's
    `infra_error`; the proxy answers it 400 and the night charges the agent."""
    sim, base_url = fast_sim()
    body = {"model": "soak-sim", "messages": [{"role": "user", "content": "PROMPT"}],
            "tools": [{"type": "function", "function": "write_file"}]}
    row, calls, output = night(tmp_path, base_url, json.dumps(body))
    assert "refused 400 bad_request" in output
    assert row["outcome"] == "agent_error" and row["agent_calls"] == 1, row["error_tail"]
    [call] = calls.to_dict("records")
    assert (call["status"], call["http_status"], call["role"]) == ("bad_request", 400, "agent")
    assert "tools[0].function" in call["error"] and sim.stats.requests == 0
    with httpx2.Client(timeout=30) as client:  # what the server makes of it
        assert client.post(f"{base_url}/chat/completions", json=body).status_code == 500


def test_a_server_failing_a_well_formed_request_is_still_the_stacks_infra_error(jail, fast_sim, data_dir, tmp_path):
    sim, base_url = fast_sim(faults=[Fault(kind="http_500", rate=1.0)])
    body = {"model": "soak-sim", "messages": [{"role": "user", "content": [{"type": "text", "text": "PROMPT"}]}],
            "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}],
            "temperature": 0.2, "chat_template_kwargs": {"enable_thinking": False}}
    row, calls, output = night(tmp_path, base_url, json.dumps(body))
    assert row["outcome"] == "infra_error", row["error_tail"]
    assert calls[["status", "http_status"]].values.tolist() == [["http_5xx", 500]] and sim.stats.requests == 1


def test_a_request_for_another_model_is_served_by_the_configured_one(jail, fast_sim, data_dir, tmp_path):
    sim, base_url = fast_sim()
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "PROMPT"}]})
    row, calls, output = night(tmp_path, base_url, body)
    assert "served by soak-sim" in output  # the sim answers with the model name it was sent
    assert row["outcome"] == "pass" and row["coder_model"] == "soak-sim", row["error_tail"]
    assert calls[["status", "model", "requested_model"]].values.tolist() == [["ok", "soak-sim", "gpt-4o"]]
    assert sim.stats.requests == 1
