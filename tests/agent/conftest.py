"""This host without bubblewrap (the unshare fallback) and without any containment (a plain session)."""

import os
import sys
from pathlib import Path

import pytest

from soak.sandbox.judge import isolation_kind

IN_CI = os.environ.get("CI", "").lower() in ("1", "true")


def without(programs: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """PATH holds every program of /usr/bin but `programs`, and the isolation is probed again; its kind now."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in Path("/usr/bin").iterdir():
        if program.name not in programs:
            (bin_dir / program.name).symlink_to(program)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}")
    isolation_kind.cache_clear()
    return isolation_kind()


@pytest.fixture
def no_bubblewrap(tmp_path, monkeypatch):
    """This host as one without bubblewrap: the sandbox falls back to unshare."""
    yield without({"bwrap"}, tmp_path, monkeypatch)
    monkeypatch.undo()
    isolation_kind.cache_clear()


@pytest.fixture
def no_containment(tmp_path, monkeypatch):
    """This host as one without bubblewrap or unshare: only a plain session is left."""
    yield without({"bwrap", "unshare"}, tmp_path, monkeypatch)
    monkeypatch.undo()
    isolation_kind.cache_clear()


@pytest.fixture(params=["bwrap", "unshare"])
def jail(request) -> str:
    """Each kind that builds the allow-listed root: bubblewrap, and this host without it (the unshare fallback).
    CI has both; elsewhere a missing one skips with its reason."""
    kind = request.getfixturevalue("no_bubblewrap") if request.param == "unshare" else isolation_kind()
    if not kind.startswith(request.param):
        if IN_CI:
            pytest.fail(f"CI must have {request.param}: the allow-listed root is what contains an agent")
        pytest.skip(f"the allow-listed root needs {request.param} here")
    return kind
