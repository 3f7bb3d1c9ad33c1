"""`soak sim`: a fault-injecting OpenAI-compatible server (vLLM, llama-server or llama-cpp-python flavour).

Its scripted model writes each task's reference (or a broken variant, per scenario) through whatever the request
offers: soak's own delegate / write_file tools, or an external agent's (Hermes' write_file or terminal,
mini-swe-agent's bash, aider's whole edit format; see agents.py), so real agents pass, fail and revise against it.

The llama-cpp-python flavour imitates what soak met in that server: no /health and no /metrics (FastAPI's 404; its
/openapi.json answers), one request at a time with /v1/models waiting behind the running one, no usage in streams,
and tools hidden from the model unless the request sets tool_choice.

In a subprocess (`soak sim`, `python -m soak.cli sim`, `start_subprocess`) the crash fault ends the process with exit
code 70 so a supervisor must restart it. In-thread (`SimServer.start`) a crash aborts every open connection and
stops listening, so clients see dropped connections and then connection refused; `start()` again restarts it.
"""

import asyncio
import contextlib
import json
import logging
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from soak.errors import BadInput
from soak.sim.metrics import PrefixCache, RequestLog, RequestRecord, SimStats, dcgm_text, registry_for
from soak.sim.reply import Planner, draw, prompt_tokens, role_of
from soak.sim.scenario import PROBE_FAULTS, Fault, Scenario, load_scenario
from soak.sim.wire import Abort, ChatResponse, Exchange
from soak.tasks.suites import load_suites

__all__ = ["Scenario", "SimServer", "SimStats", "load_scenario", "start_subprocess", "wait_ready"]

ENGINES = ("vllm", "llama-server", "llama-cpp-python")
CRASH_EXIT_CODE = 70
PROBE_FAULT = {"/health": "slow_health", "/metrics": "slow_metrics"}


class QuietAborts(logging.Filter):
    """Connections the sim cuts on purpose are not server errors worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, Abort | asyncio.CancelledError)


logging.getLogger("uvicorn.error").addFilter(QuietAborts())


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "BadRequestError", 401: "AuthenticationError", 500: "InternalServerError",
            503: "ServiceUnavailableError"}[status]
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def check_request(body: Any) -> dict[str, Any]:
    """The parts of a chat request the sim relies on; anything else gets HTTP 400 like vLLM's validation."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise ValueError("messages must be a non-empty list")
    if not all(isinstance(message, dict) for message in body["messages"]):
        raise ValueError("each message must be an object")
    if not isinstance(body.get("tools"), list | None):
        raise ValueError("tools must be a list")
    for key in ("max_tokens", "max_completion_tokens"):
        if body.get(key) is not None and (not isinstance(body[key], int) or body[key] < 1):
            raise ValueError(f"{key} must be a positive integer")
    return body


