"""Whether an agent's chat request is one an OpenAI-compatible server can take, checked before the proxy forwards it.

A request the server cannot handle must be answered as the agent's error: forwarded, it may fail the server with a
5xx (a tool whose `function` is a string raised inside the server's own code) and the attempt read as the stack's
`infra_error`. The shapes are the openai SDK's own request types (`openai.types.chat`: message roles and content
parts, tools and tool calls, `tool_choice`), validated by pydantic, with the numeric ranges of OpenAI's schema.

Only the fields below are checked; any other key passes untouched, since servers take extras of their own
(`chat_template_kwargs`, `top_k`, `repetition_penalty`...) and extend some OpenAI fields (vLLM's `structural_tag`
response format). A range is held here only where vLLM holds it too (not OpenAI's cap of 2 on temperature: vLLM
samples above it); a value only some servers refuse gets their own 400, which is the agent's error too.
"""

import re
from typing import Annotated, Any, Required

from openai.types.chat import (
    ChatCompletionMessageParam,
    ChatCompletionStreamOptionsParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolUnionParam,
)
from openai.types.chat.completion_create_params import Function, FunctionCall
from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, SchemaValidator
from typing_extensions import TypedDict  # pydantic reads only this one on Python < 3.12

Count = Annotated[int, Field(ge=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]


class ChatRequest(TypedDict, total=False):
    """The checked part of a chat request: each field typed as in the SDK's `CompletionCreateParams`, with its range.
    `model` may be missing (the proxy serves its endpoint's model) and `messages` may not be empty (no server can
    prompt from nothing)."""

    messages: Required[Annotated[list[ChatCompletionMessageParam], Field(min_length=1)]]
    model: str | None
    tools: list[ChatCompletionToolUnionParam] | None
    tool_choice: ChatCompletionToolChoiceOptionParam | None
    parallel_tool_calls: bool | None
    functions: list[Function] | None
    function_call: FunctionCall | None
    stream: bool | None
    stream_options: ChatCompletionStreamOptionsParam | None
    max_tokens: Count | None
    max_completion_tokens: Count | None
    n: Count | None
    temperature: Annotated[float, Field(ge=0)] | None
    top_p: Annotated[float, Field(ge=0, le=1)] | None
    presence_penalty: Penalty | None
    frequency_penalty: Penalty | None
    logprobs: bool | None
    top_logprobs: Annotated[int, Field(ge=0)] | None
    seed: int | None
    stop: str | list[str] | None


DISCRIMINATORS = ("role", "type")
"""The fields whose literal names the member of an SDK union: a message by its role, a content part, tool, tool call or
tool choice by its type."""
REASON_CHARS = 300
"""The most of a reason given: pydantic's message repeats an unknown role or type, which may be of any length (a row's
error keeps 400 characters)."""
TAG = re.compile(r"^[A-Z]|\[|^(str|int|float|bool|none)$")
"""pydantic's name for a member of a plain union in an error's location: a TypedDict's class name or a type's name; the
request's own fields are all lower case."""


def request_problem(payload: Any) -> str:
    """Why no server would take this chat request, as `path: reason` (`tools[0].function: Input should be a valid
    dictionary`); empty when it is well formed. JSON's types are held strictly, as OpenAI's schema holds them: a
    number in a string is not a number (llama.cpp reads it as a type error of its own)."""
    if not isinstance(payload, dict):
        return "the request body is not a JSON object"
    try:
        CHAT_REQUEST.validate_python(payload, strict=True)
    except ValidationError as error:
        return reason(error.errors(), payload)
    return ""


def reason(errors: list[ErrorDetails], payload: dict[str, Any]) -> str:
    """One line from pydantic's errors: the deepest place still wrong (in a plain union, the member that matched
    furthest), with what each member expected there."""
    places = [place(error["loc"], payload) for error in errors]
    deepest = max(places, key=lambda path: path.count(".") + path.count("["))
    said = dict.fromkeys(error["msg"] for error, path in zip(errors, places, strict=True) if path == deepest)
    text = f"{deepest}: {' or '.join(said)}"
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def place(loc: tuple[int | str, ...], payload: Any) -> str:
    """A location as the request's path, `messages[2].content[0].text`, found by following it through the request:
    the union members' names that pydantic puts in it are left out (a class or type name, or, first thing within an
    object, the role or type that picked its member)."""
    path, at, entered = "", payload, True
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            at, entered = at[part] if isinstance(at, list) and part < len(at) else None, True
        elif TAG.search(part):
            continue
        elif entered and isinstance(at, dict) and part in (at.get(key) for key in DISCRIMINATORS):
            entered = False
        else:
            path += f".{part}" if path else part
            at, entered = at.get(part) if isinstance(at, dict) else None, True
    return path or "the request"


def eager(schema: Any, refs: dict[str, Any]) -> Any:
    """The core schema with the SDK's unions made discriminated, its Iterables lists and its optional fields
    nullable. pydantic checks an Iterable lazily, only as it is read, and tries every member of a plain union,
    reporting each one's complaint: a discriminated union checks the member the request's own `role` or `type`
    names, and says which exist when none does. A null optional field is an absent one to the servers (vLLM's
    fields are Optional, llama.cpp reads null as the default), and agents send them (an assistant message's
    `tool_calls: null`)."""
    if isinstance(schema, list):
        return [eager(item, refs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: eager(value, refs) for key, value in schema.items()}
    if out.get("type") == "generator":
        out["type"] = "list"
    elif out.get("type") == "typed-dict-field" and out.get("required") is False:
        out["schema"] = {"type": "nullable", "schema": out["schema"]}
    elif out.get("type") == "union":
        for key in DISCRIMINATORS:
            named = {tag: choice for choice in out["choices"] if (tag := tag_of(choice, key, refs))}
            if len(named) > 1:
                rest = [choice for choice in out["choices"] if not any(choice is kept for kept in named.values())]
                tagged = {"type": "tagged-union", "choices": named, "discriminator": key}
                return {**out, "choices": [*rest, tagged]} if rest else tagged
    return out


def tag_of(choice: Any, key: str, refs: dict[str, Any]) -> str | None:
    """The one value a union member's required `key` field may take, if it is a TypedDict with such a field."""
    schema = choice[0] if isinstance(choice, tuple) else choice
    if schema.get("type") == "definition-ref":
        schema = refs[schema["schema_ref"]]
    field = schema.get("fields", {}).get(key) if schema.get("type") == "typed-dict" else None
    if not (field and field.get("required") and field["schema"]["type"] == "literal"):
        return None
    expected = field["schema"]["expected"]
    return str(expected[0]) if len(expected) == 1 else None


def validator(schema: Any) -> SchemaValidator:
    """A validator of `schema` made `eager`, its members named by reference looked up where they are defined."""
    refs: dict[str, Any] = {}

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("ref"), str):
                refs[node["ref"]] = node
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(schema)
    return SchemaValidator(eager(schema, refs))


CHAT_REQUEST = validator(TypeAdapter(ChatRequest).core_schema)
