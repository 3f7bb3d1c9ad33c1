"""How close the LLM layer's TTFT and decode tok/s come to what the server itself measured.

`soak sim` (its own process) answers with a known TTFT and decode rate, one token per SSE chunk; `--streams`
concurrent calls go through ChatEndpoint.chat, `--waves` times after one unmeasured warm-up wave. Each call has a
prompt of unique length, which pairs it with the sim's own record (server-side receive, first and last byte).
Prints the median and p90 TTFT error (target median <= 5 ms) and decode-rate error (target median <= 2 %).

    .venv/bin/python bench/timing_fidelity.py [--streams 32] [--waves 3] [--ttft 0.25] [--rate 100] [--tokens 200]
"""

import argparse
import asyncio
import json
import statistics
import urllib.request

from soak.config import Endpoint
from soak.llm.client import ChatEndpoint
from soak.record.schema import CallRow
from soak.sim.scenario import Scenario
from soak.sim.server import start_subprocess


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def calls(base_url: str, streams: int, waves: int, tokens: int) -> list[CallRow]:
    endpoint = ChatEndpoint("sim", Endpoint(base_url=base_url, model="sim", max_concurrent_calls=streams,
                                            calls_per_second=1e9), stale_seconds=60)
    rows: list[CallRow] = []
    # A first, unmeasured wave opens the connections and pays the one-time costs (lazy imports, pools).
    for wave in range(-1, waves):
        prompts = [" ".join(["word"] * ((wave + 1) * streams + i + 1)) for i in range(streams)]
        results = await asyncio.gather(
            *(endpoint.chat([{"role": "user", "content": p}], role="probe", max_tokens=tokens * 2) for p in prompts)
        )
        assert all(result.ok for result in results), [result.error for result in results if not result.ok]
        rows += [result.rows[-1] for result in results] if wave >= 0 else []
    await endpoint.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--ttft", type=float, default=0.25, help="Sim TTFT, seconds.")
    parser.add_argument("--rate", type=float, default=100, help="Sim decode rate, tokens/s per stream.")
    parser.add_argument("--tokens", type=int, default=200, help="Completion tokens per call.")
    args = parser.parse_args()
    scenario = Scenario.model_validate({
        "timing": {"ttft_seconds": args.ttft, "decode_tokens_per_second": args.rate, "tokens_per_chunk": 1},
        "chat": {"tokens": args.tokens - 1},  # the sim ends a chat answer with "."
        "cache": {"enabled": False},
    })
    process, base_url = start_subprocess(scenario)
    try:
        rows = asyncio.run(calls(base_url, args.streams, args.waves, args.tokens))
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/sim/stats") as response:
            records = {r["prompt_tokens"]: r for r in json.load(response)["records"]}
    finally:
        process.terminate()
        process.wait(timeout=10)
    ttft_errors, rate_errors, server_rates = [], [], []
    for row in rows:
        record = records[row.prompt_tokens]
        assert record["completion_tokens"] == row.completion_tokens
        server_ttft = record["first_byte"] - record["received"]
        server_rate = (record["completion_tokens"] - 1) / (record["last_byte"] - record["first_byte"])
        ttft_errors.append(abs(row.ttft_s - server_ttft) * 1000)
        rate_errors.append(abs(row.decode_tps - server_rate) / server_rate * 100)
        server_rates.append(server_rate)
    print(f"{len(rows)} calls ({args.streams} concurrent x {args.waves}), sim TTFT {args.ttft:g} s, "
          f"{args.rate:g} tok/s, {rows[0].completion_tokens} tokens per call")
    print(f"server-side decode rate: median {statistics.median(server_rates):.2f} tok/s")
    figures = (("TTFT error", ttft_errors, "ms", 5), ("decode-rate error", rate_errors, "%", 2))
    for name, errors, unit, target in figures:
        print(f"{name + ':':<19} median {statistics.median(errors):6.2f} {unit:<3} p90 {percentile(errors, 0.9):6.2f} "
              f"{unit:<3} (target median <= {target} {unit})")


if __name__ == "__main__":
    main()
