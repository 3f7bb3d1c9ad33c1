"""The recording proxy: an OpenAI-compatible endpoint on loopback through which external agents reach the model.

Each attempt gets its own base URL, `http://127.0.0.1:P/a/<token>/v1`, and the token as its API key; the proxy adds
the real key. Requests go upstream unchanged but for the model, and replies come back byte for byte, while a copy of
every stream is parsed into the same `Reply` soak's own calls use, so each call becomes a calls.csv row with the same
timing truth, its tool calls judged against the tools the agent itself declared. The per-task budgets hold here: past
the call or token cap an attempt's requests get an OpenAI-style error and the attempt is marked ended, and a reply
with no byte for `stale_seconds` (before its head or within its stream) is cut and recorded `stalled`.

What the agent gets wrong is answered here, as its own call, and never forwarded: a body over `[agent]
max_request_bytes` (413, refused before more than that is read) and a request that does not fit the OpenAI chat
schema (400 with the place and the reason, `soak.agent.request_check`), each a `bad_request` row charged to the
attempt, so `infra_error` keeps meaning that the server failed a well-formed request.
The model is the endpoint's: a request naming another is sent with the configured name, and its row keeps the name
asked for (`requested_model`).
"""

import asyncio
import contextlib
import json
import secrets
import shutil
import socket
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from pydantic_core import from_json

from soak.agent.attempt import AttemptEnded, Ledger
from soak.agent.request_check import request_problem
from soak.config import MAX_REQUEST_BYTES, Budgets, Endpoint
from soak.llm.client import scrub, status_of_http
from soak.llm.reply import CallPlace, Reply, Sent, dict_or_fail
from soak.record.identity import AttemptId
from soak.record.schema import CallStatus

UPSTREAM_IDLE_SECONDS = 3.0
"""How long an idle upstream connection is kept for the next request: less than the 5 s after which uvicorn (vLLM's and
SGLang's server) and cpp-httplib (llama.cpp's) close one. aiohttp's 15 s sent requests on connections the server was
closing, and the agent got a 502 recorded as the server's failure (`connection`: "Server disconnected")."""


@dataclass
class ProxiedAttempt:
    """One attempt as the proxy sees it: the ledger its calls are charged to, and where its rows belong."""

    ledger: Ledger
    run_id: str
    attempt: AttemptId


def openai_error(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                             status=status)


