"""The sandbox against real hostile solutions: each test runs one through judge() and checks what held."""

import json
import resource
import socket
import textwrap
import uuid

import psutil
import pytest
from click.testing import CliRunner

from soak.cli import main
from soak.sandbox import jail
from soak.sandbox import judge as sandbox
from soak.sandbox.jail import ResourceLimits
from soak.sandbox.judge import judge
from soak.tasks.spec import TaskSpec
from soak.tasks.suites import find_task
from tests.helpers import REPO

WORD_FREQUENCY = REPO / "tasks" / "word-frequency"
KINDS = [kind for kind in jail.ISOLATION_KINDS if jail.works(kind)]
NAMESPACED = sandbox.isolation_kind() != "session"


def make_task(
    tests: dict[str, str], reference: str, timeout: float = 20, entry: str = "solution.py", task_id: str = ""
) -> TaskSpec:
    """A small task; without an id a fresh one, so its trusted collection is not shared with other tests."""
    return TaskSpec(
        id=task_id or f"t-{uuid.uuid4().hex[:8]}", title="t", difficulty="easy", suite="test", prompt="", entry=entry,
        tests={name: textwrap.dedent(text) for name, text in tests.items()}, reference=textwrap.dedent(reference),
        test_timeout_seconds=timeout,
    )


def marker_alive(marker: str) -> bool:
    return any(marker in " ".join(process.info["cmdline"] or []) for process in psutil.process_iter(["cmdline"]))


@pytest.fixture
def kind(request, monkeypatch) -> str:
    """Force one isolation kind for the test."""
    monkeypatch.setattr(sandbox, "isolation_kind", lambda: request.param)
    return request.param


@pytest.fixture(scope="module")
def word_frequency() -> TaskSpec:
    return find_task(str(WORD_FREQUENCY))


# --- verdicts ------------------------------------------------------------------------------------------------------


def test_reference_passes_and_wrong_fails_with_a_relative_tail(word_frequency):
    good = judge(word_frequency, word_frequency.reference)
    assert (good.result, good.tests_passed, good.tests_total, good.error_kind) == ("pass", 7, 7, "")
    assert good.isolation == sandbox.isolation_kind() and "7 passed" in good.output
    bad = judge(word_frequency, word_frequency.wrong)
    assert (bad.result, bad.error_kind, bad.tests_total) == ("fail", "AssertionError", 7)
    assert 0 < bad.tests_passed < 7
    assert "FAILED test_solution.py::" in bad.error_tail and "assert" in bad.error_tail
    assert "soak-judge-" not in bad.error_tail and len(bad.error_tail.splitlines()) <= sandbox.TAIL_LINES


@pytest.mark.parametrize(
    ("source", "kind"),
    [("def top_words(:\n", "SyntaxError"), ("def other(): pass\n", "ImportError"), ("", "ImportError"),
     ("import nothing_such\n", "ImportError"), ("raise ValueError('at import')\n", "ValueError")],
)
def test_collection_errors_name_their_kind(word_frequency, source, kind):
    verdict = judge(word_frequency, source)
    assert (verdict.result, verdict.error_kind, verdict.tests_passed) == ("fail", kind, 0)
    assert "ERROR collecting test_solution.py" in verdict.error_tail and "_pytest" not in verdict.error_tail
    assert "soak-judge-" not in verdict.error_tail


def test_keep_dir_holds_the_solution_and_the_output(word_frequency, tmp_path):
    verdict = judge(word_frequency, word_frequency.wrong, keep_dir=tmp_path / "round-1")
    assert (tmp_path / "round-1" / "solution.py").read_text() == word_frequency.wrong
    assert (tmp_path / "round-1" / "test_output.txt").read_text() == verdict.output
    assert "FAILED" in verdict.output


def test_exercism_style_entry_and_unittest_tests():
    task = make_task(
        {"two_fer_test.py": """
            import unittest
            from two_fer import two_fer

            class TwoFerTest(unittest.TestCase):
                def test_no_name(self):
                    self.assertEqual(two_fer(), "One for you, one for me.")

                def test_name(self):
                    self.assertEqual(two_fer("Alice"), "One for Alice, one for me.")
            """},
        'def two_fer(name="you"):\n    return f"One for {name}, one for me."\n',
        entry="two_fer.py",
    )
    assert judge(task, task.reference).result == "pass"
    verdict = judge(task, 'def two_fer(name="you"):\n    return "One for you, one for me."\n')
    assert (verdict.result, verdict.tests_passed, verdict.tests_total, verdict.error_kind) == (
        "fail", 1, 2, "AssertionError")


