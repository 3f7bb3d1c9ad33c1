"""What a jailed process sees: a root built from an allow-list, never the host's, the same under bubblewrap and
under `unshare` (one list of mount operations, `jail_root`; bubblewrap performs it from its arguments,
soak.sandbox.rootfs with mount(2)).

Read-only: the system directories that exist (SYSTEM_DIRS; a symlink such as /bin -> usr/bin stays a symlink), the
Python that runs soak (prefix, base prefix, the real directory of its executable, its site-packages), and what a
caller names (an agent's venv and the Python it was made from, the proxy's socket, `[agent] readable`). Of soak
itself only the files that must run inside are bound, alone, under HARNESS (the pytest plugin and its empty ini, an
agent's bridge); soak's package, the built-in bank, HumanEval's data and the run folders are masked where a bound
directory holds them (site-packages). A fresh /proc and /dev, a small private /tmp; writable only the workspace
(and an agent's HOME). Everything else is absent: the task bank and every suite's folders, other attempts and the
run folder, soak's source and config, /root, /home, project folders. A plain session (the last resort) has no such
root.
"""

import importlib.util
import os
import site
import sys
from pathlib import Path
from typing import NamedTuple

from soak.paths import PACKAGE_DIR, builtin_tasks_dir, data_dir, humaneval_data

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
HARNESS = Path("/harness")
"""Where soak's own files that run inside a jail are seen (at their place in the package: namespace packages)."""
PRIVATE_TMP_BYTES = 64 << 20
"""The jail's own /tmp, in memory; TMPDIR points into the workspace, whose size is capped and polled."""
MASK_BYTES = 1 << 20


def python_dirs() -> list[Path]:
    """The Python running soak and its libraries: what the jailed interpreter (pytest, the bridge) needs."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()}
    return [Path(path) for path in found]


def venv_dirs(venv: Path) -> list[Path]:
    """A venv and the Python it was made from (the `home` its pyvenv.cfg names): what a program in it needs."""
    found = [venv]
    try:
        lines = (venv / "pyvenv.cfg").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = Path(value.strip()).resolve()
            found.append(home.parent if home.name == "bin" else home)
    return found


def hidden() -> list[Path]:
    """What no jailed process may see even where a bound directory holds it: soak, its bank, HumanEval's canonical
    solutions (in site-packages), the run folders."""
    return [PACKAGE_DIR, builtin_tasks_dir().resolve(), humaneval_data().parent, data_dir().resolve()]


def module_file(name: str) -> Path:
    """The source of one of soak's modules: its file, or its directory when it is a package."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def in_jail(path: Path) -> Path:
    """Where a file of soak's own is seen inside the jail."""
    return HARNESS / path.relative_to(PACKAGE_DIR.parent)


def allow_listed(kind: str) -> bool:
    """Whether an isolation kind builds the jail's root from the allow-list: all but a plain session."""
    return kind != "session"


def run_module(kind: str, name: str) -> list[str]:
    """The arguments after `python -I` that run a module as __main__ with soak's bound files importable: in an
    allow-listed root from HARNESS (`-I` ignores PYTHONPATH, so a tiny bootstrap puts it first on sys.path)."""
    if not allow_listed(kind):
        return ["-m", name]
    return ["-c", f"import runpy, sys; sys.path.insert(0, {str(HARNESS)!r}); "
                  f"runpy.run_module({name!r}, run_name='__main__', alter_sys=True)"]


def outermost(paths: list[Path], covered: list[Path]) -> list[Path]:
    """Existing paths, as given and resolved, without those another one (or a `covered` one) holds; never the whole
    root."""
    found = {p for path in paths if path.exists() for p in (Path(os.path.abspath(path)), path.resolve())}
    found.discard(Path("/"))
    cover = found | set(covered)
    return sorted(path for path in found - set(covered)
                  if not any(other != path and path.is_relative_to(other) for other in cover))


def allowed() -> tuple[list[Path], list[Path]]:
    """The allow-list every jail holds: the system directories that are symlinks (kept as such) and the directories
    bound read-only."""
    links = [Path(name) for name in SYSTEM_DIRS if Path(name).is_symlink()]
    return links, outermost([Path(name) for name in SYSTEM_DIRS] + python_dirs(), links)


