"""The ``patcher`` console script: ``--version`` and ``--help`` answered without a parser
(``patcher.cli.overview``), a command line handed to ``patcher.cli.parser``, unless the module
that declares its command answers it without one (``warm``: ``build-wheel`` writes a wheel it
built before again, ``patcher.cli.warm_wheel``).

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
    warm = getattr(declared(words), "warm", None)
    if warm is None:
        return run_command_line(words)
    with warm(words) as code:  # a command line run before, where it needs no parser now
        return run_command_line(words) if code is None else code


def declared(words: list[str]) -> object:
    """The module of ``patcher.cli.commands`` that declares the command ``words`` name (light:
    it imports nothing at its top), or None."""
    name = next((word for word in words if not word.startswith("-")), "").replace("-", "_")
    if not name.isidentifier() or name.startswith("_"):
        return None
    try:
        __import__(f"patcher.cli.commands.{name}")
    except ImportError:  # no such command: the parser says so
        return None
    return sys.modules[f"patcher.cli.commands.{name}"]


def run_command_line(words: list[str]) -> int:
    from patcher.cli.parser import main as parsed

    return parsed(words)
