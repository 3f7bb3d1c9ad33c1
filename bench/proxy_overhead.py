"""Cost of soak's recording proxy: calls/s and TTFT through it against the same calls direct to the sim.

The zero-latency `soak sim` runs in its own process and so does the proxy (this script re-invoked with
`--serve-proxy UPSTREAM_URL`: one `RecordingProxy` attempt with budgets too large to bind, whose `on_call` counts
rows, reported when it is terminated), as an agent's harness would be. Raw httpx2 streaming clients, the way an
agent's openai SDK talks, run `--lanes` concurrent loops of plain streamed chat calls with usage, in interleaved
slices (direct, proxy, proxy, direct, ...) so drift hits both alike; each call's TTFT is the client's time from
sending to the first content token. Then one lane alone, also interleaved, gives the latency the proxy adds to an
unqueued call. Last, the proxy process's RSS (and CPU) after all of that (the warm-up) and after
`--memory-calls` more calls. Prints calls/s (target: proxy >= 0.9 x direct), the added TTFT (median through the
proxy minus median direct, target <= 2 ms), the RSS growth (target < 5 MB) and the proxy's CPU per call, any
failed calls, the rows the proxy recorded against the calls sent (with the errors of those not ok), each process's
CPU per proxied call with the ratio those allow when the cores are the bound, and the load average before and after
(the ratio is only as steady as the machine).

    .venv/bin/python bench/proxy_overhead.py [--lanes 64] [--slices 6] [--seconds 3] [--memory-calls 2000]
        [--baseline CHECKOUT]
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx2
import psutil

from soak.agent.attempt import Ledger
from soak.agent.proxy import ProxiedAttempt, RecordingProxy
from soak.config import Budgets, Endpoint
from soak.record.identity import AttemptId
from soak.record.schema import CallRow
from soak.sim.scenario import Scenario
from soak.sim.server import start_subprocess

BODY = {
    "model": "sim", "messages": [{"role": "user", "content": "Say something short."}], "max_tokens": 256,
    "stream": True, "stream_options": {"include_usage": True},
}
SCENARIO = Scenario.model_validate(
    {"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 1}, "chat": {"tokens": 24}}
)

# --- the proxy process --------------------------------------------------------------------------------------------


async def serve_proxy(upstream: str) -> None:
    """One attempt that no budget stops; print its base URL, serve until SIGTERM, then print the row counts."""
    budgets = Budgets(max_calls=10**9, max_completion_tokens=10**12, stale_seconds=60)
    proxy = RecordingProxy("sim", Endpoint(base_url=upstream, model="sim"), None, budgets)
    counts = {"rows": 0, "ok": 0}
    errors: Counter[str] = Counter()

    def on_call(row: CallRow) -> None:
        counts["rows"] += 1
        counts["ok"] += row.status == "ok" and row.ttft_s is not None and bool(row.completion_tokens)
        if row.status != "ok":
            errors[f"{row.status}: {row.error}"] += 1

    await proxy.start()
    ledger = Ledger(budgets.max_calls, budgets.max_completion_tokens, on_call)
    base_url, _ = proxy.open(ProxiedAttempt(ledger, "bench", AttemptId("bench", 0)))
    print(base_url, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await proxy.stop()
    print(json.dumps({**counts, "calls": ledger.calls, "recorded": ledger.totals.calls, "errors": errors}), flush=True)


def start_proxy(upstream: str, checkout: Path | None = None) -> tuple[subprocess.Popen, str]:
    """This script's proxy process, or with `checkout` that checkout's (its own bench script, its soak first on the
    path)."""
    script, env = __file__, None
    if checkout is not None:
        script, env = str(checkout / "bench" / "proxy_overhead.py"), {**os.environ, "PYTHONPATH": str(checkout)}
    process = subprocess.Popen([sys.executable, script, "--serve-proxy", upstream], stdout=subprocess.PIPE, text=True,
                               env=env)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("http"):
        process.kill()
        raise RuntimeError(f"the proxy process did not start (exit code {process.wait()})")
    return process, line


# --- the client ---------------------------------------------------------------------------------------------------


async def call(client: httpx2.AsyncClient, url: str) -> float:
    """One streamed chat call read to its end; the seconds from sending to the first content token."""
    ttft = None
    finished = False
    sent = time.perf_counter()
    async with client.stream("POST", url, json=BODY) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if ttft is None:
                if line == "data: [DONE]":
                    break
                choices = json.loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    ttft = time.perf_counter() - sent
            finished = finished or '"finish_reason":"stop"' in line
    assert ttft is not None and finished
    return ttft


SENT: Counter[str] = Counter()
FAILED: dict[str, list[str]] = {}
"""Calls that failed, by URL: a benchmark that stops at the first one would hide how often it happens."""


async def checked(client: httpx2.AsyncClient, url: str) -> float | None:
    SENT[url] += 1
    try:
        return await call(client, url)
    except httpx2.HTTPError as error:
        FAILED.setdefault(url, []).append(repr(error))
        return None


async def timed_slice(client: httpx2.AsyncClient, url: str, lanes: int, seconds: float) -> tuple[float, list[float]]:
    """(calls/s, each good call's TTFT) of `lanes` loops calling for `seconds`."""
    deadline = time.monotonic() + seconds
    ttfts: list[float] = []

    async def lane() -> None:
        while time.monotonic() < deadline:
            if (ttft := await checked(client, url)) is not None:
                ttfts.append(ttft)

    wall = time.monotonic()
    await asyncio.gather(*(lane() for _ in range(lanes)))
    return len(ttfts) / (time.monotonic() - wall), ttfts


async def counted(client: httpx2.AsyncClient, url: str, lanes: int, calls: int) -> None:
    """Exactly `calls` calls over `lanes` loops."""
    left = calls

    async def lane() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await checked(client, url)

    await asyncio.gather(*(lane() for _ in range(lanes)))


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def mb(process: psutil.Process) -> float:
    return process.memory_info().rss / 2**20


def cpu_seconds(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


async def measure(urls: dict[str, str], proxies: dict[str, psutil.Process], sim: psutil.Process,
                  args: argparse.Namespace) -> int:
    """Run the series and print them; the calls sent through the proxy (failed ones too). `proxies`: the proxy and,
    with --baseline, the baseline's, by their kind in `urls`."""
    limits = httpx2.Limits(max_connections=args.lanes * 2, max_keepalive_connections=args.lanes * 2)
    client = httpx2.AsyncClient(limits=limits, timeout=60)
    for url in urls.values():  # warm the connection pools, the proxy's upstream pool too
        await timed_slice(client, url, args.lanes, 0.5)
    series = {}
    sliced = {kind: [0.0, 0] for kind in proxies}
    """Each proxy's CPU seconds and calls in the slices of the first series."""
    for lanes, slices, seconds in ((args.lanes, args.slices, args.seconds), (1, args.slices, args.seconds / 2)):
        rates: dict[str, list[float]] = {kind: [] for kind in urls}
        ttfts: dict[str, list[float]] = {kind: [] for kind in urls}
        for index in range(slices):
            for kind in list(urls) if index % 2 == 0 else list(reversed(urls)):
                spent, sent = cpu_seconds(proxies[kind]) if kind in proxies else 0.0, SENT[urls[kind]]
                rate, got = await timed_slice(client, urls[kind], lanes, seconds)
                if kind in proxies and lanes == args.lanes:
                    sliced[kind][0] += cpu_seconds(proxies[kind]) - spent
                    sliced[kind][1] += SENT[urls[kind]] - sent
                rates[kind].append(rate)
                ttfts[kind] += got
        series[lanes] = rates, ttfts
    proxy = proxies["proxy"]
    processes = {"client": psutil.Process(), "sim": sim, "proxy": proxy}
    warm, before = mb(proxy), SENT[urls["proxy"]]
    cpu = {name: cpu_seconds(process) for name, process in processes.items()}
    await counted(client, urls["proxy"], args.lanes, args.memory_calls)
    end = mb(proxy)
    ms = {name: (cpu_seconds(process) - cpu[name]) / args.memory_calls * 1000 for name, process in processes.items()}
    await client.aclose()

    print(f"{'series':<18} {'calls/s':>9} {'TTFT median':>12} {'TTFT p90':>9}   calls/s of each slice")
    for lanes, (rates, ttfts) in series.items():
        for kind in urls:
            p90 = statistics.quantiles(ttfts[kind], n=10)[-1]
            print(f"{kind + f', {lanes} lane' + 's' * (lanes > 1):<18} {statistics.median(rates[kind]):9.1f} "
                  f"{statistics.median(ttfts[kind]) * 1000:9.2f} ms {p90 * 1000:6.2f} ms   "
                  + ", ".join(f"{rate:.0f}" for rate in rates[kind]))
    rates, ttfts = series[args.lanes]
    for kind in proxies:
        ratio = statistics.median(rates[kind]) / statistics.median(rates["direct"])
        print(f"ratio {kind}/direct calls/s, {args.lanes} lanes: {ratio:.3f} (target >= 0.90)")
    for lanes, (_, ttfts) in series.items():
        added = (statistics.median(ttfts["proxy"]) - statistics.median(ttfts["direct"])) * 1000
        print(f"added TTFT median, {lanes} lane{'s' * (lanes > 1)}: {added:+.2f} ms (target <= 2 ms)")
    print(f"CPU per call in the {args.lanes}-lane slices: "
          + ", ".join(f"{kind} {cpu / calls * 1000:.3f} ms" for kind, (cpu, calls) in sliced.items()))
    print(f"proxy RSS after warm-up ({before} calls) {warm:.1f} MB, after "
          f"{args.memory_calls} more {end:.1f} MB: growth {end - warm:+.1f} MB (target < 5 MB); "
          f"proxy CPU {ms['proxy']:.2f} ms per call")
    # Bound by CPU (fewer free cores than busy processes), a direct call costs the client and the sim, a proxied
    # one the proxy too: that share is the most the ratio can reach here.
    print(f"CPU per proxied call: client {ms['client']:.2f} ms, sim {ms['sim']:.2f} ms, proxy {ms['proxy']:.2f} ms; "
          f"bound by {os.cpu_count()} CPUs, the ratio can reach (client + sim) / all three = "
          f"{(ms['client'] + ms['sim']) / sum(ms.values()):.3f}")
    kinds = {url: kind for kind, url in urls.items()}
    for url, errors in FAILED.items():
        print(f"{len(errors)} failed calls {kinds[url]} ({url}): {', '.join(sorted(set(errors)))}")
    return SENT[urls["proxy"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--slices", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--memory-calls", type=int, default=2000)
    parser.add_argument("--baseline", metavar="CHECKOUT", type=Path,
                        help="a checkout of soak (a git worktree of an older commit, say) whose proxy runs beside this "
                             "one, in the same interleaved slices: which costs less, where the machine is too busy for "
                             "a steady ratio")
    parser.add_argument("--serve-proxy", metavar="UPSTREAM_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        asyncio.run(serve_proxy(args.serve_proxy))
        return
    sim, sim_url = start_subprocess(SCENARIO)
    started: dict[str, subprocess.Popen] = {}
    try:
        urls = {"direct": f"{sim_url}/chat/completions"}
        for kind, checkout in (("proxy", None), ("baseline", args.baseline)):
            if kind == "proxy" or checkout is not None:
                started[kind], url = start_proxy(sim_url, checkout)
                urls[kind] = f"{url}/chat/completions"
        try:
            print(f"load average {load()}; sim {sim_url}, proxy {urls['proxy'].split('/a/')[0]}, {args.lanes} lanes, "
                  f"{args.slices} interleaved slices of {args.seconds:g} s each (1 lane: {args.seconds / 2:g} s)")
            proxies = {kind: psutil.Process(process.pid) for kind, process in started.items()}
            sent = asyncio.run(measure(urls, proxies, psutil.Process(sim.pid), args))
        finally:
            for process in started.values():
                process.terminate()
            out, _ = started["proxy"].communicate(timeout=30)
            if "baseline" in started:
                started["baseline"].communicate(timeout=30)
        counts = json.loads(out.strip().splitlines()[-1])
        print(f"proxy recorded {counts['rows']} rows ({counts['ok']} ok with TTFT and usage) of {sent} calls sent; "
              f"its attempt counted {counts['calls']} calls and recorded {counts['recorded']}")
        for error, times in counts["errors"].items():
            print(f"{times} rows {error}")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    print(f"load average {load()} (1, 5, 15 min; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
