"""A chaos night: `soak run` on `soak sim` (started and supervised as a `[[stack.servers]]` server) while faults
strike at moments drawn from a seed; then a count, per kind of fault, of what the run folder lost, recorded twice or
charged to the wrong side.

    .venv/bin/python bench/chaos_night.py --hours 8 --faults 20 --seed 1 --out bench/results
    .venv/bin/python bench/chaos_night.py --minutes 3 --faults 6 --timings fast

The kinds of fault, each logged with its wall-clock start and end (its window):

- `soak_kill`: `kill -9` of soak itself, then `soak run --resume`; the window ends at the resumed session's `resume`
  event (a `resume` that never comes: not survived).
- `server_kill`: `kill -9` of the sim's process group; the window ends at the supervisor's next `up` event.
- `server_stop`: SIGSTOP of the sim past the stream-stale budget (`[budgets] stale_seconds`), then SIGCONT; the
  window is the stop.
- `sim_faults`: the sim's own faults, 5xx bursts (500, 503, 500 on three requests in a row) and dropped streams, at
  request numbers drawn from the seed and written into a scenario of the night's own. The sim fires them, so their
  times are read back from calls.csv: a try answered 5xx, or one failed with another stack status
  (soak.llm.client.RETRYABLE) outside every other fault's window (plus the stale budget), is the sim's; such tries
  less than `SIM_GAP` s apart are one fault, named by what its tries show (the sim's count of requests restarts with a
  server killed before it saved it, so a fault may fire again, and the log does not pair them with the plan).
- `disk_full`: the run folder's filesystem full for a while: the data dir is a tmpfs this bench mounts (root only;
  elsewhere the kind is skipped with the reason printed), filled by a filler file, which is deleted at the window's
  end.

The rules, read from the run folder's tables after the night (its CSVs read as written, no repair):

- An attempt is a slot (task_id, cycle, repeat) tried in one session; its row in tasks.csv is its record. An attempt
  *started* if calls.csv holds a try of it or its work folder (work/<task>/<cycle>[-<repeat>]) exists.
- **Lost**: a started slot with no tasks.csv row in any session. An attempt cut short by `kill -9` leaves calls and no
  row of its session; it is not lost when a later session redoes the slot (soak redoes it unasked).
- **Twice**: two rows of one slot that both finished it (neither `cancelled` nor `node_lost`, the outcomes soak runs
  again), in one session or two, or one try's row written twice (same attempt, same start). A try cut short (by a
  signal, a lost node or a full disk) and its redo are two rows, once each.
- **Misattributed**: the sim's coder writes every task's reference (p_correct = p_fix = 1, no tool-call faults, no
  canaries), so a task's outcome is a constant of the night: its *expected* outcome is the one most of its
  attempts that no fault window touched ended with (`pass` where none was untouched). Then
  - a model outcome (soak.record.schema.MODEL_OUTCOMES) other than the task's expected one is a model failure that was
    the stack's, the disk's or soak's;
  - `infra_error` or `agent_error` (charged to the stack) on an attempt none of whose calls failed with a stack status
    was the agent's or the model's (or soak's own);
  - `harness_error` is always wrong: a fault of the stack or the disk is not a bug of soak's.
  `cancelled` charges no one.
- Each anomaly goes to the last fault whose window overlaps the attempt's time (its row's start to end; a lost slot's
  calls; `RECORDING_SECONDS` past the end, while its row is written): the one in force nearest to when its outcome
  was decided. One that overlaps none is counted in the row
  `none`.
- **Survived**: soak did not exit on its own between the fault's start and the next fault's start (or the night's
  end), the fault's recovery came (its window ended), and an attempt that started after the window ended passed; a
  full disk must also leave no partial CSV row.
- **Torn**: the first resume after the fault cut torn rows off a CSV (its `resume` event says so). After `kill -9` of
  soak that is a row cut mid-write and repaired, as designed; after a full disk it is a partial row soak wrote.

Beside the table: CSV rows that do not parse against their header (a torn row left in a finished night), tracebacks in
soak's output, and harness RSS: soak's own process (not its test runs, not the server), sampled from outside every
`sample_seconds`; `growth after the first hour` is the last hour's median minus the first hour's last sample (the
first eighth of the night stands for the first hour on a shorter one), per session (a resume is a new process), the
largest over the sessions that lasted at least two such hours.
"""

