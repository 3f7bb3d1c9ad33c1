"""The static scan from the harness's side (soak.sandbox.scan reads a source; this decides where): a small source in
the harness, at once; a larger one in a bounded process of its own, started before the tests and read after them."""

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time

from soak.paths import PACKAGE_DIR
from soak.sandbox import scan
from soak.sandbox.jail import MiB, ResourceLimits, rlimit_setter

SCAN_IN_HARNESS_BYTES = 16 * 1024
"""A source up to this size is scanned in the harness: ~1 ms for a typical solution, ~30 ms and a few MiB at the
limit (measured), where a process of the scan's own costs ~45 ms of CPU beside the tests. A larger one gets that
process."""
SCAN_SECONDS = 10
"""The static scan's wall clock and CPU seconds; past them it is said to have failed."""
SCAN_LIMITS = ResourceLimits(address_space_bytes=1024 * MiB)
"""The scan's memory: a source that parses into more is said, not scanned."""
SCAN_COMMAND = [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(PACKAGE_DIR.parent)!r}); "
                "from soak.sandbox.scan import main; main()"]
"""The scan alone, without site: its modules import the standard library and soak.python_ast only."""

class Scan:
    """The static look at one source (soak.sandbox.scan): a small one in the harness, at once; a larger one in a
    process of its own, started before the tests and read after them, with its memory, CPU seconds and wall time
    bounded there, so no source inflates or stalls the harness (the scan is linear but slow, seconds a MiB). It only
    annotates: a failing scan is said, never fatal. A context manager: leaving it kills a scan still running."""

    def __init__(self, source: str) -> None:
        self.deadline = time.monotonic() + SCAN_SECONDS
        self.process: subprocess.Popen[bytes] | None = None
        self.found = ""
        """The reasons, or why the scan failed, once known."""
        if len(source) <= SCAN_IN_HARNESS_BYTES and len(source.encode()) <= SCAN_IN_HARNESS_BYTES:
            try:
                self.found = "; ".join(scan.suspicious(source))
            except MemoryError:  # the parser's own limit on nesting
                self.found = "scan failed: MemoryError"
            return
        try:
            with tempfile.TemporaryFile() as held:  # read by the scan at its pace: nothing here waits on a pipe
                held.write(source.encode())
                held.seek(0)
                self.process = subprocess.Popen(
                    SCAN_COMMAND, stdin=held, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    preexec_fn=rlimit_setter(SCAN_LIMITS, SCAN_SECONDS))
        except Exception as error:  # noqa: BLE001 - the scan only annotates
            self.found = f"scan failed: {type(error).__name__}"

    def __enter__(self) -> "Scan":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            with self.process:  # closes its pipes and reaps it
                self.process.kill()  # a no-op once it has ended

    def reasons(self, stop: threading.Event | None = None) -> str:
        """The scan's reasons, "; "-joined; waits for it until its deadline, no longer once `stop` is set."""
        if self.process is None:
            return self.found
        while True:
            try:
                out, err = self.process.communicate(timeout=min(0.1, max(self.deadline - time.monotonic(), 0)))
                break
            except subprocess.TimeoutExpired:
                if stop is not None and stop.is_set():
                    return "scan failed: the attempt's budget ended first"
                if time.monotonic() >= self.deadline:
                    return f"scan failed: it took over {SCAN_SECONDS} s"
        code = self.process.returncode
        if code < 0:
            return f"scan failed: {signal.strsignal(-code) or f'signal {-code}'}"
        try:
            found = json.loads(out) if code == 0 else None
        except ValueError:
            found = None
        if not isinstance(found, list) or not all(isinstance(reason, str) for reason in found):
            last = (err.decode(errors="replace").strip().splitlines() or [f"exit code {code}"])[-1]
            return f"scan failed: {scan.tidy(last, 80)}"
        return "; ".join(found)
