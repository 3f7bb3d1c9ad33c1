"""This host without bubblewrap (the unshare fallback) and without any containment (a plain session)."""

import os
import sys
from pathlib import Path

import pytest

from soak.sandbox.judge import isolation_kind


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