import argparse
import contextlib
import csv
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil
from tenacity import Retrying, retry_if_exception_type, retry_if_not_result, stop_after_delay, wait_fixed

from soak.files import read_process
from soak.llm.client import RETRYABLE
from soak.night.loop import REDONE
from soak.record.schema import MODEL_OUTCOMES
from soak.stack.servers import free_port

REPO = Path(__file__).resolve().parents[1]
KINDS = ("soak_kill", "server_kill", "server_stop", "sim_faults", "disk_full")
STACK_SIDE = ("infra_error", "agent_error")
SIM_GAP = 10.0
"""Seconds between two failed tries of the sim's beyond which they are two faults (a burst's retries back off 1, 2
and 4 s)."""
RECORDING_SECONDS = 2.0
"""An attempt's row is written just after its end: a fault this soon after the end can still touch its record."""
MB = 2**20
RUN_ID = "chaos"
T = TypeVar("T")


@dataclass(frozen=True)
class Profile:
    """How fast the sim answers and how long the timed faults last."""

    ttft: tuple[float, float]
    decode: tuple[float, float]
    stale_seconds: float
    """`[budgets] stale_seconds`: the stop outlasts it, so streams in flight are cut as stalled and retried."""
    stop_seconds: float
    disk_full_seconds: float
    health_interval: float
    calls_per_second: float
    """A low guess of the night's call rate: where the sim's faults are placed, by request number."""
    settle_seconds: float
    """The least time between one fault's end and the next one's start."""
    concurrency: int
    disk_mb: int
    """The run folder's tmpfs: the night's folder plus the room soak waits to find free before it goes on
    (soak.night.room.roomy: 64 MiB, or a twentieth of a smaller disk)."""
    sample_seconds: float


PROFILES = {
    "realistic": Profile(ttft=(0.2, 1.0), decode=(30, 80), stale_seconds=60, stop_seconds=90, disk_full_seconds=60,
                         health_interval=2, calls_per_second=0.3, settle_seconds=60, concurrency=4, disk_mb=1024,
                         sample_seconds=30),
    "fast": Profile(ttft=(0.01, 0.03), decode=(2000, 2000), stale_seconds=2, stop_seconds=4, disk_full_seconds=6,
                    health_interval=0.3, calls_per_second=4, settle_seconds=3, concurrency=2, disk_mb=256,
                    sample_seconds=1),
}
"""realistic: TTFT 0.2-1 s, decode 30-80 tok/s, for long nights; fast: for the test's few minutes on 2 cores."""


@dataclass
class Fault:
    kind: str
    planned_s: float
    """Seconds after the night's start the seed put it (a sim fault: where its request number was aimed)."""
    at: float = 0.0
    until: float = 0.0
    detail: str = ""
    recovered: bool = True
    survived: bool | None = None
    torn: str = ""
    """What the next resume cut as torn rows (its `resume` event's words), "" when none."""
    note: str = ""


@dataclass
class Night:
    """What the bench saw and read: the fault log, soak's exits, the RSS samples and the tallies."""

    run_folder: Path
    faults: list[Fault] = field(default_factory=list)
    started: float = 0.0
    """When the first session started: the fault log's times count from here."""
    exits: list[dict[str, Any]] = field(default_factory=list)
    """soak's exits that were not the bench's doing (time, code)."""
    rss: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, pid, bytes) of soak's own process."""
    free: list[tuple[float, int]] = field(default_factory=list)
    """(time, free bytes) of the run folder's tmpfs."""
    skipped: dict[str, str] = field(default_factory=dict)
    table: dict[str, dict[str, int]] = field(default_factory=dict)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    torn_rows: dict[str, int] = field(default_factory=dict)
    tracebacks: int = 0
    attempts: int = 0


