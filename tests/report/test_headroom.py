"""Headroom against the stream watchdogs, from synthetic calls.csv files: the longest waits beside the stale budget
and the agent's own watchdog, and the turns that prefilled their whole history again, counted and listed (unknown
when the server never reported cached tokens)."""

import json
from pathlib import Path

import pytest

from soak.record.info import Host
from soak.record.schema import CallRow
from soak.report.render import render_report
from tests.synth import START, calls_run

ATTEMPT = {"task_id": "lru-cache", "cycle": 0}
OTHER = {"task_id": "two-fer", "cycle": 1}


def call(where: dict, index: int, role: str = "orchestrator", *, prompt: int = 3000, cached: int | None = 0,
         first_byte: float = 1.0, gap: float | None = 0.2, status: str = "ok") -> CallRow:
    return CallRow(run_id="calls", **where, call_index=index, role=role, endpoint="default", model="m", stream=True,
                   started_at=START + index, first_byte_s=first_byte, max_gap_s=gap, duration_s=first_byte + 5,
                   prompt_tokens=prompt, cached_tokens=cached, status=status)


def conversation(cached: bool = True) -> list[CallRow]:
    """Two attempts. Re-prefilled: lru-cache's call 2 and two-fer's call 1. Not: a first call, a turn served from
    the cache, a short prompt, the coder's first answered call (after a failed one), a turn without cached tokens."""
    def hit(tokens: int | None) -> int | None:
        return tokens if cached else None

    return [
        call(ATTEMPT, 0, cached=hit(0)),
        call(ATTEMPT, 1, prompt=4000, cached=hit(3000)),
        call(ATTEMPT, 2, prompt=5000, cached=hit(100), first_byte=40.0),
        call(ATTEMPT, 3, prompt=1000, cached=hit(0)),
        call(ATTEMPT, 4, "coder", first_byte=0.0, gap=None, status="connection", prompt=None, cached=None),
        call(ATTEMPT, 5, "coder", cached=hit(0), gap=31.5),
        call(ATTEMPT, 6, "coder", prompt=3500, cached=None),
        call(OTHER, 0, cached=hit(0)),
        call(OTHER, 1, cached=hit(10), first_byte=142.0),
    ]


def report(tmp_path: Path, calls: list[CallRow], **run) -> tuple[dict, str]:
    folder = calls_run(tmp_path / "data", calls, **run)
    page = render_report([folder], tmp_path / "report")
    return json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0], page.read_text()


def test_re_prefilled_turns_are_counted_and_listed_longest_wait_first(tmp_path):
    summary, page = report(tmp_path, conversation())
    assert summary["reprefilled"] == {"count": 2, "of": 3, "unreported": 1, "min_prompt_tokens": 2048, "max_hit": 0.1}
    assert ("re-prefilled turns: 2 of 3 later turns with a prompt of 2,048+ tokens got under 10% of it from the prefix "
            "cache; 1 more without cached tokens") in summary["verdicts"]
    section = page[page.index("<h2>Re-prefilled turns: 2</h2>"):page.index("<h2>Tool-call integrity")]
    rows = section.split("<tr>")[2:]
    assert len(rows) == 2
    assert 'href="attempts/calls/two-fer/1.html">two-fer</a>' in rows[0] and "142 s" in rows[0]
    assert 'href="attempts/calls/lru-cache/0.html">lru-cache</a>' in rows[1] and "5,000" in rows[1]
    assert "40 s" in rows[1] and "2.0 %" in rows[1]
    assert "1 more such turns came without cached tokens" in section


def test_re_prefilled_turns_are_unknown_when_the_server_never_reported_cached_tokens(tmp_path):
    summary, page = report(tmp_path, conversation(cached=False))
    assert summary["reprefilled"]["count"] is None and summary["reprefilled"]["unreported"] == 4
    assert any(line.startswith("re-prefilled turns: unknown (the server reported no cached tokens")
               for line in summary["verdicts"]), summary["verdicts"]
    section = page[page.index("<h2>Re-prefilled turns: unknown</h2>"):page.index("<h2>Tool-call integrity")]
    assert "cannot be told" in section and "<table>" not in section


def test_the_longest_waits_stand_beside_the_agents_watchdog_and_the_stale_budget(tmp_path):
    summary, page = report(tmp_path, conversation(), host=Host(agent_name="hermes", agent_stale_seconds=180))
    headroom = summary["headroom"]
    assert headroom["first_byte"] == {"seconds": 142.0, **OTHER, "repeat": 1, "session": 0, "call_index": 1,
                                      "role": "orchestrator", "share": pytest.approx(142 / 180), "tight": True}
    assert (headroom["gap"]["seconds"], headroom["gap"]["call_index"], headroom["gap"]["tight"]) == (31.5, 5, False)
    assert (headroom["stale_budget"], headroom["agent"], headroom["agent_watchdog"]) == (360, "hermes", 180)
    lines = summary["verdicts"]
    assert ("longest wait for a first byte: 142 s of hermes' 180 s watchdog and of the 360 s stale budget "
            "(two-fer cycle 1, call 1, orchestrator)") in lines
    assert ("longest gap between bytes: 31.5 s of hermes' 180 s watchdog and of the 360 s stale budget "
            "(lru-cache cycle 0, call 5, coder)") in lines
    assert ("little headroom: the longest wait for a first byte took 79% of hermes' 180 s watchdog (over 50%); a "
            "longer history or an evicted prefix cache could get a stream cut") in lines
    assert not any(line.startswith("little headroom: the longest gap") for line in lines)
    assert ('<div class="figure alarm"><b>142 s</b><span>longest wait for a first byte of hermes&#39; 180 s '
            'watchdog</span>') in page


def test_without_an_agent_watchdog_the_waits_stand_beside_the_stale_budget_alone(tmp_path):
    quick = [call(ATTEMPT, 0, first_byte=2.5), call(ATTEMPT, 1, first_byte=0.5, status="stalled", gap=None)]
    summary, _ = report(tmp_path, quick, stale_seconds=30)
    assert summary["headroom"]["first_byte"]["seconds"] == 2.5 and not summary["headroom"]["tight"]
    lines = summary["verdicts"]
    assert ("longest wait for a first byte: 2.5 s of the 30 s stale budget (lru-cache cycle 0, call 0, "
            "orchestrator)") in lines
    assert "calls cut for silence (status stalled) after the stale budget: 1" in lines
    assert not any(line.startswith("little headroom") for line in lines)
