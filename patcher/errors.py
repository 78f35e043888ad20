"""The one error type the CLI turns into a one-line message and a non-zero exit."""


class PatcherError(Exception):
    """A user-facing failure: bad input, an unreachable index, an unknown shape of code."""

    exit_code = 2


class DriftError(PatcherError):
    """The outcome disagrees with what the patchset declares."""

    exit_code = 1