def until(condition: Callable[[], T], timeout: float, interval: float = 0.2) -> T | None:
    """The first truthy `condition()` within `timeout` s (a read that raises OSError or ValueError mid-write is
    tried again), else None."""
    return Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(interval),
                    retry=retry_if_not_result(bool) | retry_if_exception_type((OSError, ValueError)),
                    retry_error_callback=lambda _: None)(condition)


def read_table(path: Path) -> tuple[list[dict[str, str]], int]:
    """The rows of a CSV as written, and how many do not fit its header (torn)."""
    if not path.exists():
        return [], 0
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.reader(f))
    if not rows:
        return [], 0
    header, body = rows[0], rows[1:]
    whole = [dict(zip(header, row, strict=True)) for row in body if len(row) == len(header)]
    return whole, len(body) - len(whole)


def plan(seed: int, count: int, length: float, kinds: tuple[str, ...]) -> list[Fault]:
    """`count` faults, every kind once before any twice, at random moments between 10 % and 85 % of the night: one
    per equal slot, so each has room to heal before the next."""
    rng = random.Random(seed)
    order = [kinds[i % len(kinds)] for i in range(count)]
    rng.shuffle(order)
    start, width = 0.1 * length, 0.75 * length / count
    return [Fault(kind, start + (i + rng.uniform(0.0, 0.5)) * width) for i, kind in enumerate(order)]


def scenario(profile: Profile, faults: list[Fault], seed: int) -> str:
    """The sim's scenario: the profile's timing, a coder that writes every reference, and the planned sim faults at
    request numbers (a 5xx burst or a dropped stream, alternately)."""
    lines = ["description = \"The chaos night's stack: always right, faulty at set requests.\"", "", "[timing]",
             f"ttft_seconds = [{profile.ttft[0]}, {profile.ttft[1]}]",
             f"decode_tokens_per_second = [{profile.decode[0]}, {profile.decode[1]}]", "",
             "[coder]", "p_correct = 1.0", "p_fix = 1.0"]
    rng = random.Random(f"{seed}/sim")
    for i, fault in enumerate(f for f in faults if f.kind == "sim_faults"):
        n = 10 + int(fault.planned_s * profile.calls_per_second) + rng.randrange(3)
        shots = [("http_500", [n, n + 2]), ("http_503", [n + 1])] if i % 2 == 0 else [("drop", [n])]
        fault.detail = ("5xx burst" if i % 2 == 0 else "dropped stream") + f" at request {n}"
        for kind, at in shots:
            lines += ["", "[[faults]]", f'kind = "{kind}"', f"at_requests = {at}"]
    return "\n".join(lines) + "\n"


def config(work: Path, profile: Profile, suite: str, seed: int, port: int, scenario_file: Path) -> Path:
    base_url = f"http://127.0.0.1:{port}/v1"
    up = (f"exec {sys.executable} -m soak.cli sim --port {port} --scenario {scenario_file} --seed {seed} "
          f"--suite {suite} --state {work / 'sim-state.json'}")
    path = work / "soak.toml"
    path.write_text(f"""
suite = "{suite}"
seed = {seed}
canary_share = 0
concurrency = {profile.concurrency}
[endpoints.sim]
base_url = "{base_url}"
model = "soak-sim"
[roles]
orchestrator = "sim"
coder = "sim"
[budgets]
stale_seconds = {profile.stale_seconds}
[stack]
health_interval_seconds = {profile.health_interval}
failures_before_down = 2
max_restarts_per_hour = 1000
[[stack.servers]]
name = "sim"
up = "{up}"
base_url = "{base_url}"
start_timeout_seconds = 60
""")
    return path


class Soak:
    """`soak run` in a process of its own, killed and resumed; its output appended to one log."""

    def __init__(self, work: Path, data: Path):
        self.work, self.data = work, data
        self.folder = data / RUN_ID
        self.env = {**os.environ, "SOAK_DATA_DIR": str(data)}
        self.log = work / "soak.log"
        self.process: subprocess.Popen | None = None

    def start(self, *args: str) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "soak.cli", "run", *args, "--quiet"],
                                            env=self.env, cwd=self.work, stdout=log, stderr=subprocess.STDOUT)

    def resume(self) -> None:
        self.start("--resume", RUN_ID)

    def events(self, kind: str) -> list[float]:
        rows, _ = read_table(self.folder / "events.csv")
        return [float(r["at"]) for r in rows if r["kind"] == kind]

    def server(self) -> psutil.Process | None:
        return read_process(self.folder / "logs" / "sim.pid")[0]


