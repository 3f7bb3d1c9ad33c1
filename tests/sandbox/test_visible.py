"""The root from an allow-list, under bubblewrap and under the unshare fallback alike: solutions that hunt for their
task's answer at import time find nothing, /tmp is private, soak is masked where a bound directory holds it (and stays
masked: no mount can be undone from inside), and the honest reference still passes."""

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from soak.paths import humaneval_data
from soak.sandbox import jail, visible
from soak.sandbox import judge as sandbox
from soak.sandbox.judge import judge
from soak.tasks.suites import find_task
from tests.helpers import REPO
from tests.sandbox.test_jail import WORD_FREQUENCY, make_task

ROOTED = [kind for kind in jail.ISOLATION_KINDS if visible.allow_listed(kind) and jail.works(kind)]
pytestmark = pytest.mark.skipif(not ROOTED, reason="the allow-listed root needs bubblewrap or unshare")


@pytest.fixture(params=ROOTED)
def kind(request, monkeypatch) -> str:
    """Each isolation kind that builds the allow-listed root on this host, forced for the test."""
    monkeypatch.setattr(sandbox, "isolation_kind", lambda: request.param)
    return request.param

ROOTS = "[f'/{top}' for top in os.listdir('/') if top not in ('proc', 'sys', 'dev')]"
HUNTS = {
    # Every file of the visible disk, without following links (a glob's '**' follows /proc/self/root round).
    "walk": f"""
        for top in {ROOTS}:
            for root, dirs, files in os.walk(top):
                found += [os.path.join(root, name) for name in files if name == "reference.py"
                          and os.path.basename(root) == "word-frequency"]
        """,
    "glob": f"""
        import glob
        for top in {ROOTS}:
            if not os.path.islink(top) and top not in ('/usr', '/etc'):
                found += glob.glob(top + '/**/word-frequency/reference.py', recursive=True)
        """,
    "checkout": f"""
        found += [{str(WORD_FREQUENCY / "reference.py")!r}]
        for bank in ("tasks", "soak/_bank"):
            found.append(os.path.join({str(REPO)!r}, bank, "word-frequency", "reference.py"))
        """,
    # soak's own package as the interpreter finds it: the bank of a wheel, the checkout of an editable install.
    "importlib": """
        import importlib.metadata, importlib.util, json
        spec = importlib.util.find_spec("soak")
        for where in (spec.submodule_search_locations or []) if spec else []:
            found += [os.path.join(where, "_bank", "word-frequency", "reference.py"),
                      os.path.join(where, "..", "tasks", "word-frequency", "reference.py")]
        try:
            import soak.paths
            found.append(str(soak.paths.builtin_tasks_dir() / "word-frequency" / "reference.py"))
        except ImportError:
            pass
        url = json.loads(importlib.metadata.distribution("soak").read_text("direct_url.json") or "{}").get("url", "")
        found.append(url.removeprefix("file://") + "/tasks/word-frequency/reference.py")
        """,
}


def hunter(hunt: str) -> str:
    """The source of `hunt()`: the existing paths the hunt came upon."""
    body = textwrap.indent(textwrap.dedent(hunt).strip(), "    ")
    return f"import os\n\n\ndef hunt():\n    found = []\n{body}\n    return [p for p in found if os.path.isfile(p)]\n"


def hunting(hunt: str, fallback: str) -> str:
    """A solution that looks for the task's reference at import time and is it if found, else `fallback`."""
    otherwise = textwrap.indent(fallback, "    ")
    return f"{hunter(hunt)}\n\nFOUND = hunt()\nif FOUND:\n    exec(open(FOUND[0]).read())\nelse:\n{otherwise}"


@pytest.fixture(scope="module")
def word_frequency():
    return find_task(str(WORD_FREQUENCY)).model_copy(update={"test_timeout_seconds": 120})


@pytest.mark.parametrize("hunt", HUNTS)
def test_a_solution_hunting_for_its_reference_finds_nothing(kind, word_frequency, hunt):
    source = hunting(HUNTS[hunt], word_frequency.wrong)
    if hunt in ("checkout", "importlib"):  # outside the jail the same hunt finds the answer
        namespace: dict = {}
        exec(hunter(HUNTS[hunt]), namespace)
        assert namespace["hunt"](), hunt
    verdict = judge(word_frequency, source)
    assert (verdict.result, verdict.error_kind, verdict.isolation) == ("fail", "AssertionError", kind), (
        verdict.error_tail)