def env_proxy(url: str) -> str | None:
    """The HTTP proxy the environment names for `url` (`HTTPS_PROXY` etc. less `NO_PROXY`), looked up once:
    aiohttp's `trust_env` would look it up, and read ~/.netrc in a thread, on every request."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):  # NO_PROXY, where the environment names proxies
        return None
    return urllib.request.getproxies_environment().get(parts.scheme)


def loaded(data: bytes) -> Any:
    """`data` decoded, or None if it is not JSON (nested past the parser's depth included). pydantic-core's parser
    first (a third of `json.loads`' time on a long conversation, half on a stream's events, whose keys it caches); what
    it refuses (a lone surrogate escape...) is read by `json`, as the Python servers read it."""
    try:
        return from_json(data, cache_strings="keys")
    except ValueError:
        pass
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


class RecordingProxy:
    """Serves `/a/<token>/v1/...` for the attempts it knows, forwarding to one upstream endpoint.

    aiohttp on both sides: its server and its client parse HTTP in C (llhttp), which keeps the proxy's CPU per
    call well under the client's and the server's own (BENCHMARKS.md, "Recording proxy: overhead")."""

    def __init__(self, name: str, endpoint: Endpoint, key: str | None, budgets: Budgets,
                 max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.name, self.endpoint, self.key, self.budgets = name, endpoint, key, budgets
        self.max_request_bytes = max_request_bytes
        self.upstream = endpoint.base_url.rstrip("/")
        self.via = env_proxy(self.upstream)
        self.attempts: dict[str, ProxiedAttempt] = {}
        # Identity: the copy must be parseable, and the agent is told the upstream's content type only.
        self.headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        # Chat bodies are read by `capped_body`, which refuses a declared length over max_request_bytes before it
        # reads a byte (aiohttp's client_max_size, for request.read(), would read up to the cap first).
        self.app = web.Application()
        self.app.router.add_post("/a/{token}/v1/chat/completions", self.chat)
        self.app.router.add_get("/a/{token}/v1/models", self.models)
        for method in ("GET", "POST"):
            self.app.router.add_route(method, "/a/{token}/{rest:.*}", self.unknown)
        self.runner: web.AppRunner | None = None
        self.session: aiohttp.ClientSession | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free loopback port and on a unix socket (in this event loop) until `stop`; a jail without
        a network reaches the socket through `soak.agent.bridge`."""
        # TCP_NODELAY on every agent connection (asyncio sets it on IPPROTO_TCP sockets, aiohttp on each one):
        # without it every reply's body waits ~40 ms in the kernel for the client's delayed ACK of the headers.
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        self.socket_dir = Path(tempfile.mkdtemp(prefix="soak-proxy-"))
        self.socket_path = self.socket_dir / "proxy.sock"
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(self.socket_path))
        # Anyone may connect; without a token of a live attempt a request gets nothing but an error.
        self.socket_dir.chmod(0o755)
        self.socket_path.chmod(0o666)
        self.session = aiohttp.ClientSession(
            # As many upstream connections as agents may hold open; reused while idle for less than the servers keep
            # them (UPSTREAM_IDLE_SECONDS).
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=UPSTREAM_IDLE_SECONDS),
            # The stale budget as aiohttp's read timeout: no byte for stale_seconds, the wait for the reply's head
            # included, raises ServerTimeoutError (a TimeoutError); timed in its protocol, per read of the socket,
            # at a fraction of the cost of an asyncio.timeout around each read of the stream.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.endpoint.connect_timeout_seconds,
                                          sock_read=self.budgets.stale_seconds),
        )
        # An agent that hangs up cancels its handler; a call still in flight when the night closes the proxy gets
        # 5 s to end, not aiohttp's 60.
        self.runner = web.AppRunner(self.app, handle_signals=False, access_log=None, handler_cancellation=True,
                                    shutdown_timeout=5)
        await self.runner.setup()
        for sock in (tcp, unix):
            await web.SockSite(self.runner, sock).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self.session is not None:
            await self.session.close()

    def open(self, budget: ProxiedAttempt) -> tuple[str, str]:
        """Register an attempt: (its base URL, its token, which is also the API key the agent is given)."""
        token = secrets.token_hex(18)  # never a leading "-", which an agent's argument parser takes for an option
        self.attempts[token] = budget
        return f"http://127.0.0.1:{self.port}/a/{token}/v1", token

    def close(self, token: str) -> None:
        self.attempts.pop(token, None)

    # --- routes ------------------------------------------------------------------------------------------------

    def _attempt(self, request: web.Request) -> ProxiedAttempt | None:
        return self.attempts.get(request.match_info["token"])

    async def unknown(self, request: web.Request) -> web.Response:
        return openai_error(404, f"soak proxy: no route /{request.match_info['rest']}", "not_found")

    async def models(self, request: web.Request) -> web.Response:
        if self._attempt(request) is None:
            return openai_error(401, "soak proxy: unknown attempt token", "invalid_api_key")
        assert self.session is not None
        try:
            async with self.session.get(f"{self.upstream}/models", headers=self.headers, proxy=self.via) as upstream:
                body = await upstream.read()
        except aiohttp.ClientError as error:
            return openai_error(502, f"soak proxy: upstream unreachable: {error!r}", "upstream_unreachable")
        return web.Response(body=body, status=upstream.status, content_type="application/json")

    async def capped_body(self, request: web.Request) -> bytes | None:
        """The request's body, or None when it is over `max_request_bytes`: a declared length is checked before a
        byte is read, a body without one is read no further than the cap. aiohttp reads and drops what is left
        (its lingering close, at most 10 s) so the agent still gets its answer; memory stays bounded by the cap."""
        cap = self.max_request_bytes
        if request.content_length is not None and request.content_length > cap:
            return None
        chunks, size = [], 0
        while chunk := await request.content.readany():
            size += len(chunk)
            if size > cap:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        attempt = self._attempt(request)
        if attempt is None:
            return openai_error(401, "soak proxy: unknown attempt token", "invalid_api_key")
        body = await self.capped_body(request)
        try:
            attempt.ledger.start_call()
        except AttemptEnded as ended:
            return openai_error(400, f"soak: this attempt ended: {ended.detail}", ended.outcome)
        call = ProxiedCall(self, attempt, attempt.ledger.calls - 1)
        if body is None:
            return call.refused(413, f"soak proxy: the request body is over {self.max_request_bytes} bytes "
                                "([agent] max_request_bytes)", "request_too_large")
        payload = loaded(body)
        if problem := request_problem(payload):
            return call.refused(400, f"soak proxy: {problem}", "bad_request")
        call.payload = payload
        model = self.endpoint.model
        if payload.get("model") != model:
            call.requested_model = payload.get("model") or ""
            payload["model"] = model
            body = json.dumps(payload).encode()
        got = Reply()
        assert self.session is not None
        try:
            upstream = await self.session.post(f"{self.upstream}/chat/completions", data=body, headers=self.headers,
                                               proxy=self.via)
        except TimeoutError:
            return call.stalled(got)
        except aiohttp.ClientError as error:
            call.record(got, "connection", None, repr(error))
            return openai_error(502, f"soak proxy: upstream unreachable: {error!r}", "upstream_unreachable")
        except asyncio.CancelledError:
            call.record(got, "cancelled", None, "the agent closed the connection before the server answered")
            raise
        if upstream.status >= 400:
            with contextlib.closing(upstream):
                reply = await upstream.read()
            text = reply.decode(errors="replace")
            call.record(got, status_of_http(upstream.status, text), upstream.status, text)
            return web.Response(body=reply, status=upstream.status, content_type="application/json")
        media = upstream.headers.get("Content-Type", "application/json")
        if "text/event-stream" in media:
            return await call.relay(request, upstream, got, media)
        return await call.whole(upstream, got, media)