class Sampler(threading.Thread):
    """soak's own RSS every `interval` s, whichever session runs, and the free bytes of its tmpfs (the evidence that
    a full disk stayed full)."""

    def __init__(self, soak: Soak, disk: "Disk", interval: float, night: Night):
        super().__init__(daemon=True)
        self.soak, self.disk, self.interval, self.night = soak, disk, interval, night
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            process = self.soak.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(psutil.Error):
                    self.night.rss.append((time.time(), process.pid, psutil.Process(process.pid).memory_info().rss))
            if self.disk.mounted:
                self.night.free.append((time.time(), shutil.disk_usage(self.disk.data).free))


class Disk:
    """The data dir on a tmpfs of its own, filled by a filler file for a while."""

    def __init__(self, data: Path, size_mb: int):
        self.data, self.size_mb = data, size_mb
        self.filler = data / "filler"
        self.mounted = False

    def mount(self) -> str:
        """"" once mounted, else why not (the disk_full kind is then skipped)."""
        self.data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            return "not root: cannot mount a tmpfs for the run folder"
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.data)],
                                capture_output=True, text=True)
        if result.returncode:
            return f"mount -t tmpfs failed: {result.stderr.strip() or result.returncode}"
        self.mounted = True
        return ""

    def fill(self) -> int:
        """Fill the filesystem to the last block; the bytes the filler holds."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, shutil.disk_usage(self.data).free)
            block = b"\0" * 4096
            with contextlib.suppress(OSError):  # ENOSPC ends it: at most a few blocks were left past the fallocate
                while os.write(fd, block):
                    pass
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.data)], check=False)
            self.mounted = False


class ChaosNight:
    """Runs the night: starts soak, strikes each planned fault at its time, resumes soak when it dies."""

    def __init__(self, work: Path, profile: Profile, seconds: float, faults: int, seed: int, suite: str):
        self.work, self.profile, self.seconds = work, profile, seconds
        self.disk = Disk(work / "data", profile.disk_mb)
        self.soak = Soak(work, work / "data")
        why = self.disk.mount()
        kinds = KINDS if not why else tuple(k for k in KINDS if k != "disk_full")
        self.night = Night(self.soak.folder, plan(seed, faults, seconds, kinds))
        if why:
            self.night.skipped["disk_full"] = why
            print(f"disk_full skipped: {why}", flush=True)
        scenario_file = work / "scenario.toml"
        scenario_file.write_text(scenario(profile, self.night.faults, seed))
        self.config = config(work, profile, suite, seed, free_port(), scenario_file)

    def run(self) -> Night:
        sampler = Sampler(self.soak, self.disk, self.profile.sample_seconds, self.night)
        try:
            self.night.started = time.time()
            self.soak.start("--config", str(self.config), "--minutes", f"{self.seconds / 60:g}", "--run-id", RUN_ID)
            sampler.start()
            for fault in self.night.faults:
                if fault.kind != "sim_faults":
                    self.strike(fault)
            self.wait_out()
        finally:
            sampler.done.set()
            self.stop_all()
        kept = self.work / "run"
        shutil.copytree(self.soak.folder, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("filler"))
        self.disk.unmount()
        self.night.run_folder = kept
        self.night.tracebacks = self.soak.log.read_text(errors="replace").count("Traceback (most recent call last)")
        tally(self.night, self.profile)
        return self.night

    def strike(self, fault: Fault) -> None:
        """Wait for the fault's moment (resuming soak if it dies meanwhile), then inject it and wait for its end."""
        last = max((f.until for f in self.night.faults if f.at), default=0.0)
        moment = max(self.night.started + fault.planned_s, last + self.profile.settle_seconds)
        self.wait_for(moment)
        if self.ended():
            fault.note = "the night ended first"
            return
        print(f"{time.strftime('%H:%M:%S')} {fault.kind}", flush=True)
        getattr(self, fault.kind)(fault)
        self.revive(fault)

    def wait_for(self, moment: float) -> None:
        """Until `moment`; a soak that exits meanwhile is resumed (its night is over when it exits 0)."""
        while (left := moment - time.time()) > 0 and not self.ended():
            try:
                self.soak.process.wait(timeout=left)
            except subprocess.TimeoutExpired:
                return
            self.revive(None)

    def ended(self) -> bool:
        return self.soak.process.poll() == 0

    def revive(self, fault: Fault | None) -> None:
        """soak exited on its own (not by this bench, not at its night's end): logged against the fault in hand (or
        the last one) and resumed."""
        code = self.soak.process.poll()
        if code is None or code == 0:
            return
        blamed = fault or next((f for f in reversed(self.night.faults) if f.at), None)
        self.night.exits.append({"at": time.time(), "code": code, "fault": blamed.kind if blamed else ""})
        if blamed:
            blamed.note += f" soak exited {code};"
        if len(self.night.exits) > 20:
            raise RuntimeError(f"soak exited {len(self.night.exits)} times on its own: see {self.soak.log}")
        resumes = len(self.soak.events("resume"))
        self.soak.resume()
        until(lambda: len(self.soak.events("resume")) > resumes, timeout=120)

    def soak_kill(self, fault: Fault) -> None:
        resumes = len(self.soak.events("resume"))
        fault.at = time.time()
        self.soak.process.kill()
        self.soak.process.wait()
        self.soak.resume()
        fault.recovered = bool(until(lambda: len(self.soak.events("resume")) > resumes, timeout=180))
        fault.until = time.time()
        fault.detail = f"session {resumes + 1} resumed"

    def server_kill(self, fault: Fault) -> None:
        server = until(self.soak.server, timeout=120)
        ups = len(self.soak.events("up"))
        fault.at = time.time()
        if server is None:
            fault.recovered, fault.until, fault.detail = False, fault.at, "no live server to kill"
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        fault.recovered = bool(until(lambda: len(self.soak.events("up")) > ups, timeout=300))
        fault.until = time.time()
        fault.detail = f"pid {server.pid}"

    def server_stop(self, fault: Fault) -> None:
        server = until(self.soak.server, timeout=120)
        fault.at = time.time()
        if server is None:
            fault.recovered, fault.until, fault.detail = False, fault.at, "no live server to stop"
            return
        os.killpg(server.pid, signal.SIGSTOP)
        try:
            time.sleep(self.profile.stop_seconds)  # the fault is this long by design
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGCONT)
        fault.until = time.time()
        fault.detail = f"pid {server.pid} stopped {self.profile.stop_seconds:g} s (stale budget " \
                       f"{self.profile.stale_seconds:g} s)"

    def disk_full(self, fault: Fault) -> None:
        fault.at = time.time()
        try:
            held = self.disk.fill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.soak.process.wait(timeout=self.profile.disk_full_seconds)  # the fault is this long by design
        finally:
            self.disk.free()
        fault.until = time.time()
        fault.detail = f"{held / MB:.0f} MiB filler for {fault.until - fault.at:.0f} s"

    def wait_out(self) -> None:
        """The night's end: soak exits 0 when its duration is spent (downtime after a kill does not count)."""
        limit = time.time() + self.seconds + 1800
        while not self.ended():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.soak.process.wait(timeout=max(1.0, limit - time.time()))
            if time.time() > limit:
                raise RuntimeError(f"the night did not end within 30 min of its length: see {self.soak.log}")
            self.revive(None)

    def stop_all(self) -> None:
        """soak (SIGTERM, as `soak stop`), which stops the server it supervises; a server it left is killed."""
        process = self.soak.process
        if process is not None and process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=120)
            if process.poll() is None:
                process.kill()
        if (server := self.soak.server()) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGCONT)
                os.killpg(server.pid, signal.SIGKILL)


