"""The recording proxy: an OpenAI-compatible endpoint on loopback through which external agents reach the model.

Each attempt gets its own base URL, `http://127.0.0.1:P/a/<token>/v1`, and the token as its API key; the proxy adds
the real key. Requests go upstream unchanged and replies come back byte for byte, while a copy of every stream is
parsed into the same `Reply` soak's own calls use, so each call becomes a calls.csv row with the same timing truth,
its tool calls judged against the tools the agent itself declared. The per-task budgets hold here: past the call or
token cap an attempt's requests get an OpenAI-style error and the attempt is marked ended, and a stream with no byte
for `stale_seconds` is cut and recorded `stalled`.
"""

import asyncio
import contextlib
import json
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from soak.config import Budgets, Endpoint
from soak.llm.client import scrub, status_of_http
from soak.llm.reply import Reply, counted_tokens, dict_or_fail
from soak.record.schema import CallRow, CallStatus, Outcome

INFRA_STATUSES = frozenset({"connection", "http_5xx", "stalled", "truncated"})


@dataclass
class CallTotals:
    """What an attempt's TaskRow sums over its calls, kept as totals so a long attempt costs no memory per call."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    mangled_tool_calls: int = 0
    reasoning_exhausted: int = 0
    infra_failures: int = 0
    """Calls that ended in a connection error, 5xx, stall or cut stream."""
    last_error: str = ""

    def add(self, row: CallRow) -> None:
        self.calls += 1
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            setattr(self, name, getattr(self, name) + (getattr(row, name) or 0))
        self.mangled_tool_calls += row.integrity not in ("ok", "none")
        self.reasoning_exhausted += row.reasoning_exhausted
        self.infra_failures += row.status in INFRA_STATUSES
        self.last_error = row.error or self.last_error


@dataclass
class AttemptBudget:
    """One attempt's view through the proxy: its record context, its budgets and what it has used."""

    run_id: str
    task_id: str
    cycle: int
    max_calls: int
    max_completion_tokens: int
    on_call: Callable[[CallRow], None]
    calls: int = 0
    completion_tokens: int = 0
    estimated_tokens: int = 0
    """The part of `completion_tokens` estimated from text (calls whose server reported no usage)."""
    totals: CallTotals = field(default_factory=CallTotals)
    ended: Outcome | None = None
    """call_cap or token_cap once a budget is spent; the attempt runner stops the agent."""
    stop: threading.Event = field(default_factory=threading.Event)

    def end(self, outcome: Outcome) -> None:
        self.ended = self.ended or outcome
        self.stop.set()

    def refusal(self) -> str | None:
        """Why the next call may not go upstream, if a budget is spent."""
        if self.calls >= self.max_calls:
            self.end("call_cap")
            return f"soak: this attempt reached its call cap ({self.max_calls} calls)"
        if self.completion_tokens >= self.max_completion_tokens:
            self.end("token_cap")
            return f"soak: this attempt reached its token cap ({self.max_completion_tokens} completion tokens)"
        return None


def openai_error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}}, status)


