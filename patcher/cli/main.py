"""The ``patcher`` console script: ``--version`` and ``--help`` answered without a parser
(``patcher.cli.overview``), any other command line handed to ``patcher.cli.parser``.

How a run ends when it is stopped is decided here, once for every command: SIGTERM unwinds as
Ctrl-C does, and either ends in one line, ``patcher: interrupted``, with no traceback, even where
the interrupt broke something else on its way out (a pipe into a child the same Ctrl-C ended),
with 130 for Ctrl-C and 143 for SIGTERM."""

from __future__ import annotations

import sys

from patcher.cli.overview import NARROWEST, VERSION, terminal_width, top_help


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwinding as Ctrl-C does (every temporary file removed on the way out), but
    ending with its own status: 143, where Ctrl-C's is 130."""


SIGINT_STATUS = 128 + 2
SIGTERM_STATUS = 128 + 15


def stop_on_sigterm() -> None:
    """Let SIGTERM unwind like Ctrl-C (``Terminated``), so temporary files are removed on the
    way out. Ctrl-C keeps Python's own handler (``KeyboardInterrupt``)."""
    import contextlib
    import signal

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    with contextlib.suppress(ValueError):  # not the main thread: it cannot set handlers
        signal.signal(signal.SIGTERM, handler)


def interruption(error: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``error``: itself, or one in its chain, as when Ctrl-C also ended a
    child process (xz) and the write into its pipe failed while the interrupt unwound."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def interrupted(stop: KeyboardInterrupt) -> int:
    """The one line an interrupted command ends with, and its exit status: 143 for SIGTERM,
    130 for Ctrl-C (SIGINT), as a shell reports a process those signals ended."""
    import contextlib

    from patcher.cli.terminal import err

    with contextlib.suppress(OSError):  # stderr gone too: the status still says it
        err.print("patcher: interrupted", markup=False)
    return SIGTERM_STATUS if isinstance(stop, Terminated) else SIGINT_STATUS


def main(argv: list[str] | None = None) -> int:
    """The console script: the two answers that need no parser, else the command line's."""
    words = sys.argv[1:] if argv is None else argv
    columns = terminal_width()
    if words == ["--version"] or (words in (["-h"], ["--help"]) and columns >= NARROWEST):
        try:
            sys.stdout.write(VERSION + "\n" if words == ["--version"] else top_help(columns))
            sys.stdout.flush()
        except OSError:  # a closed pipe or a full disk: the command line's own handling
            pass
        else:
            return 0
    from patcher.cli.parser import main as run_command_line

    return run_command_line(words)
