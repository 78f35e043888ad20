"""The ``patcher`` console script: ``--version`` and ``--help`` answered without a parser
(``patcher.cli.overview``), any other command line handed to ``patcher.cli.parser``."""

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