class ProxiedCall:
    """One agent call on its way through: the bytes pass, a copy is parsed, the row is written at the end."""

    def __init__(self, proxy: RecordingProxy, attempt: ProxiedAttempt, index: int) -> None:
        self.proxy, self.attempt, self.index = proxy, attempt, index
        self.stale_seconds = proxy.budgets.stale_seconds
        self.payload: dict[str, Any] = {}
        """The request, once it is known to be well formed (empty for one refused)."""
        self.requested_model = ""
        """The model the agent asked for when it was not the endpoint's."""

    def refused(self, http_status: int, message: str, code: str) -> web.Response:
        """Answer the agent's own error without asking the server; it is recorded and counts as one of its calls."""
        self.record(Reply(), "bad_request", http_status, message)
        return openai_error(http_status, message, code)

    async def relay(self, request: web.Request, upstream: aiohttp.ClientResponse, got: Reply,
                    media: str) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers={"Content-Type": media})
        status: CallStatus = "ok"
        error, pending, cut = "", b"", False
        read, ended = upstream.content.readany, upstream.content.at_eof
        try:
            await response.prepare(request)
            while True:
                chunk = await read()
                if not chunk:
                    break
                now = time.perf_counter()
                got.received(now)
                if b"\n" in chunk:
                    *lines, pending = (pending + chunk).split(b"\n")
                    self._parse(lines, got, now)
                else:
                    pending += chunk
                if ended():  # the upstream's reply is complete: its last bytes and the end of the agent's in one write
                    await response.write_eof(chunk)
                    break
                await response.write(chunk)
            if got.finish is None:
                status, error = "truncated", "stream ended without finish_reason"
        except TimeoutError:
            status, error, cut = "stalled", f"no byte for {self.stale_seconds:g} s", True
        except aiohttp.ClientError as failure:
            status, error, cut = "truncated", f"stream cut: {failure!r}", True
        except (asyncio.CancelledError, ConnectionResetError):
            # An agent may hang up once it has the finish chunk; only a reply it did not wait for is cancelled.
            if got.finish is None:
                status, error = "cancelled", "the agent closed the connection"
            raise
        finally:
            upstream.close()
            self.record(got, status, upstream.status, error)
        if cut and request.transport is not None:
            # Cut the agent's stream too (no closing chunk), so a part of a reply never reads as all of it.
            request.transport.close()
        return response

    def _parse(self, lines: list[bytes], got: Reply, now: float) -> None:
        """The events of the lines completed by one read, decoded as one JSON array (half the CPU of decoding them
        line by line); a batch with a bad line is decoded line by line."""
        payloads = []
        for line in lines:
            line = line.strip()
            if line.startswith(b"data:") and (data := line[5:].strip()) and data != b"[DONE]":
                payloads.append(data)
        if not payloads:
            return
        events = loaded(b"[" + b",".join(payloads) + b"]")
        if events is None:
            events = [loaded(data) for data in payloads]
        # The agent gets the bytes as they were; the row shows what could be read.
        for event in events:
            with contextlib.suppress(ValueError):
                got.event(dict_or_fail(event), now)

    async def whole(self, upstream: aiohttp.ClientResponse, got: Reply, media: str) -> web.Response:
        status: CallStatus = "ok"
        error = ""
        try:
            body = await upstream.read()
        except TimeoutError:
            upstream.close()
            return self.stalled(got)
        try:
            got.completion(dict_or_fail(json.loads(body)))
        except ValueError as failure:
            status, error = "bad_response", f"unreadable reply: {failure}"
        self.record(got, status, upstream.status, error)
        return web.Response(body=body, status=upstream.status, headers={"Content-Type": media})

    def stalled(self, got: Reply) -> web.Response:
        """A reply, or its head, with no byte for `stale_seconds`: recorded `stalled`, answered 504."""
        self.record(got, "stalled", None, f"no byte for {self.stale_seconds:g} s")
        return openai_error(504, f"soak proxy: no reply within {self.stale_seconds:g} s", "stalled")

    def record(self, got: Reply, status: CallStatus, http_status: int | None, error: str) -> None:
        """The call's row, charged to the attempt's ledger. `model` is the endpoint's: the only model the proxy
        serves."""
        attempt, payload = self.attempt, self.payload  # checked by request_problem, or empty for a refused call
        sent = Sent(self.proxy.name, self.proxy.endpoint.model, bool(payload.get("stream")), payload.get("tools"),
                    payload.get("max_tokens") or payload.get("max_completion_tokens"), payload)
        row = got.row(CallPlace(attempt.run_id, attempt.attempt, "agent", self.index), sent, status, http_status,
                      scrub(error, self.proxy.key))
        row.requested_model = self.requested_model
        if status == "ok":
            attempt.ledger.said("".join(got.content), got.tool_calls())
        attempt.ledger.record(row)