# --- the tally ------------------------------------------------------------------------------------------------------

Key = tuple[str, str, str]
"""(task_id, cycle, repeat): a slot."""


def sim_faults(night: Night, calls: list[dict[str, str]], margin: float) -> None:
    """The sim's faults as calls.csv shows them: failed tries of a stack status outside the other faults' windows,
    grouped by time; each planned sim fault takes one, in order, the rest are added."""
    windows = [(f.at, f.until + margin) for f in night.faults if f.kind != "sim_faults" and f.at]
    tries = sorted((float(c["started_at"]), float(c["started_at"]) + float(c["duration_s"] or 0), c["status"])
                   for c in calls if c["status"] in RETRYABLE)
    groups: list[list[tuple[float, float, str]]] = []
    for start, end, status in tries:
        if status != "http_5xx" and any(a <= end and start <= b for a, b in windows):
            continue  # only the sim answers 5xx; a cut or refused call in another fault's window is that fault's
        if groups and start - groups[-1][-1][1] < SIM_GAP:
            groups[-1].append((start, end, status))
        else:
            groups.append([(start, end, status)])
    planned = [f for f in night.faults if f.kind == "sim_faults"]
    for i, group in enumerate(groups):
        if i >= len(planned):  # a server killed before it saved its count fires the same request numbers again
            planned.append(Fault("sim_faults", 0.0))
            night.faults.append(planned[-1])
        fault = planned[i]
        fault.at, fault.until = group[0][0], max(end for _, end, _ in group)
        statuses = Counter(status for _, _, status in group)
        seen = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        fault.detail = f"{'5xx burst' if 'http_5xx' in statuses else 'dropped stream'} ({seen})"
    for fault in planned[len(groups):]:
        fault.note += " never fired;"


