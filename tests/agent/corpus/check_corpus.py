#!/usr/bin/env python3
"""Validate closing_messages.jsonl (stdlib only) and print summary counts.

Usage: python3 tests/agent/corpus/check_corpus.py [path/to/closing_messages.jsonl]
Exit status 0 when valid, 1 otherwise.
"""
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "closing_messages.jsonl")

REQUIRED = ["id", "agent", "source", "form", "message", "status", "tests_claim", "split"]
OPTIONAL = {"note", "trimmed"}
FORMS = {"text", "json", "submission"}
STATUSES = {"done", "partial", "blocked", "none"}
SPLITS = {"tune", "held_out"}
MIN_LINES = 150
MIN_AGENTS = 5
MAX_MESSAGE = 4000


def main() -> int:
    errors = []
    rows = []
    with open(PATH, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                errors.append(f"line {n}: blank line")
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(f"line {n}: invalid JSON ({exc})")
                continue
            rows.append((n, row))

    ids = collections.Counter()
    for n, row in rows:
        for key in REQUIRED:
            if key not in row:
                errors.append(f"line {n}: missing field {key!r}")
        extra = set(row) - set(REQUIRED) - OPTIONAL
        if extra:
            errors.append(f"line {n}: unexpected fields {sorted(extra)}")
        for key in ("id", "agent", "source", "message"):
            if key in row and (not isinstance(row[key], str) or not row[key].strip()):
                errors.append(f"line {n}: {key!r} must be a non-empty string")
        if row.get("form") not in FORMS:
            errors.append(f"line {n}: bad form {row.get('form')!r}")
        if row.get("status") not in STATUSES:
            errors.append(f"line {n}: bad status {row.get('status')!r}")
        if not isinstance(row.get("tests_claim"), bool):
            errors.append(f"line {n}: tests_claim must be a boolean")
        if "note" in row and not isinstance(row["note"], str):
            errors.append(f"line {n}: note must be a string")
        if "trimmed" in row and row["trimmed"] is not True:
            errors.append(f"line {n}: trimmed, when present, must be true")
        msg = row.get("message", "")
        if isinstance(msg, str) and len(msg) > MAX_MESSAGE and not row.get("trimmed"):
            errors.append(f"line {n}: message longer than {MAX_MESSAGE} chars but not marked trimmed")
        expected = "held_out" if n % 4 == 0 else "tune"
        if row.get("split") != expected:
            errors.append(f"line {n}: split is {row.get('split')!r}, expected {expected!r} "
                          "(every 4th line is held_out)")
        ids[row.get("id")] += 1

    for ident, count in ids.items():
        if count > 1:
            errors.append(f"duplicate id {ident!r} ({count} times)")

    agents = collections.Counter(r["agent"] for _, r in rows if "agent" in r)
    if len(rows) < MIN_LINES:
        errors.append(f"only {len(rows)} lines (need >= {MIN_LINES})")
    if len(agents) < MIN_AGENTS:
        errors.append(f"only {len(agents)} agents (need >= {MIN_AGENTS})")

    def show(title, counter):
        print(title)
        for key, value in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            print(f"  {key!s:<16} {value}")

    print(f"file: {PATH}")
    print(f"lines: {len(rows)}")
    show("per agent:", agents)
    show("per status:", collections.Counter(r.get("status") for _, r in rows))
    show("per split:", collections.Counter(r.get("split") for _, r in rows))
    show("tests_claim:", collections.Counter(r.get("tests_claim") for _, r in rows))
    show("per form:", collections.Counter(r.get("form") for _, r in rows))
    show("held_out status:", collections.Counter(r.get("status") for _, r in rows if r.get("split") == "held_out"))
    print("trimmed:", sum(1 for _, r in rows if r.get("trimmed")))

    if errors:
        print(f"\nINVALID: {len(errors)} problem(s)")
        for err in errors[:50]:
            print("  -", err)
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