class Mount(NamedTuple):
    """One operation building a jail's root: `proc`, `dev`, `tmpfs` (of `size` bytes), `symlink` (to `src`),
    `ro-bind` or `bind` (`src` at `dest`), `remount-ro`."""

    op: str
    dest: str
    src: str = ""
    size: int = 0


def jail_root(
    ws: Path, readonly: list[Path], writable: tuple[Path, ...], visible: tuple[Path, ...], harness: tuple[Path, ...]
) -> list[Mount]:
    """The mount operations of a jail's root, in order (a later mount lands on an earlier one): fresh /proc /dev /tmp,
    the system, the Python (a venv in /tmp too), what the caller makes visible, masks over soak where a bound directory
    holds it, soak's bound files, the workspace and other writable paths, the read-only files in the workspace; last
    the root and the masks read-only (not recursively: the workspace stays writable)."""
    links, bound = allowed()
    root = [Mount("proc", "/proc"), Mount("dev", "/dev"), Mount("tmpfs", "/tmp", size=PRIVATE_TMP_BYTES)]
    root += [Mount("symlink", str(link), os.readlink(link)) for link in links]
    root += [Mount("ro-bind", str(path), str(path)) for path in bound]
    shown = [Path(os.path.abspath(path)) for path in visible if path.exists()]
    root += [Mount("ro-bind", str(path), str(path)) for path in shown]
    masks = [path for path in outermost(hidden(), []) if path.is_dir()
             and any(path.is_relative_to(other) for other in [*bound, *shown])]
    root += [Mount("tmpfs", str(path), size=MASK_BYTES) for path in masks]
    root += [Mount("ro-bind", str(in_jail(path)), str(path)) for path in harness]
    root += [Mount("bind", str(path), str(path)) for path in (ws, *writable)]
    root += [Mount("ro-bind", str(path), str(path)) for path in readonly]
    return [*root, *(Mount("remount-ro", str(path)) for path in ["/", *masks])]


def bwrap_args(root: list[Mount]) -> list[str]:
    """A root's operations as bubblewrap's arguments."""
    args: list[str] = []
    for m in root:
        if m.op in ("proc", "dev", "remount-ro"):
            args += [f"--{m.op}", m.dest]
        elif m.op == "tmpfs":
            args += ["--size", str(m.size), "--tmpfs", m.dest]
        else:  # symlink, ro-bind, bind: source first
            args += [f"--{m.op}", m.src, m.dest]
    return args


def described(kind: str) -> list[tuple[str, str, bool]]:
    """What the jail of an isolation kind holds on this host, as (what, how, fine) for `soak doctor`."""
    if not allow_listed(kind):
        return [
            ("reads", "the whole file system: in a plain session nothing is hidden (the task bank, run folders, "
                      "soak's source, home folders)", False),
            ("writes", "anything the harness's user may write: not contained", False),
            ("network", "the host's network, for test runs and agents alike", False),
            ("run records", "not protected: an agent or a solution can write the run folder (so `--agent` refuses "
                            "to start unless [agent] uncontained = true); install bubblewrap", False),
        ]
    links, bound = allowed()
    reads = [f"{link} -> {os.readlink(link)}" for link in links] + [str(path) for path in bound]
    hides = outermost(hidden(), [])
    user = {"bwrap": "as the harness's user", "unshare": "as nobody, without capabilities",
            "unshare-user": "as the harness's user (nobody in a nested user namespace), without capabilities"}[kind]
    return [
        ("reads", "read-only: " + ", ".join(reads) + "; an agent also its venv, the Python it was made from and "
                  "[agent] readable; of soak only its pytest plugin (or an agent's bridge)", True),
        ("hidden", "everything else: soak, the task bank and run folders (" + ", ".join(map(str, hides)) + "), "
                   "every suite's folders, other attempts, home and project folders", True),
        ("writes", f"{user}: the workspace (an agent also its temporary HOME); a private /tmp of "
                   f"{PRIVATE_TMP_BYTES >> 20} MiB; the mounts cannot be undone from inside", True),
        ("network", "none; an agent reaches soak's recording proxy only, through a socket bridge", True),
        ("run records", "protected: no test run or agent sees the run folder (an agent only its own workspace)", True),
    ]