def tally(night: Night, profile: Profile) -> None:
    """The table of the module docstring's rules, from the night's CSVs."""
    folder = night.run_folder
    tasks, night.torn_rows["tasks.csv"] = read_table(folder / "tasks.csv")
    calls, night.torn_rows["calls.csv"] = read_table(folder / "calls.csv")
    for name in ("events.csv", "rounds.csv", "samples.csv"):
        night.torn_rows[name] = read_table(folder / name)[1]
    sim_faults(night, calls, profile.stale_seconds + 2)
    night.attempts = len(tasks)
    struck = sorted((f for f in night.faults if f.at), key=lambda f: f.at)

    def blamed(start: float, end: float) -> str:
        end += RECORDING_SECONDS
        return next((f.kind for f in reversed(struck) if f.at <= end and start <= f.until), "none")

    def slot(row: dict[str, str]) -> Key:
        return row["task_id"], row["cycle"], row["repeat"]

    def note(kind: str, what: str, row: dict[str, str], why: str) -> None:
        night.table.setdefault(kind, Counter())[what] += 1
        night.anomalies.append({"kind": kind, "what": what, "why": why, **{k: row.get(k, "") for k in (
            "task_id", "cycle", "repeat", "session", "outcome", "started_at", "error_kind")}})

    # Lost: started slots without a row in any session.
    recorded = {slot(r) for r in tasks}
    spans: dict[Key, list[float]] = defaultdict(list)
    for c in calls:
        spans[slot(c)].append(float(c["started_at"]))
    work = folder / "work"
    for task_dir in work.iterdir() if work.is_dir() else ():
        for attempt in task_dir.iterdir():
            cycle, _, repeat = attempt.name.partition("-")
            spans.setdefault((task_dir.name, cycle, repeat or "1"), [attempt.stat().st_mtime])
    for key, times in spans.items():
        if key not in recorded:
            row = dict(zip(("task_id", "cycle", "repeat"), key, strict=True))
            note(blamed(min(times), max(times)), "lost", row, "started, never recorded")

    # Twice: a slot's second finish, or the same try's row again; the first of each is the record. A try a full
    # disk cut short is recorded `cancelled` and tried again in the same session: two rows of one attempt, once.
    tries: set[tuple[str, ...]] = set()
    finished: set[Key] = set()
    for r in tasks:
        when = blamed(float(r["started_at"]), float(r["ended_at"]))
        if (*slot(r), r["session"], r["started_at"]) in tries:
            note(when, "twice", r, "the same try's row again")
        elif r["outcome"] not in REDONE and slot(r) in finished:
            note(when, "twice", r, "a slot finished again")
        tries.add((*slot(r), r["session"], r["started_at"]))
        if r["outcome"] not in REDONE:
            finished.add(slot(r))

    # Misattributed: against each task's expected outcome and the attempt's own calls.
    failed_calls = {(*slot(c), c["session"]) for c in calls if c["status"] in RETRYABLE}
    untouched: dict[str, Counter] = defaultdict(Counter)
    for r in tasks:
        if r["outcome"] in MODEL_OUTCOMES and blamed(float(r["started_at"]), float(r["ended_at"])) == "none":
            untouched[r["task_id"]][r["outcome"]] += 1
    for r in tasks:
        when = blamed(float(r["started_at"]), float(r["ended_at"]))
        expected = untouched[r["task_id"]].most_common(1)[0][0] if untouched[r["task_id"]] else "pass"
        if r["outcome"] in MODEL_OUTCOMES and r["outcome"] != expected:
            note(when, "misattributed", r, f"charged to the model; the task's expected outcome is {expected}")
        elif r["outcome"] in STACK_SIDE and (*slot(r), r["session"]) not in failed_calls:
            note(when, "misattributed", r, "charged to the stack, though no call of it failed on the stack")
        elif r["outcome"] == "harness_error":
            note(when, "misattributed", r, "charged to soak")

    # A full disk that did not stay full while it was held (the filler was fought or deleted) is said so.
    for fault in (f for f in struck if f.kind == "disk_full"):
        room = [free for at, free in night.free if fault.at + 1 <= at <= fault.until - 0.5]
        if room and max(room) > MB:
            fault.note += f" {max(room) / MB:.0f} MiB free while it was held;"

    # Torn rows a resume cut, against the fault struck last before it.
    events, _ = read_table(folder / "events.csv")
    for event in events:
        before = [f for f in struck if f.kind != "sim_faults" and f.at <= float(event["at"])]
        if event["kind"] == "resume" and before and "torn rows cut: none" not in event["detail"]:
            before[-1].torn = event["detail"].partition("torn rows cut: ")[2]

    # Survived: no exit of its own, recovery came, a later attempt passed; a full disk also leaves no partial row.
    passes = [float(r["started_at"]) for r in tasks if r["outcome"] == "pass"]
    for fault in struck:
        whole = not (fault.kind == "disk_full" and fault.torn)
        fault.survived = (fault.recovered and whole and "soak exited" not in fault.note
                          and any(t > fault.until for t in passes))
    for kind in {f.kind for f in night.faults}:
        row = night.table.setdefault(kind, Counter())
        row["injected"] = sum(1 for f in night.faults if f.kind == kind and f.at)
        row["survived"] = sum(1 for f in night.faults if f.kind == kind and f.survived)
        row["torn"] = sum(1 for f in night.faults if f.kind == kind and f.torn)


