"""Where an external agent's claim is read (soak.agent.finish): its finish signal, then what it told its user, then
its model's last words; the real agents' own files are the slow tests' (tests/agent/test_external.py)."""

import json

from soak.agent.finish import closing

MODEL_PARTIAL = "I wrote solution.py but test_edge still fails."


def test_a_final_json_result_is_the_agents_signal_over_its_models_words(tmp_path):
    result = {"type": "result", "subtype": "success", "is_error": False,
              "result": "Fixed the parser. All 12 tests pass."}
    ending = closing("my-cli", tmp_path, "working...\n" + json.dumps(result) + "\n", MODEL_PARTIAL)
    assert (ending.source, ending.claim.status, ending.claim.tests_claim) == ("signal", "done", True)
    assert ending.model is not None and ending.model.status == "partial"  # the agent said otherwise: both kept


def test_a_completion_field_decides_and_says_why(tmp_path):
    ending = closing("my-cli", tmp_path, json.dumps({"task_completed": "partial", "final_thought": "Some left."}), "")
    assert (ending.source, ending.claim.status, ending.claim.reason) == ("signal", "partial",
                                                                         'task_completed: "partial"')


def test_an_error_result_claims_nothing_and_the_printed_words_are_read_next(tmp_path):
    printed = "I could not finish: the API key was missing.\n" + json.dumps({"is_error": True, "result": "Done!"})
    ending = closing("my-cli", tmp_path, printed, "")
    assert (ending.source, ending.claim.status) == ("output", "blocked")


def test_a_mini_swe_agent_submission_with_nothing_said_is_done(tmp_path):
    trajectory = {"info": {"exit_status": "Submitted"}, "messages": [
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}]}
    (tmp_path / "trajectory.json").write_text(json.dumps(trajectory))
    ending = closing("mini-swe-agent", tmp_path, "", MODEL_PARTIAL)
    assert (ending.source, ending.claim.status, ending.claim.reason) == (
        "signal", "done", "mini-swe-agent submitted its work (exit_status Submitted)")


def test_an_agent_that_did_not_submit_falls_back_to_its_output_then_its_model(tmp_path):
    (tmp_path / "trajectory.json").write_text(json.dumps({"info": {"exit_status": "LimitsExceeded"}, "messages": []}))
    assert closing("mini-swe-agent", tmp_path, "Saved trajectory.\n", MODEL_PARTIAL).source == "model"
    said = closing("mini-swe-agent", tmp_path, "All done, every test passes.\n\nleap.py\n", MODEL_PARTIAL)
    assert (said.source, said.claim.status, said.text) == ("output", "done", "All done, every test passes.")


def test_an_unreadable_trajectory_is_no_signal(tmp_path):
    (tmp_path / "trajectory.json").write_text("{not json")
    assert closing("mini-swe-agent", tmp_path, "", "Done: I wrote solution.py.").source == "model"
