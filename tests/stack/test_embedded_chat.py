"""The embedded default's chat format: each prompt of a conversation extends the one before (so the server's prompt
cache evaluates only the new messages), tool results are shown, and calls work on the real bundled model."""

import json

import pytest

from soak.agent.loop import CODER_SYSTEM
from soak.agent.prompts import opening
from soak.llm.tools import CODER_TOOLS
from soak.tasks.suites import load_suites

embedded_chat = pytest.importorskip("soak.stack.embedded_chat", reason="needs the `local` extra (llama-cpp-python)")


def conversation() -> tuple[list[dict], str]:
    task = load_suites("builtin")[0]
    return [{"role": "system", "content": CODER_SYSTEM}, {"role": "user", "content": opening(task)}], task.entry


def test_each_prompt_extends_the_one_before_across_named_and_plain_turns():
    messages, entry = conversation()
    arguments = json.dumps({"path": entry, "content": 'def f(x):\n    return "<&>"\n'})
    named = embedded_chat.prompt_of(messages, CODER_TOOLS) + "functions.write_file:\n" + arguments
    messages += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": arguments}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": f"wrote {entry} (31 bytes)"}]
    closing = embedded_chat.prompt_of(messages, CODER_TOOLS)  # the plain turn: no tool named
    assert closing.startswith(named)
    assert f"wrote {entry} (31 bytes)" in closing  # the tool's reply reaches the model
    assert "&#34;" not in closing and "&lt;" not in closing  # the arguments verbatim, not HTML-escaped
    messages.append({"role": "assistant", "content": "Done."})
    messages.append({"role": "user", "content": "The tests failed: ..."})
    assert embedded_chat.prompt_of(messages, CODER_TOOLS).startswith(closing + "Done.")


def test_a_tool_choice_naming_an_unoffered_tool_is_refused():
    with pytest.raises(ValueError, match="not among the tools offered"):
        embedded_chat.named_tool({"type": "function", "function": {"name": "rm_rf"}}, CODER_TOOLS)


@pytest.fixture(scope="module")
def model():
    """The bundled SmolLM2 GGUF, loaded in this process (a second or two)."""
    import llama_cpp

    from soak.stack.servers import embedded_gguf

    return llama_cpp.Llama(model_path=str(embedded_gguf()), n_ctx=2048, n_batch=128, verbose=False, seed=0)


def test_a_named_call_on_the_real_model_is_a_tool_call_whose_arguments_fit_the_schema(model):
    messages, entry = conversation()
    reply = embedded_chat.chat_handler(model, messages, tools=CODER_TOOLS, max_tokens=64, temperature=0.2, seed=1,
                                       tool_choice={"type": "function", "function": {"name": "write_file"}})
    choice = reply["choices"][0]
    (call,) = choice["message"]["tool_calls"]
    assert choice["finish_reason"] == "tool_calls" and call["function"]["name"] == "write_file"
    assert reply["usage"]["prompt_tokens"] > 100
    assert call["function"]["arguments"].replace(" ", "").startswith('{"path":"')  # the schema's grammar held


def test_a_plain_call_on_the_real_model_answers_in_text_and_honours_its_seed(model):
    messages, _ = conversation()
    replies = [embedded_chat.chat_handler(model, messages, tools=CODER_TOOLS, max_tokens=16, temperature=0.8,
                                          seed=7)["choices"][0] for _ in range(2)]
    assert replies[0]["message"]["content"] and not replies[0]["message"].get("tool_calls")
    assert replies[0]["message"]["content"] == replies[1]["message"]["content"]  # same seed, same answer