def totals(night: Night) -> dict[str, int]:
    return {what: sum(row.get(what, 0) for row in night.table.values()) for what in ("lost", "twice", "misattributed")}


def rss_summary(night: Night, seconds: float) -> dict[str, float]:
    """MB: first sample, peak and last, and the growth after the first hour (the first eighth of a shorter night):
    per session, since each resume is a fresh process, the largest of the sessions that lasted twice that long."""
    if not night.rss:
        return {}
    settled = min(3600.0, seconds / 8)
    sessions: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for at, pid, rss in night.rss:
        sessions[pid].append((at, rss))
    growths = []
    for samples in sessions.values():
        start, end = samples[0][0], samples[-1][0]
        if end - start >= 2 * settled:
            first_hour = [rss for at, rss in samples if at - start <= settled][-1]
            last_hour = statistics.median(rss for at, rss in samples if end - at <= settled)
            growths.append((last_hour - first_hour) / MB)
    return {"first_mb": night.rss[0][2] / MB, "peak_mb": max(b for _, _, b in night.rss) / MB,
            "last_mb": night.rss[-1][2] / MB, "growth_after_first_hour_mb": max(growths, default=float("nan")),
            "sessions": len(sessions), "samples": len(night.rss)}


def fault_table(night: Night) -> str:
    """The table in Markdown, a line per kind and the total."""
    columns = ("injected", "survived", "lost", "twice", "misattributed", "torn")
    lines = ["| fault | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    order = [k for k in (*KINDS, "none") if k in night.table]
    for kind in order:
        lines.append(f"| {kind} | " + " | ".join(str(night.table[kind].get(c, 0)) for c in columns) + " |")
    total = {c: sum(night.table[k].get(c, 0) for k in order) for c in columns}
    lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in columns) + " |")
    return "\n".join(lines)


