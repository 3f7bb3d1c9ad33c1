"""How a judge model reads the labelled corpus of real closing messages (tests/agent/corpus/), beside the lexical
detector: precision and recall per class for both, and how often the two agree. The figures `soak claims --judge`
stands on.

    .venv/bin/python bench/claims_judge.py --judge URL --model M   # any OpenAI-compatible endpoint
    .venv/bin/python bench/claims_judge.py --embedded              # the bundled SmolLM2 on llama-cpp-python (CPU)
    .venv/bin/python bench/claims_judge.py --embedded --limit 20   # the first 20 messages only

It prints one table; BENCHMARKS.md keeps the runs.
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from soak.agent.claims import Claim, claim_of
from soak.config import Endpoint, Stack
from soak.llm.client import ChatEndpoint
from soak.probes.second_reading import judge_message

CORPUS = Path(__file__).parents[1] / "tests" / "agent" / "corpus" / "closing_messages.jsonl"
CLASSES = {"success": ("done",), "failure": ("partial", "blocked")}


def figures(pairs: list[tuple[dict, Claim | None]]) -> dict[str, str]:
    """precision / recall of each class and of the tests claim, over the messages (an unread answer counts as none)."""
    shown = {}
    for name, statuses in (*CLASSES.items(), ("tests", None)):
        def said(claim: Claim | None) -> bool:
            if claim is None:
                return False
            return claim.tests_claim if statuses is None else claim.status in statuses  # noqa: B023

        def labelled(row: dict) -> bool:
            return bool(row["tests_claim"]) if statuses is None else row["status"] in statuses  # noqa: B023

        both = sum(said(claim) and labelled(row) for row, claim in pairs)
        read, wanted = sum(said(claim) for _, claim in pairs), sum(labelled(row) for row, _ in pairs)
        shown[name] = (f"{both / read:.2f}" if read else "-") + " / " + (f"{both / wanted:.2f}" if wanted else "-")
    return shown


async def judged(rows: list[dict], endpoint: Endpoint) -> list[Claim | None]:
    chat = ChatEndpoint("judge", endpoint, stale_seconds=300)
    found = []
    try:
        for number, row in enumerate(rows, 1):
            found.append(await judge_message(chat, row["message"]))
            print(f"\r{number}/{len(rows)} read", end="", file=sys.stderr, flush=True)
    finally:
        await chat.close()
        print(file=sys.stderr)
    return found


async def with_embedded(rows: list[dict]) -> tuple[list[Claim | None], str]:
    """The corpus read by the bundled model, served by llama-cpp-python the way a night's embedded default is."""
    from soak.stack.servers import StackSupervisor, embedded_default

    server, endpoint, _ = embedded_default(context_tokens=4096)
    supervisor = StackSupervisor(Stack(servers=[server]), Path(tempfile.mkdtemp(prefix="soak-judge-")),
                                 lambda *event: None)
    await supervisor.start()
    try:
        return await judged(rows, endpoint.model_copy(update={"temperature": 0.0})), endpoint.model
    finally:
        supervisor.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", help="the judge's OpenAI-compatible base URL")
    parser.add_argument("--model", help="the judge's model name")
    parser.add_argument("--embedded", action="store_true", help="serve the bundled SmolLM2 as the judge")
    parser.add_argument("--limit", type=int, help="read only the first N messages")
    args = parser.parse_args()
    if not args.embedded and not (args.judge and args.model):
        parser.error("give --judge URL --model M, or --embedded")
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()][: args.limit]
    started = time.monotonic()
    if args.embedded:
        answers, model = asyncio.run(with_embedded(rows))
    else:
        model = args.model
        answers = asyncio.run(judged(rows, Endpoint(base_url=args.judge, model=model, stream=False, temperature=0.0)))
    seconds = time.monotonic() - started
    lexical = [claim_of(row["message"]) for row in rows]
    judge, detector = figures(list(zip(rows, answers, strict=True))), figures(list(zip(rows, lexical, strict=True)))
    agree = sum(a is not None and (a.status, a.tests_claim) == (b.status, b.tests_claim)
                for a, b in zip(answers, lexical, strict=True))
    unread = sum(answer is None for answer in answers)
    print(f"{len(rows)} closing messages, judge {model}, {seconds:.0f} s; precision / recall:")
    print(f"{'class':<10} {'judge':>13} {'lexical':>13}")
    for name in judge:
        print(f"{name:<10} {judge[name]:>13} {detector[name]:>13}")
    print(f"judge and lexical reading agree (status and tests claim) on {agree} of {len(rows)}; "
          f"{unread} answers held no readable verdict")


if __name__ == "__main__":
    main()
