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
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from soak.paths import PACKAGE_DIR, builtin_tasks_dir, data_dir, humaneval_data

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
HARNESS = Path("/harness")
"""Where soak's own files that run inside a jail are seen (at their place in the package: namespace packages)."""
PRIVATE_TMP_BYTES = 64 << 20
"""The jail's own /tmp and /dev/shm, each in memory of this size (bubblewrap's --dev alone leaves /dev/shm unbounded);
TMPDIR points into the workspace, whose size is capped."""
MASK_BYTES = 1 << 20
KERNEL_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq")
"""Kernel knobs read-only, as container runtimes mount them: a root-owned 0644 sysctl is writable by uid 0 even
without capabilities."""
KERNEL_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats",
                 "/proc/acpi", "/proc/scsi")
"""Kernel views hidden behind /dev/null (files) or an empty read-only tmpfs (folders), as container runtimes do."""


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


def within(path: str, folder: str) -> bool:
    """Whether an absolute, normalised path is `folder` or lies in it (a string test: the jail's arguments are built
    for every run, and pathlib's is ~20 times slower)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def outermost(paths: list[Path], covered: list[Path]) -> list[Path]:
    """Existing paths, as given and resolved, without those another one (or a `covered` one) holds; never the whole
    root."""
    found = {p for path in paths if path.exists() for p in (os.path.abspath(path), os.path.realpath(path))}
    found.discard("/")
    held = {str(path) for path in covered}
    cover = found | held
    return sorted(Path(path) for path in found - held
                  if not any(other != path and within(path, other) for other in cover))


def allowed() -> tuple[list[Path], list[Path]]:
    """The allow-list every jail holds: the system directories that are symlinks (kept as such) and the directories
    bound read-only."""
    links = [Path(name) for name in SYSTEM_DIRS if Path(name).is_symlink()]
    return links, outermost([Path(name) for name in SYSTEM_DIRS] + python_dirs(), links)


class Mount(NamedTuple):
    """One operation building a jail's root: `proc`, `dev`, `tmpfs` (of `size` bytes, open to all: the jailed user
    is not its owner when soak is root), `dir` (open to all), `symlink` (to `src`), `ro-bind` or `bind` (`src` at
    `dest`), `remount-ro`. Every writable mount is nosuid and nodev."""

    op: str
    dest: str
    src: str = ""
    size: int = 0


def kernel_guards() -> tuple[list[Mount], list[str]]:
    """The fresh /proc's knobs bound read-only and its kernel views masked; the masking folders to make read-only."""
    guards = [Mount("ro-bind", path, path) for path in KERNEL_READONLY if os.path.exists(path)]
    folders = [path for path in KERNEL_MASKED if os.path.isdir(path)]
    guards += [Mount("ro-bind", path, "/dev/null") for path in KERNEL_MASKED if os.path.isfile(path)]
    guards += [Mount("tmpfs", path, size=MASK_BYTES) for path in folders]
    return guards, folders


@dataclass(frozen=True)
class JailView:
    """What a jail shows besides the allow-list: `readonly`, paths in the workspace bound read-only; `visible`, paths
    outside the allow-list the command reads; `harness`, soak's own files it runs, bound alone; `disk` (`sized`), a
    sized tmpfs seen only inside the jail holding the workspace (and an agent's HOME) instead of the host's folder (a
    judged run's holds the read-only files and vanishes with the run; an agent's is filled from the host's folders and
    copied back, soak.sandbox.sized): what the run writes, unlinked files included, counts against its size."""

    readonly: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()
    harness: tuple[Path, ...] = ()
    disk: tuple[Mount, ...] = ()


