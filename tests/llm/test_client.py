"""The LLM layer against scripted HTTP replies (httpx2.MockTransport): timing, usage, tool calls, retries."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest

from soak.config import Endpoint
from soak.llm.client import CallContext, ChatEndpoint
from soak.llm.integrity import ToolCall, judge_tool_calls, path_escapes
from soak.llm.reply import reasoning_exhausted
from soak.record.identity import AttemptId
from soak.record.schema import CallRow

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {}, "required": required},
        },
    }
    for name, required in (("write_file", ["path", "content"]), ("read_file", ["path"]))
]


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices,
            "usage": usage}


def sse(
    *chunks: dict, done: bool = True, delay: float = 0.0, streaming: asyncio.Event | None = None
) -> Callable[[httpx2.Request], httpx2.Response]:
    """An SSE reply; `streaming` is set once the body is being read."""

    async def body() -> AsyncIterator[bytes]:
        for item in chunks:
            if streaming:
                streaming.set()
            if delay:
                await asyncio.sleep(delay)
            yield f"data: {json.dumps(item)}\n\n".encode()
        if done:
            yield b"data: [DONE]\n\n"

    return lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def endpoint_with(replies: list, stale: float = 5.0, **fields: Any) -> tuple[ChatEndpoint, list[dict]]:
    """An endpoint whose successive requests get successive scripted replies; also returns the requests seen."""
    seen: list[dict] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        reply = replies[min(len(seen), len(replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply(request) if callable(reply) else reply

    settings = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "retry_backoff_seconds": 0.0, **fields}
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return ChatEndpoint("test", Endpoint(**settings), stale, http_client=client), seen


def run(coro):
    return asyncio.run(coro)


USAGE = {
    "prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45,
    "prompt_tokens_details": {"cached_tokens": 32}, "completion_tokens_details": {"reasoning_tokens": 2},
}


def test_stream_timing_usage_and_reasoning():
    ep, seen = endpoint_with([sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "think "}),
        chunk({"reasoning_content": "more"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}, finish="stop"),
        chunk(usage=USAGE),
        delay=0.01,
    )], extra_body={"reasoning_effort": "low"})
    rows: list[CallRow] = []
    context = CallContext("r1", AttemptId("t", 3), call_index=7, on_row=rows.append)
    result = run(ep.chat([{"role": "user", "content": "hi"}], role="orchestrator", context=context))
    assert result.ok and result.content == "Hello" and result.reasoning == "think more"
    assert result.integrity == "none" and not result.reasoning_exhausted
    assert rows == result.rows and len(rows) == 1
    row = rows[0]
    assert (row.run_id, row.task_id, row.cycle, row.call_index, row.role) == ("r1", "t", 3, 7, "orchestrator")
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens, row.reasoning_tokens) == (40, 5, 32, 2)
    assert 0 < row.first_byte_s < row.ttft_s < row.last_token_s < row.duration_s
    assert row.decode_tps == pytest.approx(4 / (row.last_token_s - row.ttft_s))
    assert row.finish_reason == "stop" and row.http_status == 200 and row.status == "ok"
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}
    assert seen[0]["reasoning_effort"] == "low" and seen[0]["max_tokens"] == 2048


def test_a_reply_that_arrives_in_one_bundled_chunk_has_no_decode_rate():
    """A tool call whose name swallowed its 300-token arguments arrives whole after the model decoded them: the few
    milliseconds between its chunks are not a decode rate (it would read as tens of thousands of tokens/s)."""
    whole = {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": 'write_file(path="a.py")', "arguments": ""}}]}
    rest = {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}
    ep, _ = endpoint_with([sse(chunk(whole), chunk(rest, finish="tool_calls"),
                               chunk(usage={**USAGE, "completion_tokens": 300}), delay=0.01)])
    row = run(ep.chat([{"role": "user", "content": "hi"}])).rows[0]
    assert row.completion_tokens == 300 and row.ttft_s is not None and row.decode_tps is None


def test_missing_usage_is_unknown_not_zero():
    ep, _ = endpoint_with([sse(chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"))])
    row = run(ep.chat([{"role": "user", "content": "hi"}])).rows[0]
    assert row.prompt_tokens is None and row.completion_tokens is None and row.cached_tokens is None
    assert row.decode_tps is None and row.ttft_s is not None


def test_tool_calls_assembled_by_index_name_once():
    def call(index: int, name: str | None = None, args: str | None = None, id: str | None = None) -> dict:
        return {"tool_calls": [{"index": index, "id": id, "type": "function",
                                "function": {"name": name, "arguments": args}}]}

    ep, _ = endpoint_with([sse(
        chunk(call(0, "write_file", "", id="a")),
        chunk(call(0, "write_file", '{"path": "solution.py", ')),
        chunk(call(1, "read_file", '{"path"', id="b")),
        chunk(call(0, None, '"content": "x = 1"}')),
        chunk(call(1, None, ': "solution.py"}'), finish="tool_calls"),
        chunk(usage=USAGE),
    )])
    result = run(ep.chat([{"role": "user", "content": "go"}], TOOLS))
    assert [(c.id, c.name) for c in result.tool_calls] == [("a", "write_file"), ("b", "read_file")]
    assert result.tool_calls[0].args() == {"path": "solution.py", "content": "x = 1"}
    assert result.integrity == "ok" and result.rows[0].tool_names == "write_file,read_file"
    assert result.message()["tool_calls"][1]["function"]["arguments"] == '{"path": "solution.py"}'


@pytest.mark.parametrize(
    ("name", "arguments", "verdict"),
    [
        ("write_file", '{"path": "solution.py", "content": ""}', "ok"),
        ('write_file(path="solution.py")', "{}", "mangled_name"),
        ("read_file\n</parameter", "{}", "mangled_name"),
        ("run_shell", '{"cmd": "ls"}', "unknown_tool"),
        ("write_file", '{"path": "solution.py", "content": "x', "bad_json"),
        ("write_file", '{"path": "solution.py"}', "bad_json"),
        ("write_file", "", "bad_json"),
        ("write_file", '{"path": "/etc/passwd", "content": ""}', "path_escape"),
        ("read_file", '{"path": "../../secret"}', "path_escape"),
        ("read_file", '{"path": "sub/../solution.py"}', "ok"),
    ],
)
def test_integrity_verdicts(name: str, arguments: str, verdict: str):
    assert judge_tool_calls([ToolCall(id="1", name=name, arguments=arguments)], TOOLS, "tool_calls") == verdict


def test_integrity_none_missing_and_worst_wins():
    assert judge_tool_calls([], TOOLS, "stop") == "none"
    assert judge_tool_calls([], TOOLS, "tool_calls") == "missing"
    calls = [ToolCall(id="1", name="read_file", arguments='{"path": "/x"}'), ToolCall(id="2", name="x(", arguments="")]
    assert judge_tool_calls(calls, TOOLS, "tool_calls") == "mangled_name"


@pytest.mark.parametrize(
    ("path", "escapes"),
    [("solution.py", False), ("a/b/../c.py", False), ("./x", False), ("..", True), ("a/../../b", True),
     ("/abs", True), ("~/x", True), ("C:\\x", True), ("..\\x", True)],
)
def test_path_escapes(path: str, escapes: bool):
    assert path_escapes(path) is escapes


def test_reasoning_exhausted_rule():
    assert reasoning_exhausted("length", "", "long thought", False, 100, 100)
    assert reasoning_exhausted("length", "<think>still going", "", False, None, 100)
    assert reasoning_exhausted("stop", "", "", False, 100, 100)
    assert not reasoning_exhausted("length", "partial answer", "", False, 100, 100)
    assert not reasoning_exhausted("length", "", "thought", True, 100, 100)
    assert not reasoning_exhausted("stop", "", "", False, None, 100)


def test_reasoning_exhausted_in_a_stream():
    usage = {"prompt_tokens": 10, "completion_tokens": 16, "total_tokens": 26}
    ep, _ = endpoint_with([sse(chunk({"reasoning": "hmm " * 16}, finish="length"), chunk(usage=usage))])
    result = run(ep.chat([{"role": "user", "content": "x"}], max_tokens=16))
    assert result.ok and result.reasoning_exhausted and result.rows[0].reasoning_exhausted


def test_truncated_stream_is_retried_then_reported():
    ep, seen = endpoint_with([sse(chunk({"content": "par"}))], retries=2)
    rows: list[CallRow] = []
    result = run(ep.chat([{"role": "user", "content": "x"}], context=CallContext(call_index=4, on_row=rows.append)))
    assert result.status == "truncated" and not result.ok
    assert [r.status for r in rows] == ["truncated"] * 3 and len(seen) == 3
    assert [(r.retry, r.call_index) for r in rows] == [(1, 4), (2, 5), (3, 6)]


def test_stall_aborts_and_retries():
    ep, seen = endpoint_with([sse(chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"), delay=0.4),
                              sse(chunk({"content": "ok"}, finish="stop"))], stale=0.2, retries=1)
    result = run(ep.chat([{"role": "user", "content": "x"}]))
    assert [r.status for r in result.rows] == ["stalled", "ok"] and result.content == "ok"
    assert result.rows[0].duration_s < 0.4


def stalling(seconds: float, *chunks: dict) -> Callable[[httpx2.Request], httpx2.Response]:
    """An SSE reply that goes silent for `seconds` after its first chunk, then sends the rest."""

    async def body() -> AsyncIterator[bytes]:
        for index, item in enumerate(chunks):
            if index == 1:
                await asyncio.sleep(seconds)
            yield f"data: {json.dumps(item)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def test_the_longest_silence_after_the_first_byte_is_recorded():
    ep, _ = endpoint_with([stalling(0.3, chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"))])
    row = run(ep.chat([{"role": "user", "content": "x"}])).rows[0]
    assert row.status == "ok" and 0.15 < row.max_gap_s < row.duration_s - row.first_byte_s  # the 0.3 s, give or take


def test_a_stream_cut_for_silence_counts_its_silence_up_to_the_cut():
    ep, _ = endpoint_with([stalling(30.0, chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"))],
                          stale=0.2)
    row = run(ep.chat([{"role": "user", "content": "x"}])).rows[0]
    assert row.status == "stalled" and 0.2 <= row.max_gap_s < row.duration_s  # the watchdog fires after 0.2 s


def test_5xx_then_recovery():
    ep, seen = endpoint_with([httpx2.Response(503, json={"error": {"message": "overloaded"}}),
                              sse(chunk({"content": "fine"}, finish="stop"))])
    result = run(ep.chat([{"role": "user", "content": "x"}]))
    assert [(r.status, r.http_status) for r in result.rows] == [("http_5xx", 503), ("ok", 200)]
    assert result.ok and result.content == "fine"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"error": {"message": "bad key sk-abcdef1234567890"}}, "auth"),
        (403, {"error": {"message": "forbidden"}}, "auth"),
        (404, {"error": {"message": "model not found"}}, "not_found"),
        (400, {"error": {"message": "This model's maximum context length is 4096 tokens."}}, "context_window"),
        (422, {"error": {"message": "bad field"}}, "bad_request"),
    ],
)
def test_client_errors_abort_at_once(status: int, body: dict, expected: str):
    ep, seen = endpoint_with([httpx2.Response(status, json=body)], retries=3)
    result = run(ep.chat([{"role": "user", "content": "x"}]))
    assert result.status == expected and len(seen) == 1 and result.rows[0].http_status == status
    assert "abcdef1234567890" not in result.rows[0].error


def test_api_key_never_reaches_the_row(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SOAK_TEST_KEY", "very-secret-value")
    reply = httpx2.Response(401, json={"error": {"message": "key very-secret-value rejected"}})
    ep, _ = endpoint_with([reply], api_key_env="SOAK_TEST_KEY")
    row = run(ep.chat([{"role": "user", "content": "x"}])).rows[0]
    assert row.status == "auth" and "very-secret-value" not in row.model_dump_json()


def test_connection_error_retried():
    ep, seen = endpoint_with([httpx2.ConnectError("refused")], retries=1)
    result = run(ep.chat([{"role": "user", "content": "x"}]))
    assert [r.status for r in result.rows] == ["connection", "connection"] and len(seen) == 2


def test_error_event_mid_stream_is_bad_response():
    ep, _ = endpoint_with([sse(chunk({"content": "a"}), {"error": {"message": "engine died"}})], retries=0)
    result = run(ep.chat([{"role": "user", "content": "x"}]))
    assert result.status == "bad_response" and "engine died" in result.error


def test_lone_surrogates_on_the_wire_reach_soak_as_valid_text():
    """JSON may escape a lone surrogate ("\\ud800"), in the reply's text or inside a tool call's arguments: each comes
    out as U+FFFD, so no file, CSV or transcript writer downstream fails on it."""
    lone = "\ud800"
    call = {"tool_calls": [{"index": 0, "id": f"c{lone}",
                            "function": {"name": f"read_file{lone}", "arguments": json.dumps({"path": lone})}}]}
    ep, _ = endpoint_with([sse(chunk({"content": f"a{lone}", "reasoning": lone}), chunk(call, finish="tool_calls")),
                           sse(chunk({"content": "a"}), {"error": {"message": f"engine died {lone}"}})], retries=0)
    result = run(ep.chat([{"role": "user", "content": "x"}], TOOLS))
    assert (result.content, result.reasoning, result.rows[0].tool_names) == ("a\ufffd", "\ufffd", "read_file\ufffd")
    assert result.tool_calls[0].args() == {"path": "\ufffd"} and result.model_dump_json().encode()
    failed = run(ep.chat([{"role": "user", "content": "x"}]))
    assert failed.status == "bad_response" and failed.error.endswith("engine died \ufffd")


def test_tool_call_text_in_content_is_noted():
    ep, _ = endpoint_with([sse(chunk({"content": "<tool_call>\n<function=write_file>"}, finish="stop"))])
    result = run(ep.chat([{"role": "user", "content": "x"}], TOOLS))
    assert result.ok and result.integrity == "none" and "tool call left as text" in result.rows[0].error


def test_non_stream_reply():
    completion = {
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "reasoning_content": "plan",
            "tool_calls": [{"id": "t1", "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "solution.py"}'}}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        "timings": {"predicted_per_second": 42.5},
    }
    ep, seen = endpoint_with([httpx2.Response(200, json=completion)], stream=False)
    result = run(ep.chat([{"role": "user", "content": "x"}], TOOLS, max_tokens=64))
    row = result.rows[0]
    assert "stream" not in seen[0] or seen[0]["stream"] is False
    assert result.reasoning == "plan" and result.integrity == "ok" and result.tool_calls[0].name == "read_file"
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (12, 9, None)
    assert row.decode_tps == 42.5 and row.ttft_s is None and row.first_byte_s is not None and row.max_tokens == 64
    assert row.max_gap_s is None  # no stream, no silence between its pieces


def test_cancel_records_a_cancelled_row_and_propagates():
    streaming = asyncio.Event()
    ep, _ = endpoint_with([sse(chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"), delay=30.0,
                               streaming=streaming)])
    rows: list[CallRow] = []

    async def scenario() -> None:
        task = asyncio.create_task(ep.chat([{"role": "user", "content": "x"}], context=CallContext(on_row=rows.append)))
        await streaming.wait()  # the reply is streaming: cancel mid-stream
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        run(scenario())
    assert [r.status for r in rows] == ["cancelled"]


def test_tool_choice_sent_only_when_configured_and_content_stays_a_string():
    reply = sse(chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                       "function": {"name": "read_file", "arguments": '{"path": "solution.py"}'}}]},
                      finish="tool_calls"), chunk(usage=USAGE))
    plain, seen_plain = endpoint_with([reply])
    result = run(plain.chat([{"role": "user", "content": "go"}], TOOLS))
    assert "tool_choice" not in seen_plain[0]
    # llama-cpp-python answers a null content beside tool calls with HTTP 500.
    assert result.message()["content"] == ""
    auto, seen_auto = endpoint_with([reply], tool_choice="auto")
    run(auto.chat([{"role": "user", "content": "go"}], TOOLS))
    run(auto.chat([{"role": "user", "content": "no tools offered"}]))
    assert seen_auto[0]["tool_choice"] == "auto" and "tool_choice" not in seen_auto[1]
    named, seen_named = endpoint_with([reply, reply], tool_choice="named")
    run(named.chat([{"role": "user", "content": "go"}], TOOLS, owed_tool="read_file"))
    run(named.chat([{"role": "user", "content": "the file is read"}], TOOLS))
    assert seen_named[0]["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert "tool_choice" not in seen_named[1]


def test_seeded_calls_repeat_per_task_cycle_and_call():
    reply = sse(chunk({"content": "hi"}, finish="stop"), chunk(usage=USAGE))
    seeded, seen = endpoint_with([reply], seed=7)
    contexts = [CallContext(attempt=AttemptId("a", 1)), CallContext(attempt=AttemptId("a", 1)),
                CallContext(attempt=AttemptId("a", 2)), CallContext(attempt=AttemptId("b", 1))]
    for context in contexts:
        run(seeded.chat([{"role": "user", "content": "x"}], context=context))
    seeds = [request["seed"] for request in seen]
    assert seeds[0] == seeds[1] and len(set(seeds[1:])) == 3
    plain, seen_plain = endpoint_with([reply])
    run(plain.chat([{"role": "user", "content": "x"}]))
    assert "seed" not in seen_plain[0]


def test_each_row_keeps_the_sampling_settings_its_request_was_sent_with():
    """temperature and seed as sent (the seed offset per call), top_p from extra_body; none left to the server."""
    reply = sse(chunk({"content": "hi"}, finish="stop"), chunk(usage=USAGE))
    seeded, seen = endpoint_with([reply], seed=7, temperature=0.6, extra_body={"top_p": 0.9})
    rows = [run(seeded.chat([{"role": "user", "content": "x"}], context=CallContext(attempt=AttemptId("a", cycle))))
            .rows[0] for cycle in (1, 2)]
    assert [(r.temperature, r.top_p, r.seed) for r in rows] == [(0.6, 0.9, s["seed"]) for s in seen]
    assert seen[0]["top_p"] == 0.9 and seen[0]["seed"] != seen[1]["seed"]
    plain, _ = endpoint_with([reply])
    row = run(plain.chat([{"role": "user", "content": "x"}])).rows[0]
    assert (row.temperature, row.top_p, row.seed) == (0.2, None, None)


@pytest.mark.parametrize("arguments", ['{"path": "solution.py", "content": "x = 1"}', '{"path": "../up.py"', "{}"])
def test_scripted_model_rows_are_the_real_clients_rows(arguments: str):
    """The same reply, served over HTTP and by the scripted model, makes the same calls.csv row (timing aside)."""
    from soak.llm.scripted import Say, ScriptedModel

    usage = {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
    ep, _ = endpoint_with([sse(chunk({"content": "ok", "tool_calls": [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "write_file", "arguments": arguments}}]},
        finish="tool_calls"), chunk(usage=usage))], stale=5.0)
    scripted = ScriptedModel([Say("ok", calls=[("write_file", arguments)], prompt_tokens=40, completion_tokens=5)],
                             name="test", model="m")
    context = CallContext("r", AttemptId("t", 1), call_index=3)
    messages = [{"role": "user", "content": "x"}]
    real = run(ep.chat(messages, TOOLS, max_tokens=64, context=context))
    fake = run(scripted.chat(messages, TOOLS, max_tokens=64, context=context))
    timing = {"started_at", "first_byte_s", "ttft_s", "last_token_s", "max_gap_s", "duration_s", "decode_tps"}
    assert real.rows[0].model_dump(exclude=timing) == fake.rows[0].model_dump(exclude=timing)
    assert (real.integrity, real.content, real.message()["tool_calls"][0]["function"]) == (
        fake.integrity, fake.content, fake.message()["tool_calls"][0]["function"])
    assert scripted.asked[0].max_tokens == 64 and scripted.asked[0].messages == messages
