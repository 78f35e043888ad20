"""The one error type the CLI turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class PatcherError(Exception):
    """A user-facing failure: bad input, an unreachable index, an unknown shape of code.

    One error is one line: a newline in its text (from a path, a config, an index) is shown
    escaped, never as a line of its own. An error of several problems says so
    (``PatcherError.several``) and is printed a line a problem."""

    exit_code = 2
    problems: tuple[str, ...] = ()

    @classmethod
    def several(cls, problems: list[str]) -> PatcherError:
        error = cls("\n".join(problems))
        error.problems = tuple(problems)
        return error

    def lines(self) -> list[str]:
        """What to print, a line each, newlines within each still in it (to be escaped)."""
        return list(self.problems) if self.problems else [str(self)]


class TimedOut(PatcherError):
    """A wait ran out: a server not healthy by its deadline, a request not answered in time.
    Said as a timeout, never as what the server would have answered."""


class NetworkError(PatcherError):
    """The index or a download did not answer well after every retry: refused, timed out, or
    failing (5xx). The input may be fine: run again later, or raise ``PATCHER_HTTP_TIMEOUT``."""

    exit_code = 3


class DriftError(PatcherError):
    """The outcome disagrees with what the patchset declares."""

    exit_code = 1


class StdoutError(PatcherError):
    """Stdout cannot take the command's output (a full disk behind ``> FILE``)."""


class OutputClosed(StdoutError):
    """Stdout's reader went away (``patcher matrix | head``): the command stops without a
    word, as ``git log | head`` does, with the exit status of a process ended by SIGPIPE."""

    exit_code = 128 + 13

    def __init__(self) -> None:
        super().__init__("stdout was closed")
