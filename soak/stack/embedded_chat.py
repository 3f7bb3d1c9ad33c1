"""The embedded default's chat format, registered with llama-cpp-python's server as `soak-chatml-tools`; run the
server with it as `python -m soak.stack.embedded_chat <llama_cpp.server flags>`.

llama-cpp-python's own `chatml-function-calling` lists the offered tools in the system message only when a call
names a tool, renders tool results as an empty message and HTML-escapes tool-call arguments. So the model never
read a tool's reply (the coder's report, a refused call), and every plain-text turn after a named one (each
conversation's closing message) shared only its first ~60 prompt tokens with the call before it: the server's
prompt cache reused nothing and re-evaluated some 600 tokens. Here the tools are always listed when offered, tool
results are shown, arguments are kept verbatim, and the call's seed is honoured: a conversation's every prompt
extends the one before, so only its new messages are evaluated. A named tool call is decoded under a grammar of
the tool's JSON schema, as there.
"""

import json
from typing import Any

import jinja2.sandbox
from llama_cpp import llama_chat_format, llama_grammar

from soak.stack.embedded_cache import bound_memory
from soak.stack.servers import CHAT_FORMAT

END = "<|im_end|>"
TEMPLATE = jinja2.sandbox.ImmutableSandboxedEnvironment(
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True,  # the prompt ends "assistant\n", as history does
).from_string(
    "{% for m in messages %}"
    "<|im_start|>{{ 'user' if m.role == 'tool' else m.role }}\n"
    "{% if m.role == 'system' %}{{ m.get('content') or '' }}"
    "{% if tools %}\n\nYou have access to the following functions:\n"
    "{% for t in tools %}\nfunctions.{{ t.function.name }}:\n{{ t.function.parameters | tojson }}\n{% endfor %}"
    "\nTo call a function, begin the message with 'functions.<function_name>:' followed by its arguments as JSON."
    "{% endif %}"
    "{% elif m.role == 'tool' %}Result of the function call:\n{{ m.get('content') or '' }}"
    "{% elif m.role == 'assistant' %}{{ m.get('content') or '' }}"
    "{% for c in m.get('tool_calls') or [] %}functions.{{ c.function.name }}:\n{{ c.function.arguments }}{% endfor %}"
    "{% else %}{{ m.get('content') or '' }}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "<|im_start|>assistant\n"
)


SAMPLING = ("temperature", "top_p", "top_k", "min_p", "typical_p", "stream", "max_tokens", "presence_penalty",
            "frequency_penalty", "repeat_penalty", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta", "model",
            "seed", "logits_processor", "logit_bias")
"""The request settings passed on to the completion (the server hands over functions, logprobs and the like too)."""


def prompt_of(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The ChatML prompt of a conversation with its offered tools (before any forced tool name)."""
    return TEMPLATE.render(messages=messages, tools=tools or [])


def named_tool(tool_choice: Any, tools: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The tool a call names (`{"type": "function", "function": {"name": ...}}`), None for any other choice."""
    if not isinstance(tool_choice, dict):
        return None
    name = tool_choice.get("function", {}).get("name")
    tool = next((t for t in tools or [] if t["function"]["name"] == name), None)
    if tool is None:
        raise ValueError(f"tool_choice names '{name}', which is not among the tools offered")
    return tool


def chat_handler(llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: Any = None, stop: str | list[str] | None = None, **settings: Any) -> Any:
    """One chat completion: a named tool call under its schema's grammar, else a plain answer."""
    stops = [END, *([stop] if isinstance(stop, str) else stop or [])]
    sampling = {key: settings[key] for key in SAMPLING if settings.get(key) is not None}
    prompt = prompt_of(messages, tools)
    tool = named_tool(tool_choice, tools)
    if tool is None:
        completion = llama.create_completion(prompt=prompt, stop=stops, grammar=settings.get("grammar"), **sampling)
        return llama_chat_format._convert_completion_to_chat(completion, stream=bool(settings.get("stream")))
    name = tool["function"]["name"]
    grammar = llama_grammar.LlamaGrammar.from_json_schema(json.dumps(tool["function"].get("parameters", {})),
                                                          verbose=False)
    completion = llama.create_completion(prompt=f"{prompt}functions.{name}:\n", stop=stops, grammar=grammar,
                                         **sampling)
    return llama_chat_format._convert_completion_to_chat_function(name, completion, bool(settings.get("stream")))


def main() -> None:
    llama_chat_format.register_chat_completion_handler(CHAT_FORMAT)(chat_handler)
    bound_memory()
    from llama_cpp.server.__main__ import main as serve

    serve()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
