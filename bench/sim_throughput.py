"""Requests/s that `soak sim` sustains with the zero-latency scenario, streamed and whole, side by side.

The sim runs in its own process (as `soak sim` would) and, separately, in a thread of the client's process (as
tests embed it). Clients are raw httpx2 connections reading whole bodies, so the figure is the server's, not the
SDK's parsing; one run with the openai SDK shows what a real harness client costs on top. The sim process's CPU
time per request gives its ceiling on one free core, which does not depend on what else the machine is doing.

    .venv/bin/python bench/sim_throughput.py [--clients 16] [--seconds 4] [--suite builtin]
"""

import argparse
import asyncio
import time

import httpx2
import psutil
from openai import AsyncOpenAI

from soak.sim.server import SimServer, load_scenario, start_subprocess

WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
CODER = {
    "messages": [{"role": "user", "content": "Task id: word-frequency\nWrite solution.py."}],
    "tools": [WRITE_FILE],
}
CHAT = {"messages": [{"role": "user", "content": "Say something short."}]}


async def raw_load(base_url: str, body: dict, stream: bool, clients: int, seconds: float) -> tuple[int, float]:
    """Requests done by `clients` loops posting `body` for `seconds` (each reads the whole response), and the time."""
    payload = {"model": "m", **body, "stream": stream, "stream_options": {"include_usage": True} if stream else None}
    done = 0
    async with httpx2.AsyncClient(base_url=base_url, limits=httpx2.Limits(max_connections=clients)) as client:
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                response = await client.post("/chat/completions", json=payload)
                assert response.status_code == 200 and (not stream or response.text.endswith("data: [DONE]\n\n"))
                done += 1

        start = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(clients)))
        return done, time.monotonic() - start


async def sdk_load(base_url: str, clients: int, seconds: float) -> float:
    """Requests/s of streamed coder calls through the openai SDK, chunks parsed as a harness would."""
    client = AsyncOpenAI(base_url=base_url, api_key="sim", max_retries=0)
    deadline, done = time.monotonic() + seconds, 0

    async def loop() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            stream = await client.chat.completions.create(
                model="m", stream=True, stream_options={"include_usage": True}, **CODER
            )
            async for _ in stream:
                pass
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(clients)))
    await client.close()
    return done / (time.monotonic() - start)


def table(base_url: str, clients: int, seconds: float, server: psutil.Process | None) -> dict[str, tuple[float, float]]:
    """Per request kind: requests/s, and the server's CPU milliseconds per request (when it is another process)."""
    figures = {}
    for kind, body in (("chat", CHAT), ("coder", CODER)):
        for stream in (True, False):
            before = sum(server.cpu_times()[:2]) if server else 0.0
            done, elapsed = asyncio.run(raw_load(base_url, body, stream, clients, seconds))
            cpu_ms = (sum(server.cpu_times()[:2]) - before) * 1000 / done if server else float("nan")
            figures[f"{kind} {'stream' if stream else 'whole'}"] = (done / elapsed, cpu_ms)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--suite", default="builtin")
    args = parser.parse_args()
    process, base_url = start_subprocess("zero", suite=args.suite)
    try:
        separate = table(base_url, args.clients, args.seconds, psutil.Process(process.pid))
        sdk = asyncio.run(sdk_load(base_url, args.clients, args.seconds))
    finally:
        process.terminate()
        process.wait()
    with SimServer(load_scenario("zero"), suite=args.suite) as sim:
        in_thread = table(sim.base_url, args.clients, args.seconds, None)
    print(f"soak sim, scenario zero, {args.clients} concurrent clients, {args.seconds:.0f} s per figure")
    print(f"{'request':<14}{'subprocess req/s':>18}{'sim CPU ms/req':>16}{'ceiling req/s':>15}{'in-thread req/s':>17}")
    for name, (rate, cpu_ms) in separate.items():
        print(f"{name:<14}{rate:>18.0f}{cpu_ms:>16.2f}{1000 / cpu_ms:>15.0f}{in_thread[name][0]:>17.0f}")
    print(f"coder stream through the openai SDK client: {sdk:.0f} req/s")


if __name__ == "__main__":
    main()
