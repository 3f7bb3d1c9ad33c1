"""The jail's root without bubblewrap: run as the first process of fresh pid, network and mount namespaces (made by
`unshare`), still privileged there and before anything untrusted, it performs the allow-list's mount operations
(soak.sandbox.visible) on a new tmpfs root, pivots into it and detaches the host's, brings loopback up, then drops
every privilege and execs the command behind a shell that stays the namespace's pid 1.

    python -I -S rootfs.py KIND WORKSPACE OPERATIONS_JSON -- COMMAND...

Runs as a file with the standard library only (no soak import, no site: one short start). Privilege is dropped by
KIND: `unshare` (soak is real root) switches to nobody, owner of the writable binds for the run; `unshare-user` (a
user namespace mapping soak's own uid) enters a nested user and mount namespace where it is not root, which locks
the mounts (none can be unmounted to reveal what a mask covers, none remounted writable). Either way: no capability,
an empty bounding set, no new privileges. Any failure exits 125 before the command runs.
"""

import contextlib
import ctypes
import fcntl
import json
import os
import re
import socket
import stat
import struct
import sys
from collections.abc import Callable, Iterator

LIBC = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, ST_RELATIME = 1024, 2048, 1 << 21, 4096
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
NOBODY = 65534
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}.get(os.uname().machine, -1)
NEW, OLD = "/newroot", "/oldroot"
SHELL = ["/bin/sh", "-c", '"$@"; exit $?', "sh"]
"""pid 1 of the namespace: a solution that kills its parent hits the shell, and pytest keeps ordinary signals."""


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    check(LIBC.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def kept_flags(path: str) -> int:
    """A mount's flags that a remount must repeat (a user namespace may not clear those it inherited locked)."""
    flags = os.statvfs(path).f_flag
    kept = flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    return kept | (MS_RELATIME if flags & ST_RELATIME else 0)


def submounts(path: str) -> list[str]:
    """The mount points at or below a path (in the new root, while it is built), octal escapes undone."""
    with open(f"{OLD}/proc/self/mountinfo") as info:  # the host's /proc until the old root goes
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4]) for line in info]
    return [p for p in points if p == path or p.startswith(path.rstrip("/") + "/")]


def remount_ro(path: str, recursive: bool) -> None:
    for point in submounts(path) if recursive else [path]:
        mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(point))


def place(dest: str, like: str | None = None) -> None:
    """Make the mount point: a directory, or an empty file where a file (a socket, a device) is bound."""
    if like is not None and not os.path.isdir(like):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if not os.path.lexists(dest):
            os.close(os.open(dest, os.O_CREAT | os.O_WRONLY, 0o644))
    else:
        os.makedirs(dest, exist_ok=True)


def tmpfs(dest: str, size: int, owner: int, mode: str = "1777") -> None:
    place(dest)
    mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode},uid={owner},gid={owner}")


