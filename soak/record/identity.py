"""One attempt's identity, the one value every stage names an attempt by: in keys, in slots, in folder names and in
the identity columns of tasks.csv, rounds.csv and calls.csv."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

ATTEMPT_COLUMNS = ("task_id", "cycle", "repeat", "session", "node")
"""AttemptId's columns, by name."""
SLOT_COLUMNS = ATTEMPT_COLUMNS[:3]
"""The columns of an attempt's slot (AttemptId.slot): the rows that share them are tries of one attempt."""


class AttemptColumns(TypedDict):
    """The identity columns of a row of tasks.csv, rounds.csv or calls.csv."""

    task_id: str
    cycle: int
    repeat: int
    session: int
    node: str


@dataclass(frozen=True, slots=True)
class AttemptId:
    """Which try of which attempt: the task, its cycle and repeat (the attempt's slot in the night, whatever its
    session) and the session and cluster node that ran this try (a retry after a resume or a lost node differs only
    there)."""

    task_id: str
    cycle: int
    repeat: int = 1
    session: int = 0
    node: str = ""

    @classmethod
    def of(cls, record: Mapping[Any, Any]) -> "AttemptId":
        """The identity of a row read as a dict (soak.record.read.records): numbers may come back as floats."""
        return cls(str(record["task_id"]), int(record["cycle"]), int(record["repeat"]), int(record["session"]),
                   str(record["node"] or ""))

    @classmethod
    def named(cls, name: str) -> "AttemptId":
        """The slot an attempt's `name` names (as run.json's list of attempts in flight holds it); a part it cannot
        read is cycle 0 or the first repeat."""
        task_id, _, place = name.rpartition("/")
        cycle, _, repeat = place.partition("-")
        return cls(task_id or name, int(cycle) if cycle.isdigit() else 0, int(repeat) if repeat.isdigit() else 1)

    @property
    def slot(self) -> "AttemptId":
        """The attempt whatever try: its place in the night, which a later try replaces (the supersede rule)."""
        return AttemptId(self.task_id, self.cycle, self.repeat)

    @property
    def name(self) -> str:
        """`<task>/<cycle>`, or `<task>/<cycle>-<repeat>` for a later repeat: the attempt's folder in the run folder,
        its name in the heartbeat's list of attempts in flight and in the export."""
        return f"{self.task_id}/{self.cycle}" if self.repeat == 1 else f"{self.task_id}/{self.cycle}-{self.repeat}"

    def row_fields(self) -> AttemptColumns:
        """The identity columns of the rows this try writes."""
        return AttemptColumns(task_id=self.task_id, cycle=self.cycle, repeat=self.repeat, session=self.session,
                              node=self.node)
