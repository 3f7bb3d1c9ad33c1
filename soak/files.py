"""The file jobs every stage shares: writing a file atomically, reading a TOML or JSON file into a pydantic model
with one clear `BadInput` line for whatever is wrong with it, and a pid file that a reused pid cannot fool."""

import json
import os
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import Any, TypeVar

import psutil
from pydantic import BaseModel, ValidationError

from soak.errors import BadInput

M = TypeVar("M", bound=BaseModel)


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of either (temp file, fsync, os.replace).

    The one way soak writes an output file (run.json, the pid file, reports, summary.json, routing.toml, gate
    results). The file keeps the mode of the one it replaces, else gets 0o644 (a temp file is created 0o600)."""
    path = Path(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def describe_validation_error(source: str, error: ValidationError) -> str:
    """One line per problem: `soak.toml: budgets.max_calls: Input should be a valid integer`."""
    parts = []
    for problem in error.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "(top level)"
        parts.append(f"{where}: {problem['msg']}")
    return f"{source}: " + "; ".join(parts)


def load_model(path: Path, model: type[M], what: str) -> M:
    """`path` (TOML, or JSON by its suffix) validated as `model`; `what` names the file kind in the error."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such {what}") from None
    except OSError as error:
        raise BadInput(f"{path}: cannot read {what} ({error.strerror})") from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        raise BadInput(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {error}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise BadInput(describe_validation_error(str(path), error)) from None


def since_boot(process: psutil.Process) -> float:
    """When a process started, in seconds after boot: psutil's create_time adds the kernel's boot time, a whole second
    that moves with the wall clock (NTP), so the same process read an hour apart can differ by a second or more."""
    return process.create_time() - psutil.boot_time()


def write_process(path: Path, pid: int, **extra: object) -> None:
    """A pid file: the pid, its process's start time (which tells a reused pid apart) and `extra`."""
    process = psutil.Process(pid)
    write_atomic(path, json.dumps({"pid": pid, "create_time": process.create_time(),
                                   "since_boot": since_boot(process), **extra}))


def read_process(path: Path) -> tuple[psutil.Process | None, dict[str, Any]]:
    """The process a pid file names, if it still runs (the same process, not a reused pid, not a zombie), and the
    file's contents ({} when there is none or it is unreadable)."""
    try:
        recorded = json.loads(path.read_text())
        pid, started = int(recorded["pid"]), float(recorded.get("since_boot", recorded["create_time"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}
    try:
        process = psutil.Process(pid)
        now = since_boot(process) if "since_boot" in recorded else process.create_time()
        if abs(now - started) < 1.0 and process.status() != psutil.STATUS_ZOMBIE:
            return process, recorded
    except psutil.Error:
        pass
    return None, recorded
