"""The recording proxy against a scripted upstream: bytes pass unchanged both ways, the real key is added only by the
proxy, every call becomes a row, and the budgets and the stale cut hold. What the agent gets wrong (a body over the
cap, a malformed request) is answered by the proxy as the agent's own call, and only the configured model is served."""

import asyncio
import json
import multiprocessing
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import httpx2
import psutil
import pytest
from aiohttp import web

from soak.agent.attempt import Ledger
from soak.agent.proxy import ProxiedAttempt, RecordingProxy
from soak.config import MAX_REQUEST_BYTES, Budgets, Endpoint
from soak.record.identity import AttemptId
from soak.record.schema import CallRow
from tests.helpers import FIXTURES

KEY = "sk-real-key"
# A line split across two writes, usage in a chunk of its own, then [DONE]: the copy must be parsed across writes.
CHUNKS = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel',
    b'lo"},"finish_reason":null}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":" there"},'
    b'"finish_reason":"stop"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n',
    b"data: [DONE]\n\n",
]
WHOLE = json.dumps({
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}).encode()
MODELS = b'{"object":"list","data":[{"id":"sim","object":"model"}]}'


@dataclass
class Upstream:
    """A scripted OpenAI-compatible server that keeps what it received (`asked` is set at the first request);
    `answer` makes it wait until set before it answers at all, `hold` makes a stream wait after its first chunk until
    it is set, `pause_seconds` makes it go silent that long there, and `hung_up` is set when the proxy closes a
    stream's connection."""

    received: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    peers: list[tuple[str, int]] = field(default_factory=list)
    """The proxy's end of the connection each request came on."""
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    answer: asyncio.Event | None = None
    hold: asyncio.Event | None = None
    pause_seconds: float = 0.0
    error: tuple[int, bytes] | None = None
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    chunks: list[bytes] = field(default_factory=lambda: CHUNKS)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append((request.path, dict(request.headers), body))
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else ("", 0))
        self.asked.set()
        if self.answer is not None:
            await self.answer.wait()
        if request.path.endswith("/models"):
            return web.Response(body=MODELS, content_type="application/json")
        if self.error is not None:
            return web.Response(status=self.error[0], body=self.error[1], content_type="application/json")
        if not json.loads(body).get("stream"):
            return web.Response(body=WHOLE, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for index, chunk in enumerate(self.chunks):
                await response.write(chunk)
                if index == 0 and self.hold is not None:
                    await self.hold.wait()
                if index == 0 and self.pause_seconds:
                    await asyncio.sleep(self.pause_seconds)
        except asyncio.CancelledError:
            self.hung_up.set()
            raise
        await response.write_eof()
        return response


@asynccontextmanager
async def serving(upstream: Upstream) -> AsyncIterator[str]:
    runner = web.ServerRunner(web.Server(upstream.handle, handler_cancellation=True), handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        for waiting in (upstream.answer, upstream.hold):
            if waiting is not None:
                waiting.set()
        await runner.cleanup()


@dataclass
class Rig:
    proxy: RecordingProxy
    ledger: Ledger
    base_url: str
    token: str
    rows: list[CallRow]
    recorded: asyncio.Event
    client: httpx2.AsyncClient

    def post(self, body: dict, token: str | None = None) -> Awaitable[httpx2.Response]:
        return self.client.post(f"{self.base_url}/chat/completions", content=json.dumps(body).encode(),
                                headers={"Authorization": f"Bearer {token or self.token}"})


async def settled(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), 10)


def run(upstream: Upstream, test: Callable[[Rig], Awaitable[None]], base_url: str | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES, **budgets: float) -> None:
    """Start the upstream and a proxy in front of it with one open attempt, then run `test` against them."""

    async def go() -> None:
        async with serving(upstream) as url:
            proxy = RecordingProxy("sim", Endpoint(base_url=base_url or url, model="sim"), KEY,
                                   Budgets(**budgets), max_request_bytes)
            await proxy.start()
            rows: list[CallRow] = []
            recorded = asyncio.Event()

            def on_call(row: CallRow) -> None:
                rows.append(row)
                recorded.set()

            ledger = Ledger(max_calls=int(budgets.get("max_calls", 50)), max_completion_tokens=10**6, on_call=on_call)
            try:
                async with httpx2.AsyncClient(timeout=30) as client:
                    opened = proxy.open(ProxiedAttempt(ledger, "r", AttemptId("t", 1)))
                    await test(Rig(proxy, ledger, *opened, rows, recorded, client))
            finally:
                await proxy.stop()

    asyncio.run(go())


STREAM = {"model": "sim", "stream": True, "messages": [{"role": "user", "content": "hi"}],
          "stream_options": {"include_usage": True}}


def test_a_stream_passes_byte_for_byte_with_the_real_key_added_and_becomes_a_row():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        sent = json.dumps(STREAM).encode()
        async with rig.client.stream("POST", f"{rig.base_url}/chat/completions", content=sent,
                                     headers={"Authorization": f"Bearer {rig.token}"}) as reply:
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
            got = b"".join([chunk async for chunk in reply.aiter_raw()])
        assert got == b"".join(CHUNKS)
        await settled(rig.recorded)
        path, headers, body = upstream.received[0]
        assert path == "/v1/chat/completions" and body == sent
        assert headers["Authorization"] == f"Bearer {KEY}" and rig.token not in json.dumps(headers)
        [row] = rig.rows
        assert (row.status, row.http_status, row.finish_reason, row.stream) == ("ok", 200, "stop", True)
        assert (row.prompt_tokens, row.completion_tokens) == (5, 2) and row.ttft_s is not None
        assert rig.ledger.calls == rig.ledger.totals.calls == 1 and rig.ledger.completion_tokens == 2

    run(upstream, test)


def test_the_longest_silence_after_the_first_byte_is_recorded():
    upstream = Upstream(pause_seconds=0.3)

    async def test(rig: Rig) -> None:
        reply = await rig.post(STREAM)
        assert reply.content == b"".join(CHUNKS)
        [row] = rig.rows
        # The chunk before the pause may reach the proxy later than the one after it left the upstream.
        assert row.status == "ok" and 0.15 < row.max_gap_s < row.duration_s - row.first_byte_s

    run(upstream, test)


def test_an_unreadable_line_passes_unchanged_and_the_rest_of_its_read_is_still_recorded():
    chunks = [CHUNKS[0], CHUNKS[1].replace(b"\n\ndata: ", b"\n\ndata: {not json\n\ndata: ", 1), *CHUNKS[2:]]
    upstream = Upstream(chunks=chunks)

    async def test(rig: Rig) -> None:
        reply = await rig.post(STREAM)
        assert reply.content == b"".join(chunks)
        [row] = rig.rows
        assert (row.status, row.finish_reason, row.completion_tokens) == ("ok", "stop", 2)

    run(upstream, test)


def test_a_whole_reply_passes_unchanged_and_becomes_a_row():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        reply = await rig.post({**STREAM, "stream": False})
        assert reply.status_code == 200 and reply.content == WHOLE
        await settled(rig.recorded)
        [row] = rig.rows
        assert (row.status, row.completion_tokens, row.stream, row.max_gap_s) == ("ok", 1, False, None)

    run(upstream, test)


def test_models_pass_through_with_the_key_and_an_unknown_token_reaches_nothing():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        models = await rig.client.get(f"{rig.base_url}/models", headers={"Authorization": f"Bearer {rig.token}"})
        assert models.status_code == 200 and models.content == MODELS
        assert upstream.received[0][1]["Authorization"] == f"Bearer {KEY}"
        stranger = rig.base_url.replace(rig.token, "not-a-token")
        for reply in (await rig.client.get(f"{stranger}/models"),
                      await rig.client.post(f"{stranger}/chat/completions", json=STREAM)):
            assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_api_key"
        other = await rig.client.post(f"{rig.base_url}/embeddings", json={})
        assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
        assert len(upstream.received) == 1 and not rig.rows

    run(upstream, test)


def test_the_call_cap_refuses_the_next_call_and_ends_the_attempt():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        assert (await rig.post({**STREAM, "stream": False})).status_code == 200
        refused = await rig.post({**STREAM, "stream": False})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "call_cap"
        assert rig.ledger.ended is not None and rig.ledger.ended.outcome == "call_cap" and rig.ledger.stop.is_set()
        assert len(upstream.received) == 1 and len(rig.rows) == 1

    run(upstream, test, max_calls=1)


def test_an_upstream_error_passes_with_its_status_and_is_recorded():
    body = b'{"error":{"message":"This model\'s maximum context length is 4096 tokens"}}'
    upstream = Upstream(error=(400, body))

    async def test(rig: Rig) -> None:
        reply = await rig.post(STREAM)
        assert reply.status_code == 400 and reply.content == body
        [row] = rig.rows
        assert (row.status, row.http_status) == ("context_window", 400)

    run(upstream, test)


def test_an_unreachable_upstream_is_a_502_and_a_connection_row():
    async def test(rig: Rig) -> None:
        reply = await rig.post(STREAM)
        assert reply.status_code == 502 and reply.json()["error"]["code"] == "upstream_unreachable"
        [row] = rig.rows
        assert row.status == "connection" and KEY not in row.error

    run(Upstream(), test, base_url="http://127.0.0.1:9/v1")


def test_a_stream_with_no_byte_for_stale_seconds_is_cut_and_recorded_stalled():
    upstream = Upstream(hold=asyncio.Event())

    async def test(rig: Rig) -> None:
        got = b""
        with pytest.raises(httpx2.HTTPError):
            async with rig.client.stream("POST", f"{rig.base_url}/chat/completions", json=STREAM,
                                         headers={"Authorization": f"Bearer {rig.token}"}) as reply:
                async for chunk in reply.aiter_raw():
                    got += chunk
        assert got == CHUNKS[0]
        await settled(rig.recorded)
        [row] = rig.rows
        assert row.status == "stalled" and "no byte for 0.3 s" in row.error and row.max_gap_s < row.duration_s
        # aiohttp's read timer starts when the socket delivered the byte, the gap when the proxy handled it, a moment
        # later on a loaded machine: the gap is the budget less that moment.
        assert row.max_gap_s >= 0.25
        await settled(upstream.hung_up)  # the server is told to stop generating

    run(upstream, test, stale_seconds=0.3)


def test_a_server_silent_before_its_reply_begins_is_cut_at_stale_seconds_and_recorded_stalled():
    upstream = Upstream(answer=asyncio.Event())

    async def test(rig: Rig) -> None:
        reply = await rig.post(STREAM)
        assert reply.status_code == 504 and reply.json()["error"]["code"] == "stalled"
        [row] = rig.rows
        assert row.status == "stalled" and "no byte for 0.3 s" in row.error and row.duration_s >= 0.3

    run(upstream, test, stale_seconds=0.3)


def test_an_agent_hanging_up_mid_stream_is_recorded_cancelled():
    upstream = Upstream(hold=asyncio.Event())

    async def test(rig: Rig) -> None:
        async with rig.client.stream("POST", f"{rig.base_url}/chat/completions", json=STREAM,
                                     headers={"Authorization": f"Bearer {rig.token}"}) as reply:
            async for chunk in reply.aiter_raw():
                assert chunk == CHUNKS[0]
                break
        await settled(rig.recorded)
        [row] = rig.rows
        assert row.status == "cancelled"
        await settled(upstream.hung_up)

    run(upstream, test)


def test_an_agent_hanging_up_before_the_server_answers_is_recorded_cancelled():
    upstream = Upstream(answer=asyncio.Event())

    async def test(rig: Rig) -> None:
        asking = asyncio.ensure_future(rig.post(STREAM))
        await settled(upstream.asked)
        asking.cancel()
        await settled(rig.recorded)
        [row] = rig.rows
        assert row.status == "cancelled" and row.http_status is None
        assert rig.ledger.calls == rig.ledger.totals.calls == 1

    run(upstream, test)


def test_the_unix_socket_serves_the_same_routes():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        transport = httpx2.AsyncHTTPTransport(uds=str(rig.proxy.socket_path))
        async with httpx2.AsyncClient(transport=transport, timeout=30) as client:
            reply = await client.post(f"{rig.base_url}/chat/completions", json={**STREAM, "stream": False},
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 200 and reply.content == WHOLE and len(rig.rows) == 1

    run(upstream, test)


def test_an_upstream_connection_idle_past_the_limit_is_not_reused(monkeypatch):
    """Servers close an idle connection after 5 s; one they may be closing is never sent a request."""
    monkeypatch.setattr("soak.agent.proxy.UPSTREAM_IDLE_SECONDS", 0.2)
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        for _ in range(2):
            assert (await rig.post({**STREAM, "stream": False})).status_code == 200
        await asyncio.sleep(0.3)  # idle past the limit
        assert (await rig.post({**STREAM, "stream": False})).status_code == 200
        first, again, after_idle = upstream.peers
        assert again == first and after_idle != first

    run(upstream, test)


def test_the_agents_connections_have_nagle_off():
    """Without TCP_NODELAY each reply's body waits ~40 ms in the kernel for the agent's delayed ACK."""
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        assert (await rig.post(STREAM)).status_code == 200  # the client keeps its connection alive
        assert rig.proxy.runner is not None and rig.proxy.runner.server is not None
        [connection] = rig.proxy.runner.server.connections
        assert connection.transport is not None
        agent_socket = connection.transport.get_extra_info("socket")
        assert agent_socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1

    run(upstream, test)


def test_an_attempt_token_never_looks_like_an_option():
    """The token is the agent's API key on its command line (aider's --openai-api-key): a leading "-" made argparse
    take it for an option and the agent exit 2 without a call."""
    proxy = RecordingProxy("sim", Endpoint(base_url="http://127.0.0.1:9/v1", model="sim"), None, Budgets())
    ledger = Ledger(max_calls=1, max_completion_tokens=1, on_call=lambda row: None)
    tokens = [proxy.open(ProxiedAttempt(ledger, "r", AttemptId("t", 1)))[1] for _ in range(300)]
    assert len(set(tokens)) == 300 and not [token for token in tokens if token.startswith("-")]


def test_a_body_declared_over_the_cap_is_refused_with_413_before_a_byte_of_it_is_read():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", rig.proxy.port)
        path = rig.base_url.split(str(rig.proxy.port), 1)[1]
        writer.write(f"POST {path}/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {1 << 30}\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")  # answered while the body is still to come
        writer.close()
        assert head.startswith(b"HTTP/1.1 413 ")
        [row] = rig.rows
        assert (row.status, row.http_status, row.role) == ("bad_request", 413, "agent")
        assert "max_request_bytes" in row.error and rig.ledger.calls == 1 and not upstream.received

    run(upstream, test)


def test_a_body_without_a_length_is_read_up_to_the_cap_then_refused_and_charged():
    upstream = Upstream()
    read: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        for sent in range(64):
            read.append(sent)
            yield b" " * 1024

    async def test(rig: Rig) -> None:
        reply = await rig.client.post(f"{rig.base_url}/chat/completions", content=body(),
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 413 and reply.json()["error"]["code"] == "request_too_large"
        assert len(read) == 64  # the agent sent it all and still got its answer
        [row] = rig.rows
        assert (row.status, row.http_status) == ("bad_request", 413) and not upstream.received

    run(upstream, test, max_request_bytes=4096)


def test_a_request_that_python_reads_is_forwarded_even_with_a_lone_surrogate_escape():
    """The proxy's fast parser refuses a lone surrogate; Python's json (and so a Python server) reads it."""
    upstream = Upstream()
    sent = json.dumps({**STREAM, "stream": False, "messages": [{"role": "user", "content": "\ud800"}]}).encode()
    assert b"\\ud800" in sent

    async def test(rig: Rig) -> None:
        reply = await rig.client.post(f"{rig.base_url}/chat/completions", content=sent,
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 200 and upstream.received[0][2] == sent
        assert [row.status for row in rig.rows] == ["ok"]

    run(upstream, test)


def shaped(**fields: object) -> bytes:
    """STREAM with `fields` changed: a request malformed in one place only."""
    return json.dumps({**STREAM, **fields}).encode()


TOOL = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
MALFORMED = {  # the body, and the place its 400 names
    "not JSON": (b"{not json", "not a JSON object"),
    "not an object": (b"[1, 2]", "not a JSON object"),
    "no messages": (json.dumps({"model": "sim"}).encode(), "messages: Field required"),
    "empty messages": (shaped(messages=[]), "messages: List should have at least 1 item"),
    "a message not an object": (shaped(messages=["hi"]), "messages[0]:"),
    "a message without a role": (shaped(messages=[{"content": "hi"}]), "messages[0]:"),
    "a message of no known role": (shaped(messages=[{"role": "wizard", "content": "hi"}]), "'wizard'"),
    "a role of a megabyte, not repeated in full": (shaped(messages=[{"role": "w" * (1 << 20), "content": "hi"}]),
                                                   "messages[0]: Input tag 'www"),
    "a content part of no known type": (
        shaped(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "txt", "text": "x"}]}]),
        "messages[0].content[1]: Input tag 'txt'"),
    "a text part without its text": (shaped(messages=[{"role": "user", "content": [{"type": "text"}]}]),
                                     "messages[0].content[0].text: Field required"),
    "a tool result without its call's id": (shaped(messages=[{"role": "tool", "content": "ok"}]),
                                            "messages[0].tool_call_id: Field required"),
    "a tool call without arguments": (
        shaped(messages=[{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "bash"}}]}]),
        "messages[0].tool_calls[0].function.arguments: Field required"),
    "tools not a list": (shaped(tools={"name": "x"}), "tools: Input should be a valid list"),
    "a tool whose function is not an object": (shaped(tools=[{"type": "function", "function": "bash"}]),
                                               "tools[0].function: Input should be a valid dictionary"),
    "a tool of no known type": (shaped(tools=[{**TOOL, "type": "fn"}]), "tools[0]: Input tag 'fn'"),
    "a tool choice of no known kind": (shaped(tools=[TOOL], tool_choice="always"), "tool_choice:"),
    "a named tool choice without a name": (shaped(tools=[TOOL], tool_choice={"type": "function", "function": {}}),
                                           "tool_choice.function.name: Field required"),
    "max_tokens not a count": (shaped(max_tokens="lots"), "max_tokens: Input should be a valid integer"),
    "max_tokens of 0": (shaped(max_tokens=0), "max_tokens: Input should be greater than or equal to 1"),
    "n of 0": (shaped(n=0), "n: Input should be greater than or equal to 1"),
    "a negative temperature": (shaped(temperature=-0.5), "temperature: Input should be greater than or equal to 0"),
    "top_p above 1": (shaped(top_p=1.5), "top_p: Input should be less than or equal to 1"),
    "top_p not a number": (shaped(top_p="high"), "top_p: Input should be a valid number"),
    "stream not a boolean": (shaped(stream="yes"), "stream: Input should be a valid boolean"),
    "model not a string": (shaped(model=["sim"]), "model: Input should be a valid string"),
    "nested past the parsers' depth": (b'{"messages": ' + b"[" * 100_000, "not a JSON object"),
}


