"""Where everything lives inside a run folder: one place names the paths, every stage asks it."""

from dataclasses import dataclass
from pathlib import Path

from soak.record.identity import AttemptId

ROUND_PREFIX = "round-"
TRANSCRIPT = "transcript.jsonl"
TEST_OUTPUT = "test_output.txt"
"""What the tests printed in a round, kept in the round's folder by the judge (soak.sandbox.judge.keep)."""


@dataclass(frozen=True)
class AttemptLayout:
    """`work/<task>/<cycle>/` (`<cycle>-<repeat>/` for a later repeat) of one attempt: the workspace the solution is
    written in, the transcript, and a folder per judged round (the solution, the test output, an external agent's own
    files)."""

    path: Path

    @property
    def workspace(self) -> Path:
        return self.path / "workspace"

    @property
    def transcript(self) -> Path:
        return self.path / TRANSCRIPT

    def round(self, number: int) -> Path:
        return self.path / f"{ROUND_PREFIX}{number}"

    def test_output(self, number: int) -> Path:
        """What the tests printed in round `number`."""
        return self.round(number) / TEST_OUTPUT

    def closing(self, number: int) -> Path:
        """The closing message the claim of round `number` was read from (soak.agent.finish)."""
        return self.round(number) / "closing.txt"

    def agent_files(self, number: int) -> Path:
        """What an external agent left in round `number`: its output and the transcript files it keeps."""
        return self.round(number) / "agent"

    def agent_output(self, number: int) -> Path:
        """What an external agent printed in round `number` (written when its run ends)."""
        return self.agent_files(number) / "output.txt"

    def rounds(self) -> list[int]:
        """The numbers of the rounds that left a folder, in order."""
        if not self.path.is_dir():
            return []
        numbers = (p.name.removeprefix(ROUND_PREFIX) for p in self.path.glob(f"{ROUND_PREFIX}*"))
        return sorted(int(n) for n in numbers if n.isdigit())


@dataclass(frozen=True)
class RunLayout:
    """`data/<run_id>/`: run.json, the five CSVs, the attempts' work folders and the runner's own files."""

    path: Path

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
    def rounds(self) -> Path:
        return self.path / "rounds.csv"

    @property
    def events(self) -> Path:
        return self.path / "events.csv"

    @property
    def samples(self) -> Path:
        return self.path / "samples.csv"

    @property
    def work(self) -> Path:
        return self.path / "work"

    @property
    def pid(self) -> Path:
        """The running session's pid and process start time (a stale one is told apart by the latter)."""
        return self.path / "runner.pid"

    @property
    def log(self) -> Path:
        """A detached run's output."""
        return self.path / "runner.log"

    @property
    def server_logs(self) -> Path:
        """The output of the servers the run started."""
        return self.path / "logs"

    @property
    def gates(self) -> Path:
        """A sweep configuration's gate results, probed before its first attempt."""
        return self.path / "gates.json"

    def is_run(self) -> bool:
        """run.json or tasks.csv is there (a run whose run.json is lost is still read)."""
        return self.info.exists() or self.tasks.exists()

    def attempt(self, attempt: AttemptId) -> AttemptLayout:
        """The folder of `attempt`'s slot: every try of it writes there."""
        return AttemptLayout(self.work / attempt.name)

    def transcripts(self) -> list[Path]:
        """Every attempt's transcript in the run."""
        return sorted(self.work.glob(f"*/*/{TRANSCRIPT}"))