def test_trusted_collection_runs_once_per_task(monkeypatch):
    task = make_task({"test_solution.py": "from solution import f\n\ndef test_f():\n    assert f() == 1\n"},
                     "def f():\n    return 1\n")
    calls = []
    real = sandbox.run_tests
    monkeypatch.setattr(sandbox, "run_tests",
                        lambda *a, **k: calls.append(k.get("collect_only", False)) or real(*a, **k))
    for _ in range(3):
        assert judge(task, "def f():\n    return 2\n").result == "fail"
    assert calls == [True, False, False, False]


def test_a_task_whose_reference_does_not_collect_is_an_error():
    task = make_task({"test_solution.py": "from solution import f\n\ndef test_f():\n    assert f()\n"}, "def f(:\n")
    verdict = judge(task, "def f():\n    return 1\n")
    assert (verdict.result, verdict.error_kind) == ("error", "TaskError")


# --- the count of tests ---------------------------------------------------------------------------------------------

TWO_TESTS = {"test_solution.py": """
    from solution import double

    def test_zero():
        assert double(0) == 0

    def test_three():
        assert double(3) == 6
    """}
DOUBLE = make_task(TWO_TESTS, "def double(x):\n    return 2 * x\n", task_id="double")
PROBE = make_task({"test_solution.py": "from solution import probe\n\ndef test_probe():\n    assert probe() == 'ok'\n"},
                  "def probe():\n    return 'ok'\n", task_id="probe")


def test_exit_zero_on_import_is_tampering():
    task = DOUBLE
    verdict = judge(task, "import os\nos._exit(0)\n")
    assert (verdict.result, verdict.error_kind, verdict.tests_passed, verdict.tests_total) == (
        "tampered", "Tampering", 0, 2)
    assert "no session-finished event" in verdict.error_tail


def test_system_exit_on_import_is_not_a_pass():
    task = DOUBLE
    assert judge(task, "raise SystemExit(0)\n").result == "fail"


def test_dropping_failing_tests_from_the_collection_is_tampering():
    task = DOUBLE
    source = """
        import gc
        import _pytest.config

        def double(x):
            return 0

        class Drop:
            def pytest_collection_modifyitems(self, items):
                items[:] = [item for item in items if item.name == "test_zero"]

        for obj in gc.get_objects():
            if isinstance(obj, _pytest.config.Config):
                obj.pluginmanager.register(Drop(), "drop")
                break
        """
    verdict = judge(task, textwrap.dedent(source))
    assert (verdict.result, verdict.error_kind, verdict.tests_total) == ("tampered", "Tampering", 2)
    assert "added: hook.pytest_collection_modifyitems.drop" in verdict.error_tail


def test_config_files_written_by_the_solution_take_no_effect():
    tests = {
        "test_a.py": "import solution\n\ndef test_config(request):\n"
                     "    assert request.config.inipath.name == 'pytest_empty.ini'\n"
                     "    assert request.config.getoption('noconftest')\n",
        "test_b.py": "from solution import double\n\ndef test_double():\n    assert double(3) == 6\n",
    }
    task = make_task(tests, "def double(x):\n    return 2 * x\n")
    assert judge(task, task.reference).result == "pass"
    source = """
        from pathlib import Path

        def double(x):
            return 0

        Path("conftest.py").write_text("import pytest\\n@pytest.hookimpl(wrapper=True)\\n"
            "def pytest_runtest_call(item):\\n    try:\\n        yield\\n    except BaseException:\\n        pass\\n")
        Path("pytest.ini").write_text("[pytest]\\npython_functions = nothing\\n")
        Path("pyproject.toml").write_text("[tool.pytest.ini_options]\\naddopts = '-p no:python'\\n")
        Path("setup.cfg").write_text("[tool:pytest]\\npython_files = nothing\\n")
        """
    for _ in range(2):
        verdict = judge(task, textwrap.dedent(source))
        assert (verdict.result, verdict.error_kind, verdict.tests_passed, verdict.tests_total) == (
            "fail", "AssertionError", 1, 2)


@pytest.mark.parametrize("kind", KINDS, indirect=True)
def test_rewriting_a_later_test_file_is_not_a_pass(kind):
    tests = {
        "test_a.py": "from solution import double\n\ndef test_zero():\n    assert double(0) == 0\n",
        "test_b.py": "from solution import double\n\ndef test_three():\n    assert double(3) == 6\n",
    }
    task = make_task(tests, "def double(x):\n    return 2 * x\n", task_id="two-files")
    source = """
        import contextlib
        from pathlib import Path

        def double(x):
            return 0

        with contextlib.suppress(OSError):
            Path("test_b.py").write_text("def test_three():\\n    pass\\n")
        """
    verdict = judge(task, textwrap.dedent(source))
    assert verdict.result != "pass" and verdict.tests_passed < 2
    if kind != "session":  # The test files are read-only: the write fails, the wrong answer fails.
        assert (verdict.result, verdict.error_kind) == ("fail", "AssertionError")
    else:
        assert (verdict.result, verdict.error_kind) == ("tampered", "Tampering")
        assert "changed the test files" in verdict.error_tail


