"""Where everything lives inside a run folder: one place names the paths, every stage asks it."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AttemptLayout:
    """`work/<task>/<cycle>/` of one attempt: the workspace the solution is written in, the transcript, and a folder
    per judged round (the solution, the test output, an external agent's own files)."""

    path: Path

    @property
    def workspace(self) -> Path:
        return self.path / "workspace"

    @property
    def transcript(self) -> Path:
        return self.path / "transcript.jsonl"

    def round(self, number: int) -> Path:
        return self.path / f"round-{number}"

    def agent_files(self, number: int) -> Path:
        """What an external agent left in round `number`: its output and the transcript files it keeps."""
        return self.round(number) / "agent"

    def rounds(self) -> list[int]:
        """The numbers of the rounds that left a folder, in order."""
        if not self.path.is_dir():
            return []
        return sorted(int(p.name[6:]) for p in self.path.glob("round-*") if p.name[6:].isdigit())


@dataclass(frozen=True)
class RunLayout:
    """`data/<run_id>/`: run.json, the four CSVs and the attempts' work folders."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def info(self) -> Path:
        return self.path / "run.json"

    @property
    def tasks(self) -> Path:
        return self.path / "tasks.csv"

    @property
    def calls(self) -> Path:
        return self.path / "calls.csv"

    @property
    def events(self) -> Path:
        return self.path / "events.csv"

    @property
    def samples(self) -> Path:
        return self.path / "samples.csv"

    @property
    def work(self) -> Path:
        return self.path / "work"

    def attempt(self, task_id: str, cycle: int) -> AttemptLayout:
        return AttemptLayout(self.work / task_id / str(cycle))

    def transcripts(self) -> list[Path]:
        """Every attempt's transcript in the run."""
        return sorted(self.work.glob("*/*/transcript.jsonl"))