class CrashResponse:
    """In-thread stand-in for a dying process: the response starts, then the connection is cut."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        raise Abort("crash fault")


class SimServer:
    """A simulated vLLM / llama.cpp server on uvicorn in a background thread; `.stats` is its ground truth."""

    def __init__(self, scenario: Scenario, seed: int = 0, engine: str = "vllm", suite: str = "builtin") -> None:
        if engine not in ENGINES:
            raise BadInput(f"unknown engine '{engine}' (known: {', '.join(ENGINES)})")
        self.scenario, self.seed, self.engine, self.suite = scenario, seed, engine, suite
        self.planner = Planner(scenario, load_suites(suite), seed, engine, self.elapsed)
        self.serialized = engine == "llama-cpp-python"
        """One request at a time, and /v1/models waits for it (llama-cpp-python's model lock)."""
        self.recorder = RequestLog(scenario, self.elapsed)
        self.cache = PrefixCache(scenario)
        self.registry = registry_for(self.recorder, engine, scenario.model)
        self.exit_on_crash = False
        """Crash by ending the process (os._exit), as a subprocess under a supervisor should."""
        self.state_file: Path | None = None
        """Keeps the request count across process restarts, so scheduled faults fire once per night."""
        self.base_url = ""
        self.requests = 0
        self.by_role = {"orchestrator": 0, "coder": 0, "chat": 0}
        self.probes = {path: 0 for path in PROBE_FAULT}
        self.crashed = False
        self.started_at = time.time()
        self.started: float | None = None
        """time.monotonic() when the server first started: the clock of the scenario's `[drift]`. An in-thread
        restart keeps it; a test sets it (before or after `start()`) to move the night on without waiting."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._slots: asyncio.Semaphore | None = None
        routes = [Route("/v1/chat/completions", self.chat, methods=["POST"]), Route("/v1/models", self.models),
                  Route("/sim/stats", self.stats_json)]
        if engine != "llama-cpp-python":
            routes += [Route("/health", self.health), Route("/v1/health", self.health), Route("/metrics", self.metrics)]
        if scenario.power.idle_watts or scenario.power.busy_watts:
            routes.append(Route("/dcgm/metrics", self.dcgm))
        if engine == "llama-server":
            routes += [Route("/props", self.props), Route("/slots", self.slot_states)]
        else:  # FastAPI servers describe themselves; llama-server does not
            routes.append(Route("/openapi.json", self.openapi))
        self.app = Starlette(routes=routes)

    @property
    def stats(self) -> SimStats:
        """A snapshot of what was served so far."""
        return self.recorder.snapshot()

    def elapsed(self) -> float:
        """Seconds since the server first started (0 before it did): where the night is, for `[drift]`."""
        return 0.0 if self.started is None else time.monotonic() - self.started

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in a background thread; returns the base URL ("http://HOST:PORT/v1") once it accepts connections."""
        if self.running:
            return self.base_url
        if self.state_file and self.state_file.is_file():
            state = json.loads(self.state_file.read_text())
            self.requests, self.by_role = state["requests"], state["by_role"]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # With proto=0 asyncio skips TCP_NODELAY on accepted sockets, and Nagle adds ~40 ms to every response.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            sock.close()
            raise BadInput(f"cannot listen on {host}:{port}: {error.strerror}") from None
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = server = uvicorn.Server(config)
        self.crashed, self._slots = False, None
        self.started = time.monotonic() if self.started is None else self.started
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="soak-sim", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"soak sim did not start on {host}:{port}")
            time.sleep(0.005)
        self.base_url = f"http://{f'[{host}]' if family == socket.AF_INET6 else host}:{port}/v1"
        return self.base_url

    def stop(self) -> None:
        """Stop serving (open streams are cut); safe to call twice."""
        if self._server:
            self._server.should_exit = self._server.force_exit = True
        if self._thread:
            self._thread.join(timeout=15)
        self.save_state()

    def __enter__(self) -> "SimServer":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def save_state(self) -> None:
        if self.state_file:
            self.state_file.write_text(json.dumps({"requests": self.requests, "by_role": self.by_role}))

    def fired(self, n: int, role: str, rng: random.Random, kinds: set[str] | None = None) -> list[Fault]:
        """Faults that fire on request (or probe) n; every rate draws, so decisions do not shift with roles.

        A fault limited to some roles counts only their requests: `at_requests = [1]` with `roles = ["coder"]`
        is the first coder request, whatever the orchestrator did before.
        """
        fired = []
        for fault in self.scenario.faults:
            if (fault.kind in PROBE_FAULTS) != (kinds is not None) or (kinds is not None and fault.kind not in kinds):
                continue
            hit = rng.random() < fault.rate if fault.rate else False
            if fault.roles and role not in fault.roles:
                continue
            number = sum(self.by_role[r] for r in fault.roles) if fault.roles and kinds is None else n
            if hit or number in fault.at_requests:
                fired.append(fault)
        return fired

    async def chat(self, request: Request) -> Any:
        received, start = time.time(), time.monotonic()
        self.requests += 1
        n = self.requests
        if self.scenario.api_key and request.headers.get("authorization") != f"Bearer {self.scenario.api_key}":
            return self.refuse(RequestRecord(n=n, role="chat", kind="error", status=401, received=received),
                               "Unauthorized")
        try:
            body = check_request(await request.json())
        except ValueError as error:
            invalid = RequestRecord(n=n, role="chat", kind="invalid", status=400, received=received)
            return self.refuse(invalid, str(error))
        rng = random.Random(self.seed * 1_000_003 + n)
        role = role_of(body, self.engine)
        self.by_role[role] += 1
        faults = self.fired(n, role, rng)
        kinds = [fault.kind for fault in faults]
        if "crash" in kinds:
            return self.crash(n, role, received)
        http_error = next((kind for kind in kinds if kind in ("http_500", "http_503")), None)
        if http_error:
            status = int(http_error.removeprefix("http_"))
            failed = RequestRecord(n=n, role=role, kind="error", status=status, faults=[http_error], received=received)
            return self.refuse(failed, "simulated server error")
        tokens = prompt_tokens(body["messages"], body.get("tools"))
        room = self.scenario.max_model_len - len(tokens)
        if room <= 0:
            message = f"This model's maximum context length is {self.scenario.max_model_len} tokens."
            return self.refuse(RequestRecord(n=n, role=role, kind="error", status=400, received=received), message)
        max_tokens = min(body.get("max_completion_tokens") or body.get("max_tokens") or room, room)
        reply = self.planner.plan(body, rng, faults, max_tokens)
        timing = self.scenario.timing
        cached = self.cache.lookup(tokens)
        prefill = (len(tokens) - cached) / timing.prefill_tokens_per_second if timing.prefill_tokens_per_second else 0
        first = draw(timing.ttft_seconds, rng) * self.scenario.drift.ttft(self.elapsed())
        ex = Exchange(
            n=n, received=received, start=start, body=body, reply=reply, faults=faults, prompt_tokens=len(tokens),
            cached_tokens=cached, ttft=first + prefill, prefill=prefill,
            rate=draw(timing.decode_tokens_per_second, rng), rng=rng, engine=self.engine,
            prompt_tokens_details=self.engine == "llama-server" or (
                self.engine == "vllm" and self.scenario.cache.prompt_tokens_details),
            model=str(body.get("model") or self.scenario.model), id=f"chatcmpl-{rng.getrandbits(128):032x}",
        )
        blocks = -(-len(tokens) // self.scenario.cache.block_tokens)
        return ChatResponse(ex, self.recorder, lambda: self.crashed, self.slot(ex, blocks), timing.tokens_per_chunk)

    def refuse(self, record: RequestRecord, message: str) -> JSONResponse:
        """An error answer, as vLLM shapes it; the request never reached the engine."""
        self.recorder.finish(record, None, 0.0, random.Random())
        return JSONResponse(error_body(record.status, message), status_code=record.status)

    @contextlib.asynccontextmanager
    async def slot(self, ex: Exchange, blocks: int) -> AsyncIterator[None]:
        """A decoding slot: waits when max_running are busy (num_requests_waiting), holds KV blocks while running;
        a batch slows each request in it, and one that finds the KV cache full is preempted (recomputes its
        prefill)."""
        recorder, limit = self.recorder, 1 if self.serialized else self.scenario.timing.max_running
        if limit:
            self._slots = self._slots or asyncio.Semaphore(limit)
            recorder.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                recorder.waiting -= 1
        recorder.run_one(+1)
        recorder.stats.most_running = max(recorder.stats.most_running, recorder.running)
        recorder.kv_blocks += blocks
        ex.stretch(1 + self.scenario.timing.slowdown_per_running * (recorder.running - 1))
        if recorder.kv_blocks > self.scenario.cache.capacity_blocks:
            recorder.stats.preemptions += 1
            ex.ttft += ex.prefill
        try:
            yield
        finally:
            recorder.run_one(-1)
            recorder.kv_blocks -= blocks
            if limit and self._slots:
                self._slots.release()

    def crash(self, n: int, role: str, received: float) -> CrashResponse:
        record = RequestRecord(n=n, role=role, kind="crash", status=0, faults=["crash"], received=received)
        self.recorder.finish(record, None, 0.0, random.Random())
        if self.exit_on_crash:
            self.save_state()
            print(f"soak sim: crash fault on request {n}, exiting with code {CRASH_EXIT_CODE}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(CRASH_EXIT_CODE)
        self.crashed = True
        if self._server:
            self._server.should_exit = self._server.force_exit = True
        return CrashResponse()

    async def probe(self, path: str) -> None:
        """Count a /health or /metrics probe and make it slow when a slow_* fault fires."""
        self.probes[path] += 1
        n = self.probes[path]
        self.recorder.probe(path)
        for fault in self.fired(n, "", random.Random(f"{self.seed}:{path}:{n}"), {PROBE_FAULT[path]}):
            self.recorder.fault(fault.kind)
            await asyncio.sleep(fault.seconds)

    async def health(self, request: Request) -> Response:
        await self.probe("/health")
        if self.engine == "llama-server":
            return JSONResponse({"status": "ok"})
        return Response(status_code=200)

    async def metrics(self, request: Request) -> Response:
        await self.probe("/metrics")
        headers = {"Process-Start-Time-Unix": str(int(self.started_at))} if self.engine == "llama-server" else None
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST, headers=headers)

    async def dcgm(self, request: Request) -> Response:
        """The `[power]` exporter; 503 once it has gone dark."""
        power = self.scenario.power
        if power.dark_from_s is not None and self.elapsed() >= power.dark_from_s:
            return Response("exporter gone dark", status_code=503)
        energy = self.recorder.metered()
        return Response(dcgm_text(self.recorder.watts(), energy), media_type=CONTENT_TYPE_LATEST)

    async def models(self, request: Request) -> Response:
        if self.serialized:
            self._slots = self._slots or asyncio.Semaphore(1)
            async with self._slots:
                return JSONResponse({"object": "list", "data": [
                    {"id": self.scenario.model, "object": "model", "owned_by": "me", "permissions": []}]})
        model = {"id": self.scenario.model, "object": "model", "created": int(self.started_at),
                 "owned_by": self.engine, "root": self.scenario.model, "parent": None,
                 "max_model_len": self.scenario.max_model_len}
        return JSONResponse({"object": "list", "data": [model]})

    async def props(self, request: Request) -> Response:
        return JSONResponse(self.recorder.llama_server_props())

    async def slot_states(self, request: Request) -> Response:
        return JSONResponse(self.recorder.llama_server_slots())

    async def openapi(self, request: Request) -> Response:
        return JSONResponse({"openapi": "3.1.0", "info": {"title": f"{self.engine} (soak sim)", "version": "0"},
                             "paths": {}})

    async def stats_json(self, request: Request) -> Response:
        """Ground truth for a sim running in another process."""
        return Response(self.stats.model_dump_json(), media_type="application/json")


def wait_ready(base_url: str, timeout: float = 30.0) -> None:
    """Poll GET /v1/models until the server answers (after a restart, say)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{base_url} not ready after {timeout:.0f} s") from None
            time.sleep(0.05)


READY_SECONDS = 30.0
"""How long a sim in a subprocess may take to print its base URL."""


def start_subprocess(
    scenario: str | Path | Scenario = "clean", *, port: int = 0, seed: int = 0, engine: str = "vllm",
    suite: str = "builtin", state: Path | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Run `python -m soak.cli sim` on loopback and wait until it prints its base URL; the caller terminates the
    process."""
    temporary = None
    if isinstance(scenario, Scenario):
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="soak-sim-", delete=False) as file:
            file.write(scenario.model_dump_json())
        scenario = temporary = file.name
    args = [sys.executable, "-m", "soak.cli", "sim", "--host", "127.0.0.1", "--port", str(port), "--scenario",
            str(scenario), "--seed", str(seed), "--engine", engine, "--suite", suite]
    if state:
        args += ["--state", str(state)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_SECONDS)
    line = process.stdout.readline().strip() if ready else ""
    if temporary:
        os.unlink(temporary)
    if not line.startswith("http"):
        process.kill()
        process.wait()
        raise RuntimeError(f"soak sim subprocess did not become ready (exit code {process.returncode})")
    return process, line


@dataclass(frozen=True)
class SimFlags:
    """The flags of `soak sim`: its scenario, where it listens, which server it imitates, its seed, the suites its
    coder knows, and the file keeping its request count across restarts."""

    scenario: str
    host: str
    port: int
    seed: int
    engine: str
    suite: str
    state: Path | None


def serve(flags: SimFlags) -> None:
    """The `soak sim` command: serve in the foreground, print the base URL, stop on Ctrl-C or SIGTERM."""
    server = SimServer(load_scenario(flags.scenario), seed=flags.seed, engine=flags.engine, suite=flags.suite)
    server.exit_on_crash, server.state_file = True, flags.state
    url = server.start(flags.host, flags.port)
    print(url, flush=True)
    print(f"soak sim: scenario '{server.scenario.name}', engine {flags.engine}, seed {flags.seed}; Ctrl-C stops",
          file=sys.stderr)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        while server.running:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt

