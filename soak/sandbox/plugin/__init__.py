"""Pytest plugin loaded inside the sandbox: it streams what happens to the harness and watches for tampering.

The harness loads it with `-p soak.sandbox.plugin --soak-channel FD`, FD being one end of a socket pair the harness
holds the other end of. It runs in the judged process, next to the solution, so it imports nothing of the harness:
only the standard library, pytest and its own modules (harness code loaded here would run beside the solution,
for it to tamper with, and slow down every test run). Its four jobs:

- channel: before any test module (and so the solution) is imported, it reads a per-run secret from the socket
  (the harness wrote it there first, so it is gone from the socket before the solution runs), makes the descriptor
  non-inheritable, and from then on writes numbered lines, each with an HMAC under the secret, so the harness knows
  what the recorder wrote, in which order; nothing written into the workspace is trusted any more.
- equality: every comparison in a test module, and unittest's equality asserts, fail on an operand that claims to
  equal what nothing honest equals.
- freezing: snapshots of the judging machinery and of the test code, compared while the tests run.
- recorder: the pytest hooks that send one line per event (the session started, the collection finished, a
  collection error, a test began, a phase's report, evidence of tampering, the session finished) and compare the
  snapshots at every step.

What it cannot do is stop a solution that knows this plugin and rewrites the checker and its channel consistently
from inside the same interpreter (see docs/trust/sandbox.md); the harness cross-checks what it can from the
outside (soak.sandbox.judge).
"""

import importlib.machinery
import importlib.util
import sys

import pytest


def import_plain(*names: str) -> None:
    """Import modules of this package the way Python does, from their cached bytecode where there is some, in order
    (each imports only those before it). pytest rewrites the asserts of every module of a `-p` plugin, so it would
    parse and compile each one anew in every run (a jail writes no cache): tens of milliseconds a run, for a package
    that asserts nothing."""
    for name in names:
        spec = importlib.machinery.PathFinder.find_spec(f"{__name__}.{name}", __path__)
        if spec is None or spec.loader is None:
            raise ImportError(f"soak: the plugin's module {name} is missing")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[spec.name]
            raise
        setattr(sys.modules[__name__], name, module)


import_plain("channel", "equality", "freezing", "recorder")

from soak.sandbox.plugin.channel import Channel  # noqa: E402 - imported plainly above
from soak.sandbox.plugin.equality import install_strict_equality  # noqa: E402
from soak.sandbox.plugin.recorder import ResultRecorder  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak-channel", default=None, help="Stream soak's test events to this inherited descriptor.")


def pytest_configure(config: pytest.Config) -> None:
    fd = config.getoption("soak_channel")
    if fd is not None:
        recorder = ResultRecorder(config, Channel(int(fd)))
        install_strict_equality(recorder.tampered)
        config.pluginmanager.register(recorder, "soak-recorder")
