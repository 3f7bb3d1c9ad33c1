"""The few exceptions that cross module boundaries."""


class BadInput(Exception):
    """A malformed task, config or argument: the CLI prints it as one line and exits 2."""
