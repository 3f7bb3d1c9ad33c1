"""The rounds of a folder written before rounds.csv (schema version 5 and older), worked out as those versions' readers
did: from what pytest printed into each round folder's test output, and the solution kept beside it. Only such a
folder is read this way; a newer one's rounds are the judge's own (rounds.csv)."""

import hashlib
import re
from pathlib import Path

from soak.record.layout import AttemptLayout
from soak.record.schema import RoundRow, TaskRow

SUMMARY = re.compile(r"^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected)"
                     r"(?:, )?)+) in [\d.]+s", re.M)
FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def test_counts(output: str) -> tuple[int, int] | None:
    """(passed, total) from pytest's last summary line; None when there is none (a crash, a timeout)."""
    found = SUMMARY.findall(output)
    if not found:
        return None
    counts = {word.rstrip("s"): int(n) for n, word in re.findall(r"(\d+) (\w+)", found[-1])}
    passed = counts.get("passed", 0)
    return passed, passed + counts.get("failed", 0) + counts.get("error", 0)


def failing_tests(output: str) -> list[str]:
    """Test ids from pytest's short summary (`FAILED a.py::T::test_x - ...`), in order, once each."""
    return list(dict.fromkeys(FAILED_LINE.findall(output)))


def kept_solution(folder: Path) -> Path | None:
    """The solution a round folder keeps: its Python file (the first by name if there are several)."""
    return min((p for p in folder.glob("*.py") if p.is_file()), default=None)


def derived_rounds(row: TaskRow, layout: AttemptLayout) -> list[RoundRow]:
    """A row per round folder that kept a test output (a judged round), marked derived."""
    rounds: list[RoundRow] = []
    previous = None
    for number in layout.rounds():
        try:
            output = layout.test_output(number).read_text(errors="replace")
        except OSError:
            continue
        passed, total = test_counts(output) or (0, 0)
        solution = kept_solution(layout.round(number))
        data = solution.read_bytes() if solution is not None else b""
        digest = hashlib.sha256(data).hexdigest() if solution is not None else ""
        rounds.append(RoundRow(
            schema_version=row.schema_version, run_id=row.run_id, task_id=row.task_id, cycle=row.cycle,
            repeat=row.repeat,
            session=row.session, round=number, result="pass" if total and passed == total else "fail",
            tests_passed=passed, tests_total=total, failing_tests="\n".join(failing_tests(output)),
            entry_sha256=digest, entry_bytes=len(data), noop=bool(digest) and digest == previous, derived=True,
        ))
        previous = digest
    return rounds