class RecordingProxy:
    """Serves `/a/<token>/v1/...` for the attempts it knows, forwarding to one upstream endpoint."""

    def __init__(self, name: str, endpoint: Endpoint, key: str | None, budgets: Budgets) -> None:
        self.name, self.endpoint, self.key, self.budgets = name, endpoint, key, budgets
        self.upstream = endpoint.base_url.rstrip("/")
        self.attempts: dict[str, AttemptBudget] = {}
        self.client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(None, connect=endpoint.connect_timeout_seconds),
            # As many upstream connections as agents may hold open; httpx's default keeps only 20 alive.
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=256),
        )
        self.app = Starlette(routes=[
            Route("/a/{token}/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/a/{token}/v1/models", self.models, methods=["GET"]),
            Route("/a/{token}/{rest:path}", self.unknown, methods=["GET", "POST"]),
        ])
        self.server: uvicorn.Server | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free loopback port and on a unix socket (in this event loop) until `stop`; a jail without
        a network reaches the socket through `soak.agent.bridge`."""
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on such sockets, and without it every reply's body
        # waits ~40 ms in the kernel for the client's delayed ACK of the headers (Nagle).
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
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.serving = asyncio.create_task(self.server.serve(sockets=[tcp, unix]))
        while not self.server.started:
            if self.serving.done():
                await self.serving
                raise RuntimeError("the recording proxy did not start")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            await self.serving
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        await self.client.aclose()

    def open(self, budget: AttemptBudget) -> tuple[str, str]:
        """Register an attempt: (its base URL, its token, which is also the API key the agent is given)."""
        token = secrets.token_urlsafe(18)
        self.attempts[token] = budget
        return f"http://127.0.0.1:{self.port}/a/{token}/v1", token

    def close(self, token: str) -> None:
        self.attempts.pop(token, None)

    # --- routes ------------------------------------------------------------------------------------------------

    def _attempt(self, request: Request) -> AttemptBudget | None:
        return self.attempts.get(request.path_params["token"])

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        return headers

    async def unknown(self, request: Request) -> Response:
        return openai_error(404, f"soak proxy: no route /{request.path_params['rest']}", "not_found")

    async def models(self, request: Request) -> Response:
        if self._attempt(request) is None:
            return openai_error(401, "soak proxy: unknown attempt token", "invalid_api_key")
        try:
            upstream = await self.client.get(f"{self.upstream}/models", headers=self._headers())
        except httpx2.HTTPError as error:
            return openai_error(502, f"soak proxy: upstream unreachable: {error!r}", "upstream_unreachable")
        return Response(upstream.content, upstream.status_code, media_type="application/json")

    async def chat(self, request: Request) -> Response:
        attempt = self._attempt(request)
        if attempt is None:
            return openai_error(401, "soak proxy: unknown attempt token", "invalid_api_key")
        if (refused := attempt.refusal()) is not None:
            return openai_error(400, refused, attempt.ended or "budget")
        body = await request.body()
        try:
            payload = dict_or_fail(json.loads(body))
        except ValueError:
            return openai_error(400, "soak proxy: the request body is not a JSON object", "bad_request")
        attempt.calls += 1
        call = ProxiedCall(self, attempt, payload, attempt.calls - 1)
        got = Reply()
        try:
            upstream = await self.client.send(
                self.client.build_request("POST", f"{self.upstream}/chat/completions", content=body,
                                          headers=self._headers()),
                stream=True,
            )
        except httpx2.HTTPError as error:
            call.record(got, "connection", None, repr(error))
            return openai_error(502, f"soak proxy: upstream unreachable: {error!r}", "upstream_unreachable")
        if upstream.status_code >= 400:
            text = (await upstream.aread()).decode(errors="replace")
            await upstream.aclose()
            call.record(got, status_of_http(upstream.status_code, text), upstream.status_code, text)
            return Response(text, upstream.status_code, media_type="application/json")
        media = upstream.headers.get("content-type", "application/json")
        if "text/event-stream" in media:
            return StreamingResponse(call.relay(upstream, got), upstream.status_code, media_type=media)
        return await call.whole(upstream, got, media)


class ProxiedCall:
    """One agent call on its way through: the bytes pass, a copy is parsed, the row is written at the end."""

    def __init__(self, proxy: RecordingProxy, attempt: AttemptBudget, payload: dict[str, Any], index: int) -> None:
        self.proxy, self.attempt, self.payload, self.index = proxy, attempt, payload, index
        self.stale_seconds = proxy.budgets.stale_seconds

    async def relay(self, upstream: httpx2.Response, got: Reply) -> AsyncIterator[bytes]:
        status: CallStatus = "ok"
        error, pending = "", b""
        chunks = upstream.aiter_raw()
        try:
            while True:
                try:
                    async with asyncio.timeout(self.stale_seconds):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                now = time.perf_counter()
                if got.first_byte is None:
                    got.first_byte = now
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._parse(line, got, now)
                yield chunk
            if got.finish is None and status == "ok":
                status, error = "truncated", "stream ended without finish_reason"
        except TimeoutError:
            status, error = "stalled", f"no byte for {self.stale_seconds:g} s"
            raise
        except asyncio.CancelledError:
            # An agent may hang up once it has the finish chunk; only a reply it did not wait for is cancelled.
            if got.finish is None:
                status, error = "cancelled", "the agent closed the connection"
            raise
        except httpx2.HTTPError as failure:
            status, error = "truncated", f"stream cut: {failure!r}"
            raise
        finally:
            await upstream.aclose()
            self.record(got, status, upstream.status_code, error)

    def _parse(self, line: bytes, got: Reply, now: float) -> None:
        text = line.decode(errors="replace").strip()
        if not text.startswith("data:") or (data := text[5:].strip()) == "[DONE]":
            return
        # The agent gets the bytes as they were; the row shows what could be read.
        with contextlib.suppress(ValueError):
            got.event(dict_or_fail(json.loads(data)), now)

    async def whole(self, upstream: httpx2.Response, got: Reply, media: str) -> Response:
        status: CallStatus = "ok"
        error = ""
        try:
            async with asyncio.timeout(self.stale_seconds):
                body = await upstream.aread()
        except TimeoutError:
            await upstream.aclose()
            self.record(got, "stalled", None, f"no byte for {self.stale_seconds:g} s")
            return openai_error(504, f"soak proxy: no reply within {self.stale_seconds:g} s", "stalled")
        try:
            got.completion(dict_or_fail(json.loads(body)))
        except ValueError as failure:
            status, error = "bad_response", f"unreadable reply: {failure}"
        self.record(got, status, upstream.status_code, error)
        return Response(body, upstream.status_code, media_type=media)

    def record(self, got: Reply, status: CallStatus, http_status: int | None, error: str) -> None:
        attempt, payload = self.attempt, self.payload
        tools = payload.get("tools") if isinstance(payload.get("tools"), list) else None
        max_tokens = payload.get("max_tokens") or payload.get("max_completion_tokens")
        row = got.row(
            run_id=attempt.run_id, task_id=attempt.task_id, cycle=attempt.cycle, call_index=self.index, attempt=1,
            role="agent", endpoint=self.proxy.name, model=str(payload.get("model") or self.proxy.endpoint.model),
            stream=bool(payload.get("stream")), tools=tools,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None, status=status, http_status=http_status,
            error=scrub(error, self.proxy.key),
        )
        used, estimated = counted_tokens(row)
        attempt.completion_tokens += used
        attempt.estimated_tokens += estimated
        attempt.totals.add(row)
        attempt.on_call(row)
        if attempt.completion_tokens >= attempt.max_completion_tokens:
            attempt.end("token_cap")
