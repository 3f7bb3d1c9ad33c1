"""The result channel as the harness reads it: numbered events from the pytest plugin inside the jail, each under an
HMAC keyed by the run's secret (soak.sandbox.plugin.channel writes them), checked line by line: only what the recorder
wrote, in its order, one result per test and phase."""

import hashlib
import hmac
import json
from dataclasses import dataclass, field


@dataclass
class Events:
    """What the result channel said, checked line by line: only what the recorder wrote, in its order."""

    started: bool = False
    collected: list[str] | None = None
    prints: dict[str, str] = field(default_factory=dict)
    collection_errors: list[dict[str, str]] = field(default_factory=list)
    reports: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    first_failure: dict[str, str] | None = None
    exitstatus: int | None = None
    running_test: str = ""
    evidence: list[str] = field(default_factory=list)
    """Tampering: what the recorder caught in the act, and what the channel itself shows (forged or disordered
    lines, duplicate or contradicting results)."""

    def passed(self) -> set[str]:
        """Tests whose setup, call and teardown all passed."""
        good = {node for (node, when), r in self.reports.items() if when == "call" and r["outcome"] == "passed"}
        bad = {node for (node, _), r in self.reports.items() if r["outcome"] != "passed"}
        return good - bad

    def failed(self) -> bool:
        return any(r["outcome"] == "failed" for r in self.reports.values())


def sign(secret: bytes, payload: str) -> str:
    """The MAC of one channel line (soak.sandbox.plugin.channel.Channel computes the same)."""
    return hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()


def read_events(data: bytes, secret: bytes) -> Events:
    """Parse the channel; the first line the recorder did not write (bad MAC, out of order) ends what is believed."""
    found = Events()

    def wrong(text: str) -> None:
        found.evidence.append(f"result channel: {text}")

    lines = data.split(b"\n")
    for seq, raw in enumerate(lines[:-1]):  # The last piece is empty, or a line cut off when the process died.
        mac, _, payload = raw.decode(errors="replace").partition(" ")
        try:
            event = json.loads(payload)
            valid = hmac.compare_digest(mac, sign(secret, payload)) and isinstance(event, dict)
        except ValueError:
            valid = False
        if not valid:
            wrong(f"line {seq + 1} was not written by the recorder")
            break
        if event.get("seq") != seq:
            wrong(f"line {seq + 1} out of order (seq {event.get('seq')!r})")
            break
        kind = event.get("event")
        try:
            if found.exitstatus is not None:
                wrong(f"a {kind!r} event after the session finished")
            elif kind == "start":
                if found.started:
                    wrong("a second session start")
                found.started = True
            elif not found.started:
                wrong(f"a {kind!r} event before the session started")
            elif kind == "collect_error":
                if found.collected is not None:
                    wrong("a collection error after the collection finished")
                found.collection_errors.append({k: str(event[k]) for k in ("nodeid", "kind", "tail")})
            elif kind == "collected":
                if found.collected is not None:
                    wrong("a second collection")
                found.collected = [str(node) for node in event["items"]]
                found.prints = {str(k): str(v) for k, v in event["prints"].items()}
            elif kind == "begin":
                if found.collected is None:
                    wrong("a test began before the collection finished")
                found.running_test = str(event["nodeid"])
            elif kind == "report":
                node, when = str(event["nodeid"]), str(event["when"])
                if found.collected is None or node not in found.collected:
                    wrong(f"a result for {node}, which was not collected")
                elif (node, when) in found.reports:
                    wrong(f"a second {when} result for {node}")
                report = {k: str(event[k]) for k in ("outcome", "kind", "tail")}
                found.reports.setdefault((node, when), report)
                if report["outcome"] == "failed" and found.first_failure is None:
                    found.first_failure = {"nodeid": node, "kind": report["kind"], "tail": report["tail"]}
                if when == "teardown":
                    found.running_test = ""
            elif kind == "tampered":
                found.evidence.extend(str(line) for line in event["evidence"])
            elif kind == "finish":
                found.exitstatus = int(event["exitstatus"])
            else:
                wrong(f"an unknown event {kind!r}")
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            wrong(f"a malformed {kind!r} event ({type(error).__name__})")
    return found