def fault_log(night: Night) -> str:
    origin, lines = night.started, ["   at       lasted  kind         what"]
    for f in sorted(night.faults, key=lambda f: f.at or float("inf")):
        when = f"{f.at - origin:7.1f} s {f.until - f.at:6.1f} s" if f.at else f"{'-':>7}   {'-':>6}  "
        lines.append(f"{when}  {f.kind:<12} {f.detail}{'  ' + f.note.strip() if f.note else ''}"
                     f"{'  torn rows cut: ' + f.torn if f.torn else ''}  survived={f.survived}")
    return "\n".join(lines)


def write_results(night: Night, out: Path, work: Path, seconds: float, args: dict[str, Any]) -> Path:
    """fault table, fault log, anomalies, RSS samples and the report's summary.json under `out`/<stamp>/."""
    target = out / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    report = work / "report"
    subprocess.run([sys.executable, "-m", "soak.cli", "report", str(night.run_folder), "-o", str(report)],
                   check=True, capture_output=True)
    shutil.copy(report / "summary.json", target / "summary.json")
    (target / "faults.md").write_text(f"{fault_table(night)}\n\n```\n{fault_log(night)}\n```\n")
    (target / "faults.json").write_text(json.dumps({
        "args": args, "started": night.started, "faults": [asdict(f) for f in night.faults], "exits": night.exits,
        "anomalies": night.anomalies, "table": night.table, "torn_rows": night.torn_rows,
        "tracebacks": night.tracebacks, "attempts": night.attempts, "skipped": night.skipped,
        "rss": rss_summary(night, seconds)}, indent=1, default=str))
    with open(target / "rss.csv", "w", newline="") as f:
        csv.writer(f).writerows([("at", "pid", "rss_bytes"), *night.rss])
    return target


def chaos_night(work: Path, seconds: float, faults: int, seed: int, timings: str = "realistic",
                suite: str = "builtin") -> Night:
    """One night in `work` (its data dir mounted there and unmounted at the end); the tallied night."""
    if faults < 1:
        raise ValueError("at least one fault")
    night = ChaosNight(work, PROFILES[timings], seconds, faults, seed, suite)
    try:
        return night.run()
    finally:
        night.disk.unmount()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--hours", type=float)
    length.add_argument("--minutes", type=float)
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timings", choices=sorted(PROFILES), default="realistic")
    parser.add_argument("--suite", default="builtin", help="the suite soak runs and the sim knows")
    parser.add_argument("--work", type=Path, help="folder for the night (default: a temporary one, kept)")
    parser.add_argument("--out", type=Path, help="write the fault table, the log and summary.json here")
    args = parser.parse_args()
    seconds = args.hours * 3600 if args.hours else (args.minutes or 60) * 60
    work = args.work or Path(tempfile.mkdtemp(prefix="chaos-night-"))
    work.mkdir(parents=True, exist_ok=True)
    night = chaos_night(work, seconds, args.faults, args.seed, args.timings, args.suite)
    print(f"\n{night.attempts} attempts; run folder kept at {night.run_folder}\n")
    print(fault_table(night))
    print(f"\n{fault_log(night)}\n")
    for a in night.anomalies:
        print(f"  {a['kind']}: {a['what']} {a['task_id']}/{a['cycle']}-{a['repeat']} s{a['session']} "
              f"{a['outcome']}: {a['why']}")
    print(f"torn rows: {night.torn_rows}; tracebacks in soak's output: {night.tracebacks}; "
          f"soak's own exits: {night.exits}")
    print(f"harness RSS: {rss_summary(night, seconds)}")
    if args.out:
        print(f"written to {write_results(night, args.out, work, seconds, vars(args))}")
    sys.exit(1 if any(totals(night).values()) else 0)


if __name__ == "__main__":
    main()
