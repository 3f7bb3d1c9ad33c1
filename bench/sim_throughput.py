"""Requests/s that `soak sim` sustains with the zero-latency scenario, streamed and whole, side by side.

The sim runs in its own process (as `soak sim` would) and, separately, in a thread of the client's process (as
tests embed it). Clients are raw httpx2 connections reading whole bodies, so the figure is the server's, not the
SDK's parsing; one run with the openai SDK shows what a real harness client costs on top.

    .venv/bin/python bench/sim_throughput.py [--clients 16] [--seconds 4] [--suite builtin]
"""

import argparse
import asyncio
import time

import httpx2
from openai import AsyncOpenAI

from soak.sim import SimServer, load_scenario, start_subprocess

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


async def raw_load(base_url: str, body: dict, stream: bool, clients: int, seconds: float) -> float:
    """Requests/s of `clients` loops posting `body` for `seconds`; each reads the whole response."""
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
        return done / (time.monotonic() - start)


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


def table(base_url: str, clients: int, seconds: float) -> dict[str, float]:
    return {
        f"{kind} {'stream' if stream else 'whole'}": asyncio.run(raw_load(base_url, body, stream, clients, seconds))
        for kind, body in (("chat", CHAT), ("coder", CODER))
        for stream in (True, False)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--suite", default="builtin")
    args = parser.parse_args()
    process, base_url = start_subprocess("zero", suite=args.suite)
    try:
        separate = table(base_url, args.clients, args.seconds)
        separate["coder stream, openai SDK"] = asyncio.run(sdk_load(base_url, args.clients, args.seconds))
    finally:
        process.terminate()
        process.wait()
    with SimServer(load_scenario("zero"), suite=args.suite) as sim:
        in_thread = table(sim.base_url, args.clients, args.seconds)
    print(f"soak sim, scenario zero, {args.clients} concurrent clients, {args.seconds:.0f} s per figure")
    print(f"{'request':<28}{'subprocess req/s':>18}{'in-thread req/s':>18}")
    for name, rate in separate.items():
        other = f"{in_thread[name]:.0f}" if name in in_thread else "-"
        print(f"{name:<28}{rate:>18.0f}{other:>18}")


if __name__ == "__main__":
    main()