def operate(op: str, dest: str, src: str, size: int, owner: int) -> None:
    """One mount operation of the allow-list, `dest` inside the new root, `src` under the old one."""
    new, old = NEW + dest, OLD + src
    if op == "proc":
        place(new)
        mount("proc", new, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif op == "dev":
        tmpfs(new, 1 << 20, owner, "0755")
        for name in DEVICES:
            place(f"{new}/{name}", f"{OLD}/dev/{name}")
            mount(f"{OLD}/dev/{name}", f"{new}/{name}", None, MS_BIND)
        for name, target in DEV_LINKS.items():
            os.symlink(target, f"{new}/{name}")
    elif op == "tmpfs":
        tmpfs(new, size, owner)
    elif op == "dir":
        os.makedirs(new, exist_ok=True)
        os.chmod(new, 0o1777)
    elif op == "symlink":
        os.makedirs(os.path.dirname(new), exist_ok=True)
        os.symlink(src, new)
    elif op in ("ro-bind", "bind"):
        place(new, old)
        mount(old, new, None, MS_BIND | MS_REC)
        if op == "ro-bind":
            remount_ro(new, recursive=True)
        else:  # writable: nothing planted there runs setuid or opens a device
            mount(None, new, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | kept_flags(new))
    elif op == "remount-ro":
        remount_ro(new, recursive=False)
    else:
        raise ValueError(f"unknown mount operation {op!r}")


def build(operations: list[tuple[str, str, str, int]], owner: int) -> None:
    """A tmpfs root holding only what the operations put there, the host's root detached (bubblewrap's way: a tmpfs
    over /tmp becomes the root, the host's at OLD to bind from, the new root at NEW, then NEW alone)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.chdir("/tmp")
    os.mkdir("." + NEW)
    os.mkdir("." + OLD)
    mount("." + NEW, "." + NEW, None, MS_BIND | MS_REC)
    check(LIBC.syscall(SYS_PIVOT_ROOT, b".", b"." + OLD.encode()), "pivot_root")
    os.chdir("/")
    for op, dest, src, size in operations:
        operate(op, dest, src, size, owner)
    check(LIBC.umount2(OLD.encode(), MNT_DETACH), "umount old root")
    os.chdir(NEW)
    check(LIBC.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    check(LIBC.umount2(b".", MNT_DETACH), "umount")
    os.chdir("/")


def loopback_up() -> None:
    """A fresh network namespace has `lo` down: an agent's bridge listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def walk(
    top: str, leave: Callable[[int, str], None] | None = None, dir_fd: int | None = None
) -> Iterator[tuple[int, tuple[str, ...], str, os.stat_result]]:
    """Every entry under `top`, links not followed, top-down: (its folder's descriptor, its folder as names from
    `top`, its name, its lstat). By descriptor, one open at a time (a folder is left through its '..'), so no path
    ever grows past one name: untrusted code makes the tree, and a chain deeper than PATH_MAX (or Python's recursion
    limit) is walked whole. `leave(parent's descriptor, name)` is called once a folder's entries are done (a
    removal's rmdir). A relative `top` is found from the folder `dir_fd` (one of a jail's sized filesystem, which
    has no path in the harness's mount namespace)."""
    try:
        fd = os.open(top, FOLDER, dir_fd=dir_fd)
    except OSError:
        return
    levels: list[Iterator[str]] = []
    here: tuple[str, ...] = ()
    try:
        levels.append(iter(os.listdir(fd)))
        while levels:
            name = next(levels[-1], None)
            if name is None:
                levels.pop()
                if levels:
                    parent = os.open("..", FOLDER, dir_fd=fd)
                    os.close(fd)
                    fd, folder, here = parent, here[-1], here[:-1]
                    if leave is not None:
                        leave(fd, folder)
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            yield fd, here, name, info
            if not stat.S_ISDIR(info.st_mode):
                continue
            try:
                child = os.open(name, FOLDER, dir_fd=fd)
            except PermissionError:  # a folder the run made unreadable: its owner may open it again
                try:
                    os.chmod(name, 0o700, dir_fd=fd)
                    child = os.open(name, FOLDER, dir_fd=fd)
                except OSError:
                    continue
            except OSError:
                continue
            try:
                inside = os.listdir(child)
            except OSError:
                os.close(child)
                continue
            os.close(fd)
            fd, here = child, (*here, name)
            levels.append(iter(inside))
    finally:
        os.close(fd)


def give(paths: list[str], uid: int, gid: int) -> None:
    """Hand whole trees to a user, links not followed, however deep (soak.sandbox.rootfs.walk), and clear every setuid
    and setgid bit: the writable binds to nobody before a run, back to the harness after it, and no setuid file of a
    run is ever left in the run folder."""

    def hand(fd: int | None, name: str, info: os.stat_result) -> None:
        with contextlib.suppress(OSError):
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
        if info.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISLNK(info.st_mode):
            with contextlib.suppress(OSError):
                os.chmod(name, stat.S_IMODE(info.st_mode) & 0o1777, dir_fd=fd)

    for top in paths:
        with contextlib.suppress(OSError):
            hand(None, top, os.lstat(top))
        for fd, _, name, info in walk(top):
            hand(fd, name, info)


def unprivileged(kind: str) -> None:
    """Drop to a user with no capability left, ever (the bounding set goes while that is still allowed)."""
    if kind == "unshare-user":
        check(LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{NOBODY} 0 1"), ("gid_map", f"{NOBODY} 0 1")):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
    with open("/proc/sys/kernel/cap_last_cap") as last:
        for cap in range(int(last.read()) + 1):
            check(LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "bounding set")
    check(LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient capabilities")
    if kind == "unshare":
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)  # from root to nobody: the kernel clears every capability
    check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def main() -> None:
    kind, workspace, operations, separator, *cmd = sys.argv[1:]
    if separator != "--" or not cmd or kind not in ("unshare", "unshare-user"):
        sys.exit("usage: rootfs.py unshare|unshare-user WORKSPACE OPERATIONS_JSON -- COMMAND...")
    ops = json.loads(operations)
    try:
        if kind == "unshare":
            give([src for op, _, src, _ in ops if op == "bind"], NOBODY, NOBODY)
        build(ops, NOBODY if kind == "unshare" else 0)
        loopback_up()
        os.chdir(workspace)
        os.setsid()
        unprivileged(kind)
    except OSError as error:
        print(f"soak jail: {error}", file=sys.stderr)
        os._exit(125)
    os.execv(SHELL[0], [*SHELL, *cmd])


if __name__ == "__main__":
    main()