# --- processes --------------------------------------------------------------------------------------------------------

SPAWN_SLEEPER = """
    import os, signal, sys, time

    MARKER = {marker!r}

    def spawn_sleeper():
        # setsid + double fork: the sleeper belongs to no one, ignores SIGTERM and outlives this process if it can.
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)", MARKER])
            os._exit(0)
        os.wait()
        for _ in range(200):
            if any(MARKER.encode() in cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit()):
                return
            time.sleep(0.01)
        raise RuntimeError("the sleeper did not start")

    def cmdline(pid):
        # A process may end between the listing and the read (other tests' processes come and go).
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as handle:
                return handle.read()
        except OSError:
            return b""

    def double(x):
        return 2 * x

    spawn_sleeper()
    """

ATTACKS = {
    "leave-sleeper": "",
    "kill-parent": "os.kill(os.getppid() or os.getpid(), signal.SIGKILL)\n",
    "kill-group": "os.killpg(os.getpgrp(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("kind", KINDS, indirect=True)
def test_no_process_outlives_the_verdict_and_the_harness_survives(kind, attack):
    marker = f"soak-sleeper-{uuid.uuid4().hex}"
    task = DOUBLE
    source = textwrap.dedent(SPAWN_SLEEPER.format(marker=marker)) + ATTACKS[attack]
    verdict = judge(task, source)
    assert verdict.isolation == kind
    assert not marker_alive(marker)
    if attack == "leave-sleeper":
        assert verdict.result == "pass"
    else:  # In a pid namespace a kill may miss (pid 1 ignores it) or be refused (soak's root dropped to nobody,
        # the parent is not its own); where it hits, the run is a crash.
        assert verdict.result == "pass" or (verdict.result, verdict.error_kind) in (("fail", "Crash"),
                                                                                     ("fail", "PermissionError"))


@pytest.mark.parametrize("kind", KINDS, indirect=True)
def test_wall_timeout_kills_processes_that_ignore_sigterm(kind):
    marker = f"soak-sleeper-{uuid.uuid4().hex}"
    task = DOUBLE.model_copy(update={"test_timeout_seconds": 2.5})
    source = textwrap.dedent(SPAWN_SLEEPER.format(marker=marker)) + (
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n")
    verdict = judge(task, source)
    assert (verdict.result, verdict.error_kind, verdict.isolation) == ("timeout", "Timeout", kind)
    assert verdict.duration_s >= 2.5 and verdict.error_tail.startswith("Timeout")
    assert not marker_alive(marker)


def test_timeout_names_the_running_test():
    task = PROBE.model_copy(update={"test_timeout_seconds": 4.0})
    verdict = judge(task, "def probe():\n    while True:\n        pass\n")
    assert (verdict.result, verdict.error_kind) == ("timeout", "Timeout")
    assert "while running test_solution.py::test_probe" in verdict.error_tail


# --- resources ------------------------------------------------------------------------------------------------------


def test_memory_bomb_ends_as_a_failed_run():
    task = PROBE
    source = "def probe():\n    hog = []\n    while True:\n        hog.append(bytearray(64 << 20))\n"
    verdict = judge(task, source, limits=ResourceLimits(address_space_bytes=768 << 20))
    assert (verdict.result, verdict.error_kind) == ("fail", "MemoryError")


def test_cpu_burner_hits_the_cpu_limit():
    verdict = judge(PROBE, "def probe():\n    while True:\n        pass\n", limits=ResourceLimits(cpu_seconds=1))
    assert (verdict.result, verdict.error_kind) == ("fail", "CPULimit")


def test_disk_bomb_in_one_file_hits_the_file_size_limit():
    task = PROBE
    source = "def probe():\n    with open('big', 'wb') as f:\n        while True:\n            f.write(bytes(65536))\n"
    verdict = judge(task, source, limits=ResourceLimits(file_size_bytes=8 << 20))
    assert (verdict.result, verdict.error_kind) == ("fail", "FileTooLarge")


def test_disk_bomb_in_many_files_hits_the_workspace_cap():
    task = PROBE
    source = """
        import time

        def probe():
            for i in range(40):
                with open(f"part{i}", "wb") as f:
                    f.write(bytes(3 << 20))
            time.sleep(60)
        """
    limits = ResourceLimits(file_size_bytes=4 << 20, workspace_bytes=16 << 20)
    verdict = judge(task, textwrap.dedent(source), limits=limits)
    if NAMESPACED:  # the workspace is a tmpfs of that size: the write that does not fit fails
        assert (verdict.result, verdict.error_kind) == ("fail", "OSError")
        assert "No space left on device" in verdict.error_tail
    else:  # the host's folder, polled
        assert (verdict.result, verdict.error_kind) == ("fail", "DiskQuota")


def test_a_flood_of_output_keeps_only_head_and_tail():
    task = PROBE
    # pytest captures fd 1 into a file; a hostile solution finds the real pipe among its saved descriptors.
    source = """
        import os, stat

        def probe():
            pipes = [fd for fd in range(3, 64) if _is_pipe(fd)]
            block = b"x" * 65535 + b"\\n"
            for _ in range(4096):
                os.write(pipes[0], block)
            return "ok"

        def _is_pipe(fd):
            try:
                return stat.S_ISFIFO(os.fstat(fd).st_mode)
            except OSError:
                return False
        """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    verdict = judge(task, textwrap.dedent(source), limits=ResourceLimits(output_bytes=32 * 1024))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert verdict.result == "pass"
    assert "bytes of output omitted" in verdict.output and len(verdict.output) <= 32 * 1024 + 200
    assert grown_kib < 128 * 1024  # 256 MiB went through the pipe


# --- environment, network, file system --------------------------------------------------------------------------------


def test_environment_is_scrubbed(monkeypatch):
    secret = f"sk-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("PATH_SECRET", secret)
    tests = {"test_solution.py": f"""
        import os
        from solution import environment

        def test_no_secrets():
            seen = environment()
            assert {secret!r} not in repr(seen)
            assert not [name for name in seen if "KEY" in name or "TOKEN" in name or "SECRET" in name]

        def test_home_and_tmp_in_workspace():
            assert os.environ["HOME"].startswith(os.getcwd()) and os.environ["TMPDIR"].startswith(os.getcwd())
        """}
    task = make_task(tests, "import os\n\ndef environment():\n    return dict(os.environ)\n")
    source = """
        import os, sys

        def environment():
            with open("/proc/self/environ", "rb") as f:
                raw = f.read().decode(errors="replace")
            print(raw, file=sys.stderr)
            os.write(2, raw.encode())
            return {**os.environ, "raw": raw}
        """
    verdict = judge(task, textwrap.dedent(source))
    assert verdict.result == "pass" and secret not in verdict.output


@pytest.mark.skipif(not NAMESPACED, reason="no network namespace on this host")
def test_no_network_even_to_loopback():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        task = PROBE
        source = f"""
            import socket

            def probe():
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                except OSError:
                    return "ok"
                return "connected"
            """
        verdict = judge(task, textwrap.dedent(source))
        assert verdict.result == "pass"
        with pytest.raises(BlockingIOError):
            server.accept()


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "session"], indirect=True)
def test_writes_outside_the_workspace_are_blocked(kind, tmp_path):
    target = tmp_path / "escaped.txt"
    task = PROBE
    source = f"""
        def probe():
            try:
                with open({str(target)!r}, "w") as f:
                    f.write("out")
            except OSError:
                return "ok"
            return "wrote"
        """
    verdict = judge(task, textwrap.dedent(source))
    assert verdict.result == "pass" and verdict.isolation == kind
    assert not target.exists()


