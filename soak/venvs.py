"""Cached venvs: one of its own under `cache_dir()` for each real engine and each external agent, whose pins
conflict with soak's and with each other's. A base module, so the stack and the agent stage share it without
importing each other."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.errors import BadInput


def cache_dir() -> Path:
    """`$SOAK_CACHE_DIR`, else ~/.cache/soak."""
    return Path(os.environ.get("SOAK_CACHE_DIR") or Path.home() / ".cache" / "soak")


class CachedVenv:
    """A venv of its own in the cache (an engine or an external agent), and the stamp only a finished setup writes."""

    def __init__(self, root: Path):
        self.root, self.venv, self.stamp, self.log = root, root / "venv", root / "ready.json", root / "setup.log"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def read_stamp(self) -> dict[str, Any]:
        try:
            stamp: dict[str, Any] = json.loads(self.stamp.read_text())
            return stamp
        except (OSError, ValueError):
            return {}

    def begin(self, say: Callable[[str], None], what: str) -> None:
        """Start over in an empty root, its venv created."""
        self.stamp.unlink(missing_ok=True)
        shutil.rmtree(self.venv, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        say(f"{what}: creating {self.venv}")
        self.step([sys.executable, "-m", "venv", str(self.venv)], "creating the venv")

    def step(self, argv: list[str], what: str) -> None:
        """One setup step, its output appended to the setup log; a failure names the step and the log."""
        with open(self.log, "ab") as out:
            out.write(f"\n$ {shlex.join(argv)}\n".encode())
            out.flush()
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env())
        if done.returncode != 0:
            tail = " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-3:])
            raise BadInput(f"setup failed while {what} (exit {done.returncode}; log {self.log}): {tail}")
