"""The commands of ``patcher`` and its top-level help, without argparse.

Python starts in about 12 ms here, and argparse, with the ``re`` module it loads, takes as long
again; ``patcher --version`` and ``patcher --help`` need neither. The console script
(``patcher.cli.main``) answers them from ``COMMANDS``, in the very text argparse renders for
them (a test compares the two); the parser (``patcher.cli.parser``) reads the same ``COMMANDS``,
which the modules of ``patcher.cli.commands`` declare, one each. Nothing here imports another
module of the command line at the top.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping

from patcher import __version__
from patcher.cli.command import Command

TYPE_CHECKING = False  # typing takes milliseconds to import: --version does not wait for it
if TYPE_CHECKING:
    from typing import TextIO


class Commands(Mapping[str, "Command"]):
    """Every subcommand by name, in the order ``patcher --help`` lists them (by name): derived
    from the modules of ``patcher.cli.commands``, found in its folder and imported on first
    use (they are light: ``patcher --version`` imports none of them)."""

    def __init__(self) -> None:
        self.loaded: dict[str, Command] | None = None

    @property
    def commands(self) -> dict[str, Command]:
        if self.loaded is None:
            import importlib

            folder = os.path.join(os.path.dirname(__file__), "commands")
            found = []
            with os.scandir(folder) as entries:
                for entry in entries:
                    module, dot, suffix = entry.name.partition(".")
                    if dot and suffix == "py" and module != "__init__" and entry.is_file():
                        found.append(module)
            declared = [
                Command.of(importlib.import_module(f"patcher.cli.commands.{module}"))
                for module in found
            ]
            self.loaded = {c.name: c for c in sorted(declared, key=lambda c: c.name)}
        return self.loaded

    def __getitem__(self, name: str) -> Command:
        return self.commands[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)


COMMANDS = Commands()
"""Every subcommand, in the order ``patcher --help`` lists them."""

DESCRIPTION = (
    "Structure-matched source patches for vLLM, with a compatibility matrix: a patched wheel "
    "repacked from the official one, an installed vLLM patched in place, verification on CPU "
    "with vLLM's own code, and serving sessions."
)


SUBCOMMANDS_HELP = "patcher COMMAND --help shows its options and examples"
VERSION = f"patcher {__version__}"
QUIET_HELP = "no tables of context and no progress on stderr; results and errors still print"
VERBOSE_HELP = "each long step as a line on stderr in a terminal too, where it is a bar otherwise"
HELP_OPTIONS = (("-h, --help", "show this help message and exit"),
                ("--version", "show program's version number and exit"),
                ("-q, --quiet", QUIET_HELP),
                ("-v, --verbose", VERBOSE_HELP))  # fmt: skip
"""The ``patcher`` parser's options, as its help shows them; ``-q`` and ``-v`` go before or
after the command."""
EPILOG = """\
exit status:
  0    done; verified; no drift
  1    a check failed, or a release drifted from its patchset
  2    bad input, or refused before any work
  3    the network failed (refused, timed out or failing after every retry)
  130  interrupted (Ctrl-C)
  141  stdout closed (a broken pipe)
  143  stopped by SIGTERM

environment:
  PATCHER_CACHE_DIR     the cache (default: the user's)
  PATCHER_HTTP_TIMEOUT  seconds per request (default: 30)
  PIP_INDEX_URL         the index, as pip reads it
  NO_COLOR              no colour in a terminal"""
"""The end of ``patcher --help``: what the exit status means, and the environment read."""
NARROWEST = 60
"""Below this width argparse wraps the usage line too: the parser answers ``--help`` then."""


def terminal_width(stream: TextIO | None = None) -> int:
    """The columns of the terminal ``stream`` (default: stdout) is, or ``COLUMNS``; without
    ``shutil``, which ``--help`` would pay for importing."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size((stream or sys.stdout).fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def help_width(columns: int) -> int:
    """The width ``patcher.cli.HelpFormatter`` wraps at, for a terminal ``columns`` wide."""
    return max(columns, 40) - 2


def help_position(width: int) -> int:
    """Where the help column starts: argparse's rule over the widest entry (a command is listed
    2 further in than the options)."""
    widest = max(
        *(len(option) + 2 for option, _ in HELP_OPTIONS),
        len("COMMAND") + 2,
        *(len(name) + 4 for name in COMMANDS),
    )
    return min(widest + 2, help_column_limit(width))


def help_column_limit(width: int) -> int:
    """The furthest in the help column starts: a third of the width, at most 32."""
    return min(32, width // 3)


def words_wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken at spaces only, as textwrap does it with
    ``break_on_hyphens`` and ``break_long_words`` off."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def top_help(columns: int) -> str:
    """``patcher --help`` for a terminal ``columns`` wide, without argparse."""
    width = help_width(columns)
    position = help_position(width)

    def entry(indent: int, name: str, text: str) -> list[str]:
        lines = words_wrapped(text, max(width - position, 11))
        if len(name) <= position - indent - 2:
            first = [" " * indent + name.ljust(position - indent - 2) + "  " + lines[0]]
        else:
            first = [" " * indent + name, " " * position + lines[0]]
        return first + [" " * position + line for line in lines[1:]]

    usage = "usage: patcher [-h] [--version] [-q] [-v] COMMAND ..."
    parts = [usage, "", *words_wrapped(DESCRIPTION, width)]
    parts += ["", "options:"]
    for option, text in HELP_OPTIONS:
        parts += entry(2, option, text)
    parts += ["", "commands:", *entry(2, "COMMAND", SUBCOMMANDS_HELP)]
    for name, command in COMMANDS.items():
        parts += entry(4, name, command.summary)
    parts += ["", *EPILOG.splitlines()]
    return "\n".join(parts) + "\n"