def test_capped_output_keeps_head_and_tail():
    out = jail.CappedOutput(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrst"):
        out.add(chunk)
    assert (bytes(out.head), bytes(out.tail), out.dropped) == (b"abcde", b"pqrst", 10)
    assert out.text() == "abcde\n[... 10 bytes of output omitted ...]\npqrst"


# --- soak check -------------------------------------------------------------------------------------------------------


def test_soak_check_cli(tmp_path):
    runner = CliRunner()
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text((WORD_FREQUENCY / "reference.py").read_text())
    bad.write_text((WORD_FREQUENCY / "wrong.py").read_text())
    passed = runner.invoke(main, ["check", "--task", str(WORD_FREQUENCY), "--solution", str(good), "--json"])
    assert passed.exit_code == 0, passed.output
    verdict = json.loads(passed.output)
    assert {"result", "tests_passed", "tests_total", "duration_s", "error_kind", "error_tail"} <= set(verdict)
    assert (verdict["result"], verdict["tests_passed"], verdict["tests_total"]) == ("pass", 7, 7)
    failed = runner.invoke(main, ["check", "--task", str(WORD_FREQUENCY), "--solution", str(bad)])
    assert failed.exit_code == 1 and "fail:" in failed.output and "AssertionError" in failed.output
    missing = runner.invoke(main, ["check", "--task", "no-such-task", "--suite", "builtin", "--solution", str(bad)])
    assert missing.exit_code == 2
