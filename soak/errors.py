"""The few exceptions that cross module boundaries."""

import errno


class BadInput(Exception):
    """A malformed task, config or argument: the CLI prints it as one line and exits 2."""


class DiskFull(Exception):
    """A write found no room on the run folder's filesystem (or the temporary one): the night waits for room
    instead of charging the attempt, and no CSV keeps the part of a row that fitted."""


NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(error: BaseException | None) -> bool:
    """`error`, or what it was raised from or during, is a write that found no room."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, DiskFull) or (isinstance(error, OSError) and error.errno in NO_ROOM):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def exit_line(error: BaseException) -> tuple[str, int] | None:
    """What the CLI says and exits with for an error that is no bug in soak: bad input (2), a disk with no room (1)."""
    if isinstance(error, BadInput):
        return f"error: {error}", 2
    if is_disk_full(error):
        return f"error: no room on disk ({error}); free space, then run it again (a night: soak run --resume RUN_ID)", 1
    return None
