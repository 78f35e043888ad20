"""The ``patcher`` console script: ``--version`` and ``--help`` answered without a parser
(``patcher.cli.overview``), any other command line handed to ``patcher.cli.parser``.

How a run ends when it is stopped is decided once for every command, in
``patcher.cli.terminal`` (``stop_on_sigterm``, ``interrupted``), which the parser's ``main``
calls (it cannot import this module: that would be a circle): SIGTERM unwinds as Ctrl-C does,
and either ends in one line, ``patcher: interrupted``, with no traceback, even where the
interrupt broke something else on its way out (a pipe into a child the same Ctrl-C ended), with
130 for Ctrl-C and 143 for SIGTERM."""

from __future__ import annotations

import sys

from patcher.cli.overview import NARROWEST, VERSION, terminal_width, top_help


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
