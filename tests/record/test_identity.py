"""An attempt is named by one value, AttemptId: its identity is never spelled again as a tuple of its fields, a tuple
type, the identity columns read one by one into a key, or a helper of its own; and the rows that carry it keep the
columns they always had."""

import re

import pytest

from soak.record.identity import ATTEMPT_COLUMNS, AttemptId
from soak.record.schema import CallRow, RoundRow, TaskRow
from tests.helpers import REPO

SPELLINGS = {
    "a tuple type of the identity": re.compile(
        r"tuple\[(?=[^\]]*\bstr\b)(?=[^\]]*int, int)(?:str|int)(?:, (?:str|int))+\]"),
    "a tuple of identity fields": re.compile(
        r"(?<![\w.])\(\s*(?:\*?[\w.]+\.)?(?:task_id|task\.id|task|cycle|session)\s*,\s*(?:[\w.]+\.)?"
        r"(?:cycle|repeat|session|task_id|task\.id)\b"),
    "identity columns read one by one": re.compile(
        r"(?:str|int)\(\w+\[\"(?:task_id|cycle)\"\].*int\(\w+\[\"(?:cycle|repeat)\"\]"
        r"|zip\(\w+\[\"task_id\"\], \w+\[\"cycle\"\]"),
    "a helper or alias of its own": re.compile(r"\b(?:attempt_keys?|attempt_name|slot_of)\b|^(?:Slot|Key) = "),
}
"""How the identity was spelled before AttemptId (each seen in OLD_SPELLINGS)."""
OLD_SPELLINGS = [
    "Key = tuple[str, int, int, int, str]",
    "    return str(row[\"task_id\"]), int(row[\"cycle\"]), int(row[\"repeat\"]), int(row[\"session\"])",
    "        key, layout = (task_id, cycle, repeat, row.session, row.node), self.layout.attempt(task_id, cycle)",
    "        superseded = self.retried.pop((cycle, repeat, task.id), None)",
    "        started, slot, node_id = time.time(), (context.session, context.cycle, context.repeat, task.id), \"\"",
    "    attempts: set[tuple[int, str, int, int]] = field(default_factory=set)",
    "        self.lost: dict[tuple[int, int, int, str], list[str]] = {}",
    "        key = (row.task_id, row.cycle, row.repeat)",
    "                for t, c, r in zip(tasks[\"task_id\"], tasks[\"cycle\"], tasks[\"repeat\"], strict=True)]",
    "        key = attempt_name(task.id, cycle, repeat)",
    "Slot = tuple[int, int, str]",
]
"""Lines of soak before AttemptId, one of each way it was spelled."""


def spellings(line: str) -> list[str]:
    return [what for what, pattern in SPELLINGS.items() if pattern.search(line)]


@pytest.mark.parametrize("line", OLD_SPELLINGS)
def test_each_old_spelling_of_the_identity_is_caught(line: str):
    assert spellings(line), line


def test_the_identity_is_spelled_only_as_an_attempt_id():
    found = []
    for path in sorted((REPO / "soak").rglob("*.py")):
        if path == REPO / "soak" / "record" / "identity.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(REPO)}:{number}: {what}: {line.strip()}" for what in spellings(line)]
    assert not found, "name the attempt by its AttemptId:\n" + "\n".join(found)


def test_the_rows_keep_their_columns_in_their_order():
    """The shared identity columns moved into one base (AttemptRow); no CSV's header changed."""
    identity = list(ATTEMPT_COLUMNS)
    assert TaskRow.columns()[:7] == ["schema_version", "run_id", "cycle", "repeat", "session", "node", "task_id"]
    assert TaskRow.columns()[7:9] == ["suite", "route"]
    assert RoundRow.columns()[:8] == ["schema_version", "run_id", *identity, "round"]
    assert CallRow.columns()[:9] == ["schema_version", "run_id", *identity, "call_index", "retry"]
    assert all(sorted(model.columns()) == sorted(model.model_fields) for model in (TaskRow, RoundRow, CallRow))


def test_a_row_names_its_attempt_and_an_attempt_names_its_folder():
    row = CallRow(run_id="r", **AttemptId("t", 2, 3, 1, "n/1").row_fields(), call_index=0, role="coder",
                  endpoint="e", model="m", stream=True, started_at=0.0, duration_s=0.0)
    assert row.attempt == AttemptId("t", 2, 3, 1, "n/1") and row.attempt.slot == AttemptId("t", 2, 3)
    assert [AttemptId("t", 2).name, row.attempt.name] == ["t/2", "t/2-3"]
    assert AttemptId.named("t/2-3") == row.attempt.slot and AttemptId.named("t/x") == AttemptId("t", 0)
    assert AttemptId.of(row.model_dump()) == row.attempt
    assert repr(AttemptId.of({**row.model_dump(), "cycle": 2.0}).cycle) == "2"  # a number read back as a float