def test_tmp_is_private_and_the_reference_still_passes(kind, tmp_path):
    planted = tmp_path / f"planted-{uuid.uuid4().hex}"
    planted.write_text("the host's /tmp")
    # A Python the jail binds may itself live under /tmp (a venv in a checkout there): its top folder shows.
    python_tops = {Path(d).parts[2] for found in visible.python_dirs() for d in (found, found.resolve())
                   if len(Path(d).parts) > 2 and Path(d).parts[1] == "tmp"}
    tests = {"test_solution.py": f"""
        import os
        from solution import double

        def test_tmp_holds_nothing_but_the_workspace():
            others = [name for name in os.listdir("/tmp") if not (os.getcwd() + "/").startswith(f"/tmp/{{name}}/")
                      and name not in {sorted(python_tops)!r}]
            assert others == [] and not os.path.exists({str(planted)!r})

        def test_double():
            assert double(2) == 4
        """}
    task = make_task(tests, "def double(x):\n    return 2 * x\n")
    verdict = judge(task, task.reference)
    assert (verdict.result, verdict.tests_passed) == ("pass", 2), verdict.error_tail


def test_soak_is_masked_where_a_bound_directory_holds_it(kind, tmp_path, monkeypatch):
    """A wheel install: soak and its bank inside a bound site-packages; only the plugin is importable."""
    site = tmp_path / "site-packages"
    (site / "soak" / "_bank" / "word-frequency").mkdir(parents=True)
    (site / "soak" / "__init__.py").write_text("")
    (site / "soak" / "_bank" / "word-frequency" / "reference.py").write_text("ANSWER = 42\n")
    python_dirs = visible.python_dirs
    monkeypatch.setattr(visible, "python_dirs", lambda: [*python_dirs(), site])
    monkeypatch.setattr(visible, "hidden", lambda: [site / "soak"])
    ws = tmp_path / "ws"
    ws.mkdir()
    probe = f"""
        import json, os, sys
        sys.path.append({str(site)!r})
        import soak.sandbox.plugin
        seen = {{"plugin": soak.sandbox.plugin.__file__, "soak": os.listdir({str(site / "soak")!r})}}
        try:
            open({str(site / "soak" / "x")!r}, "w")
        except OSError as error:
            seen["write"] = error.strerror
        print(json.dumps(seen))
        """
    code = f"import sys; sys.path.insert(0, {str(visible.HARNESS)!r})\n" + textwrap.dedent(probe)
    cmd = jail.wrap(kind, ws, [sys.executable, "-I", "-c", code],
                    visible.JailView(harness=(visible.module_file(sandbox.PLUGIN),)))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("plugin").startswith(str(visible.HARNESS / "soak" / "sandbox" / "plugin"))
    assert seen == {"soak": [], "write": "Read-only file system"}


def test_humaneval_canonical_solutions_in_site_packages_are_masked(kind):
    """HumanEval ships its canonical solutions inside its package, in the site-packages the jail must bind."""
    data = humaneval_data()
    assert data.is_file()  # outside the jail
    tests = {"test_solution.py": f"""
        import os
        from solution import double

        def test_humaneval_data_is_masked():
            assert os.listdir({str(data.parent)!r}) == [] and not os.path.exists({str(data)!r})

        def test_double():
            assert double(2) == 4
        """}
    task = make_task(tests, "def double(x):\n    return 2 * x\n")
    verdict = judge(task, task.reference)
    assert (verdict.result, verdict.tests_passed) == ("pass", 2), verdict.error_tail


def test_a_solution_cannot_unmount_a_mask_or_remount_the_root_writable(kind):
    """The masks and the read-only root stay, whatever the solution tries: umount(2), a read-write remount, and both
    again as root of a user namespace of its own (where the kernel keeps the mounts it inherited locked)."""
    masked = str(humaneval_data().parent)
    attempts = f"""
        import ctypes, sys
        LIBC = ctypes.CDLL(None, use_errno=True)
        if sys.argv[1:] == ["own-namespace"] and LIBC.unshare(0x10000000 | 0x20000) != 0:  # CLONE_NEWUSER | NEWNS
            sys.exit("no user namespace")
        done = [LIBC.umount2(target.encode(), 2) == 0 for target in ({masked!r}, "/tmp", "/usr")]
        done.append(LIBC.mount(None, b"/", None, ctypes.c_ulong(32 | 4096), None) == 0)  # MS_REMOUNT | MS_BIND
        print(done)
        """
    tests = {"test_solution.py": f"""
        import os, subprocess, sys
        from solution import double

        ATTEMPTS = {textwrap.dedent(attempts)!r}

        def test_mounts_hold():
            for how in ([], ["own-namespace"]):
                done = subprocess.run([sys.executable, "-I", "-c", ATTEMPTS, *how], capture_output=True, text=True)
                assert done.stdout.strip() in ("", "[False, False, False, False]"), done.stdout
            assert os.listdir({masked!r}) == [] and not os.access("/", os.W_OK)

        def test_double():
            assert double(2) == 4
        """}
    task = make_task(tests, "def double(x):\n    return 2 * x\n")
    verdict = judge(task, task.reference)
    assert (verdict.result, verdict.tests_passed, verdict.isolation) == ("pass", 2, kind), verdict.error_tail
