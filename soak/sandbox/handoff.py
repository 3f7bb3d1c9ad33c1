"""The first step of a command in a jail whose writable folders lie on a sized tmpfs (soak.sandbox.sized), run
before anything untrusted: it hands the harness a descriptor of that tmpfs through the socket it inherited (the
tmpfs has no path in the harness's mount namespace), waits until the harness has filled it, then becomes the
command. Without the harness's go (it found the folders too big, or it is gone) the command never starts.

    python -I -S handoff.py FD FOLDER -- COMMAND...

Runs as a file with the standard library only (no soak import, no site: one short start).
"""

import os
import socket
import sys

GO = b"g"
"""The harness's one byte once the tmpfs is filled."""
REFUSED = 125
"""The exit status of a command that never started, as soak.sandbox.rootfs's."""


def main() -> None:
    fd, folder, separator, *cmd = sys.argv[1:]
    if separator != "--" or not cmd:
        sys.exit("usage: handoff.py FD FOLDER -- COMMAND...")
    with socket.socket(fileno=int(fd)) as channel:
        disk = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        socket.send_fds(channel, [b"d"], [disk])
        os.close(disk)
        if channel.recv(1) != GO:
            os._exit(REFUSED)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