@pytest.mark.parametrize(("body", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_request_is_answered_400_by_the_proxy_with_its_place_recorded_and_never_forwarded(body, reason):
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        reply = await rig.client.post(f"{rig.base_url}/chat/completions", content=body,
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "bad_request"
        assert reply.json()["error"]["type"] == "invalid_request_error" and reason in reply.json()["error"]["message"]
        [row] = rig.rows
        assert (row.status, row.http_status, row.role) == ("bad_request", 400, "agent")
        assert row.error == reply.json()["error"]["message"]  # whole: no longer than a row keeps
        assert rig.ledger.totals.infra_failures == 0 and not upstream.received

    run(upstream, test)


RECORDED = sorted((FIXTURES / "agent-requests").glob("*.json"))
"""The last request of a one-task night of each real agent (hermes, mini-swe-agent, aider) against the sim, as it
reached the server: its tool calls and their results, its own message fields (mini-swe-agent's
`provider_specific_fields`), and Hermes' 18 kB of system prompt and tools."""


@pytest.mark.parametrize("recorded", RECORDED, ids=[path.stem for path in RECORDED])
def test_a_request_a_real_agent_sent_is_forwarded_unchanged(recorded):
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        sent = recorded.read_bytes()
        reply = await rig.client.post(f"{rig.base_url}/chat/completions", content=sent,
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 200  # with the endpoint's model, "sim", for the "soak-sim" of its night
        assert json.loads(upstream.received[0][2]) == {**json.loads(sent), "model": "sim"}
        assert [row.status for row in rig.rows] == ["ok"]

    assert len(RECORDED) == 3
    run(upstream, test)


CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
SHAPES = {
    "replies echoed back with their null fields": {  # vLLM's reply message as an agent appends it to its history
        "model": "sim", "tools": [TOOL],
        "messages": [{"role": "user", "content": "Fix solution.py"},
                     {"role": "assistant", "content": "Let me look.", "reasoning": None, "tool_calls": None,
                      "function_call": None, "refusal": None, "audio": None},
                     {"role": "user", "content": "Use the tool."},
                     {"role": "assistant", "content": None, "reasoning": None, "tool_calls": [CALL]},
                     {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "ok"}]}],
    },
    "a server's own extras": {  # vLLM's and llama.cpp's keys beside OpenAI's, and OpenAI's own knobs
        **STREAM, "chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "min_p": 0.05,
        "repetition_penalty": 1.05, "cache_prompt": True, "reasoning_format": "none", "max_completion_tokens": 512,
        "n": 1, "top_p": 0.8, "temperature": 0.7, "presence_penalty": -1.5, "seed": 7, "stop": ["\n```"],
        "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "bash"}},
        "parallel_tool_calls": False,
    },
}


@pytest.mark.parametrize("request_body", SHAPES.values(), ids=SHAPES.keys())
def test_a_well_formed_request_of_other_shapes_is_forwarded_unchanged(request_body):
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        sent = json.dumps(request_body).encode()
        reply = await rig.client.post(f"{rig.base_url}/chat/completions", content=sent,
                                      headers={"Authorization": f"Bearer {rig.token}"})
        assert reply.status_code == 200 and upstream.received[0][2] == sent
        assert [row.status for row in rig.rows] == ["ok"]

    run(upstream, test)


def test_a_server_failing_a_well_formed_request_is_the_servers_failure():
    """The check refuses only what the agent got wrong: a 500 to a request it passed stays an infrastructure failure."""
    upstream = Upstream(error=(500, b'{"error":{"message":"Internal Server Error"}}'))

    async def test(rig: Rig) -> None:
        reply = await rig.post(json.loads(RECORDED[0].read_bytes()))
        assert reply.status_code == 500 and len(upstream.received) == 1
        [row] = rig.rows
        assert (row.status, row.http_status) == ("http_5xx", 500) and rig.ledger.totals.infra_failures == 1

    run(upstream, test)


def test_malformed_requests_count_against_the_call_cap():
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        for _ in range(2):
            assert (await rig.client.post(f"{rig.base_url}/chat/completions", content=b"[]",
                                          headers={"Authorization": f"Bearer {rig.token}"})).status_code == 400
        refused = await rig.post(STREAM)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "call_cap"
        assert len(rig.rows) == 2 and not upstream.received

    run(upstream, test, max_calls=2)


@pytest.mark.parametrize("asked", ["gpt-4o", None])
def test_the_configured_model_serves_whatever_the_agent_asks_for(asked):
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        request = {**STREAM, "stream": False, "model": asked}
        if asked is None:
            del request["model"]
        reply = await rig.post(request)
        assert reply.status_code == 200 and reply.content == WHOLE
        sent = json.loads(upstream.received[0][2])
        assert sent == {**request, "model": "sim"}
        [row] = rig.rows
        assert (row.status, row.model, row.requested_model) == ("ok", "sim", asked or "")

    run(upstream, test)


def harness(conn: Connection) -> None:
    """The harness's side of the 1 GiB test, a process of its own: an upstream and a proxy with one open attempt.
    Sends the attempt's (base URL, token), then on each "measure" its RSS, its peak RSS since the last measure and its
    rows, until "stop". The peak is the kernel's VmHWM, reset after each measure (`clear_refs`): a peak counted from
    the process's start would include whatever its imports held for a moment."""

    async def go() -> None:
        upstream = Upstream()
        async with serving(upstream) as url:
            proxy = RecordingProxy("sim", Endpoint(base_url=url, model="sim"), KEY, Budgets())
            await proxy.start()
            rows: list[CallRow] = []
            ledger = Ledger(max_calls=50, max_completion_tokens=10**6, on_call=rows.append)
            conn.send(proxy.open(ProxiedAttempt(ledger, "r", AttemptId("t", 1))))
            loop = asyncio.get_running_loop()
            while await loop.run_in_executor(None, conn.recv) == "measure":
                rss = psutil.Process().memory_info().rss
                status = Path("/proc/self/status").read_text()
                peak = int(status.split("VmHWM:")[1].split()[0]) << 10
                Path("/proc/self/clear_refs").write_text("5")
                conn.send((rss, peak, rows))
            await proxy.stop()

    asyncio.run(go())


@pytest.mark.slow  # a measure of memory, run one test at a time: beside three other workers on 2 cores it read high
def test_a_1_gib_body_leaves_the_harness_rss_within_100_mib_of_a_normal_call_and_leaves_a_row():
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=harness, args=(theirs,))
    process.start()
    try:
        base_url, token = ours.recv()

        sent = []

        def gib() -> Iterator[bytes]:
            block = b" " * (1 << 20)
            for _ in range(1024):
                sent.append(len(block))
                yield block

        with httpx2.Client(timeout=60, headers={"Authorization": f"Bearer {token}"}) as client:
            normal = client.post(f"{base_url}/chat/completions", json={**STREAM, "stream": False})
            ours.send("measure")
            rss, before, _ = ours.recv()
            refused = client.post(f"{base_url}/chat/completions", content=gib())
        ours.send("measure")
        _, peak, rows = ours.recv()
        ours.send("stop")
    finally:
        process.join(30)
        process.kill()
    assert normal.status_code == 200 and refused.status_code == 413 and sum(sent) == 1 << 30
    assert peak - rss < 100 << 20, (f"peak RSS {peak >> 20} MiB during the body after {rss >> 20} MiB with a normal "
                                    f"call (peak before it {before >> 20} MiB)")
    assert [(row.status, row.http_status) for row in rows] == [("ok", 200), ("bad_request", 413)]


def test_a_row_keeps_the_sampling_settings_the_agent_sent():
    """An agent's temperature, top_p and seed as it sent them (one that is not a number is refused: MALFORMED)."""
    upstream = Upstream()

    async def test(rig: Rig) -> None:
        reply = await rig.post({**STREAM, "stream": False, "temperature": 0.3, "top_p": 0.9, "seed": 42})
        assert reply.status_code == 200
        [row] = rig.rows
        assert (row.temperature, row.top_p, row.seed) == (0.3, 0.9, 42)

    run(upstream, test)