def jail_root(ws: Path, view: JailView) -> list[Mount]:
    """The mount operations of a jail's root, in order (a later mount lands on an earlier one): fresh /proc with its
    kernel knobs read-only, /dev with a sized /dev/shm, /tmp, the system, the Python (a venv in /tmp too), what the
    caller makes visible, masks over soak where a bound directory holds it, soak's bound files, the workspace, the
    read-only files in the workspace; last the root and the masks read-only (not recursively: the workspace stays
    writable)."""
    links, bound = allowed()
    guards, masked = kernel_guards()
    root = [Mount("proc", "/proc"), *guards, Mount("dev", "/dev"), Mount("tmpfs", "/dev/shm", size=PRIVATE_TMP_BYTES),
            Mount("tmpfs", "/tmp", size=PRIVATE_TMP_BYTES)]
    root += [Mount("symlink", str(link), os.readlink(link)) for link in links]
    root += [Mount("ro-bind", str(path), str(path)) for path in bound]
    shown = [Path(os.path.abspath(path)) for path in view.visible if path.exists()]
    root += [Mount("ro-bind", str(path), str(path)) for path in shown]
    masks = [path for path in outermost(hidden(), []) if path.is_dir()
             and any(within(str(path), str(other)) for other in [*bound, *shown])]
    root += [Mount("tmpfs", str(path), size=MASK_BYTES) for path in masks]
    root += [Mount("ro-bind", str(in_jail(path)), str(path)) for path in view.harness]
    root += view.disk or (Mount("bind", str(ws), str(ws)),)
    root += [Mount("ro-bind", str(path), str(path)) for path in view.readonly]
    return [*root, *(Mount("remount-ro", str(path)) for path in ["/", *masks, *masked])]


def sized(top: Path, size: int, folders: list[Path]) -> tuple[Mount, ...]:
    """A tmpfs of `size` bytes at `top`, seen only inside the jail, holding `folders` (open to all): the kernel refuses
    the write that would pass its size (ENOSPC), files unlinked but held open included."""
    return (Mount("tmpfs", str(top), size=size), *(Mount("dir", str(folder)) for folder in folders))


def made_folders(root: list[Mount]) -> list[str]:
    """The folders bubblewrap makes in the new root (or in a tmpfs of it) to hold a mount point: it gives them their
    host counterpart's mode, so a jailed user who is not root could not pass /root (0700) to a Python kept there."""
    points = {m.dest for m in root if m.op != "remount-ro"}
    host = [m.dest for m in root if m.op in ("proc", "dev", "bind", "ro-bind")]
    parents = set()
    for point in points:
        parent = os.path.dirname(point)
        while parent != "/":
            parents.add(parent)
            parent = os.path.dirname(parent)
    return sorted(p for p in parents - points if not any(within(p, point) for point in host))


def bwrap_args(root: list[Mount]) -> list[str]:
    """A root's operations as bubblewrap's arguments; the folders it makes are opened to all (made_folders) before
    the root goes read-only."""
    args: list[str] = []
    for m in root:
        if m.op == "remount-ro" and m.dest == "/":
            for folder in made_folders(root):
                args += ["--chmod", "0755", folder]
        if m.op in ("proc", "dev", "remount-ro"):
            args += [f"--{m.op}", m.dest]
        elif m.op == "tmpfs":
            args += ["--perms", "1777", "--size", str(m.size), "--tmpfs", m.dest]
        elif m.op == "dir":
            args += ["--perms", "1777", "--dir", m.dest]
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
    root = os.geteuid() == 0
    user = {"bwrap": "as nobody (setpriv drops soak's root)" if root else "as the harness's user in a user namespace",
            "unshare": "as nobody",
            "unshare-user": "as nobody in a nested user namespace (the harness's user outside)"}[kind]
    return [
        ("reads", "read-only: " + ", ".join(reads) + "; an agent also its venv, the Python it was made from and "
                  "[agent] readable; of soak only its pytest plugin (or an agent's bridge)", True),
        ("hidden", "everything else: soak, the task bank and run folders (" + ", ".join(map(str, hides)) + "), "
                   "every suite's folders, other attempts, home and project folders", True),
        ("user", f"{user}, without capabilities, no new privileges", True),
        ("kernel", "/proc/sys, /proc/sysrq-trigger and the other kernel knobs read-only; kcore, keys and the like "
                   "masked", True),
        ("writes", "the workspace on a tmpfs of its cap (an agent's with its temporary HOME, one tmpfs of [agent] "
                   "disk_bytes, copied back after each run); "
                   f"a private /tmp and /dev/shm of {PRIVATE_TMP_BYTES >> 20} MiB each; every writable mount nosuid "
                   "and nodev, no setuid or setgid bit kept after a run; the mounts cannot be undone from inside",
         True),
        ("network", "none; an agent reaches soak's recording proxy only, through a socket bridge", True),
        ("run records", "protected: no test run or agent sees the run folder (an agent only its own workspace)", True),
    ]
