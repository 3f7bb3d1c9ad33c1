"""Cost of soak's LLM layer (ChatEndpoint.chat) over a bare AsyncOpenAI streaming loop, side by side.

Both clients stream plain chat calls with usage from the zero-latency `soak sim` (its own process), `--lanes`
concurrent loops each, in interleaved slices (bare, layer, bare, layer, ...) so drift hits both alike. The layer
runs with its rate limit and semaphore wide open; everything else (timing, usage, integrity, rows) is on. Prints
calls/s of each, the ratio (target >= 0.90) and the client CPU per call.

    .venv/bin/python bench/llm_overhead.py [--lanes 64] [--slices 6] [--seconds 3]
"""

import argparse
import asyncio
import statistics
import time

import httpx2
from openai import AsyncOpenAI

from soak.config import Endpoint
from soak.llm.client import ChatEndpoint
from soak.sim.scenario import Scenario
from soak.sim.server import start_subprocess

MESSAGES = [{"role": "user", "content": "Say something short."}]
SCENARIO = Scenario.model_validate(
    {"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 1}, "chat": {"tokens": 24}}
)


async def bare_call(client: AsyncOpenAI) -> None:
    """What a minimal harness does: stream, keep the text, the finish reason and the usage."""
    stream = await client.chat.completions.create(
        model="sim", messages=MESSAGES, max_tokens=256, stream=True, stream_options={"include_usage": True}
    )
    parts, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices:
            if chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop" and usage is not None and parts


async def layer_call(endpoint: ChatEndpoint) -> None:
    result = await endpoint.chat(MESSAGES, role="probe", max_tokens=256)
    assert result.ok and result.content and result.rows[0].completion_tokens


async def timed_slice(call, lanes: int, seconds: float) -> tuple[int, float, float]:
    """(calls, wall seconds, client CPU seconds) of `lanes` loops calling for `seconds`."""
    deadline = time.monotonic() + seconds
    done = 0

    async def lane() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await call()
            done += 1

    wall, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(lane() for _ in range(lanes)))
    return done, time.monotonic() - wall, time.process_time() - cpu


async def measure(base_url: str, lanes: int, slices: int, seconds: float) -> None:
    limits = httpx2.Limits(max_connections=lanes * 2, max_keepalive_connections=lanes * 2)
    bare = AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, http_client=httpx2.AsyncClient(limits=limits))
    endpoint = ChatEndpoint(
        "sim",
        Endpoint(base_url=base_url, model="sim", calls_per_second=1e9, max_concurrent_calls=lanes),
        stale_seconds=60,
        http_client=httpx2.AsyncClient(limits=limits),
    )
    kinds = {"bare": lambda: bare_call(bare), "layer": lambda: layer_call(endpoint)}
    for call in kinds.values():  # warm both connection pools
        await timed_slice(call, lanes, 0.5)
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    for index in range(slices):
        order = list(kinds) if index % 2 == 0 else list(reversed(kinds))
        for kind in order:
            done, wall, used = await timed_slice(kinds[kind], lanes, seconds)
            rates[kind].append(done / wall)
            cpu[kind].append(used / done * 1000)
    await bare.close()
    await endpoint.close()
    for kind in kinds:
        slices = ", ".join(f"{rate:.0f}" for rate in rates[kind])
        print(f"{kind:<6} {statistics.median(rates[kind]):8.1f} calls/s   "
              f"{statistics.median(cpu[kind]):6.3f} ms CPU/call   (slices: {slices})")
    ratio = statistics.median(rates["layer"]) / statistics.median(rates["bare"])
    cpu_ratio = statistics.median(cpu["layer"]) / statistics.median(cpu["bare"])
    print(f"ratio layer/bare calls/s: {ratio:.3f} (target >= 0.90); CPU per call layer/bare: {cpu_ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--slices", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    process, base_url = start_subprocess(SCENARIO)
    try:
        print(f"sim {base_url}, {args.lanes} lanes, {args.slices} interleaved slices of {args.seconds:g} s each")
        asyncio.run(measure(base_url, args.lanes, args.slices, args.seconds))
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
