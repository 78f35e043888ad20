"""The ``patcher`` command line: the parser, and the dispatch to the module of each command.

This module imports nothing heavy: each command is declared by its own light module of
``patcher.cli.commands`` (``COMMANDS``), whose options import what the command runs only when
that command runs, or when its own ``--help`` is asked for. ``build_parser()`` builds them all,
for the documentation.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection

from patcher.cli.modes import refuse_empty_names, refuse_misplaced
from patcher.cli.overview import (
    COMMANDS,
    DESCRIPTION,
    EPILOG,
    QUIET_HELP,
    SUBCOMMANDS_HELP,
    VERBOSE_HELP,
    VERSION,
    help_column_limit,
    help_width,
    terminal_width,
)
from patcher.cli.terminal import (
    GuardedStdout,
    closed_stdout,
    discard_stdout,
    err,
    interrupted,
    interruption,
    json_only,
    out,
    printable,
    stop_on_sigterm,
)
from patcher.errors import OutputClosed, PatcherError, StdoutError

TYPE_CHECKING = False  # typing takes milliseconds to import, and this module must start fast
if TYPE_CHECKING:
    from typing import Any


class HelpFormatter(argparse.HelpFormatter):
    """Wraps at spaces only (never ``serve-`` / ``bench``), keeps the examples' lines as they
    are, and shows each option's default where it has one."""

    def __init__(self, prog: str, width: int | None = None) -> None:
        """``width`` fixes the columns (the docs' CLI page); else the terminal's."""
        width = help_width(terminal_width()) if width is None else width
        super().__init__(prog, max_help_position=help_column_limit(width), width=width)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        for sub in self._iter_indented_subactions(action):  # indented: at their own indent
            length = len(self._format_action_invocation(sub)) + self._current_indent
            self._action_max_length = max(self._action_max_length, length)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap  # as argparse does: only help text is wrapped

        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        kept = []
        for line in text.splitlines():
            if line.startswith(" ") or not line:
                kept.append(indent + line)
            else:
                kept += textwrap.wrap(
                    line, width, initial_indent=indent, subsequent_indent=indent,
                    break_on_hyphens=False, break_long_words=False,
                )  # fmt: skip
        return "\n".join(kept)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.option_strings and has_default(action)
        if shown and "default:" not in text and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def has_default(action: argparse.Action) -> bool:
    """Whether an option has a default worth showing: not absent, off, empty or hidden (0 is
    one, though it equals False)."""
    default = action.default
    return not (
        default is None or default is False or default == "" or default is argparse.SUPPRESS
    )


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subparsers action: each command gets its summary, its examples and ``--quiet``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        command = COMMANDS.get(name)
        if command is not None:
            kwargs.update(help=command.summary, description=command.summary + ".")
            kwargs.update(epilog=command.epilog)
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # one meaning per option: --vers is not --versions
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        # before or after the command: here only where given, so the command's own default
        # does not overwrite a -q given before it
        parser.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP
        )
        parser.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
        return parser

    def listed(self, name: str) -> None:
        """A command in the list only, with its summary: its module is not imported."""
        super().add_parser(name, help=COMMANDS[name].summary, add_help=False, allow_abbrev=False)


def build_parser(full: Collection[str | None] | None = None) -> argparse.ArgumentParser:
    """The ``patcher`` parser; the commands in ``full`` (default: all) get their options (the
    modules they run are imported), the others only their summary line."""
    parser = argparse.ArgumentParser(
        prog="patcher",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    parser.register("action", "parsers", Commands)
    parser.add_argument("--version", action="version", version=VERSION)
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        title="commands",
        help=SUBCOMMANDS_HELP,
    )
    assert isinstance(commands, Commands)
    for name, command in COMMANDS.items():
        if full is None or name in full:
            command.arguments(commands.add_parser(name))
        else:
            commands.listed(name)
    return parser


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def resolve_values(args: argparse.Namespace) -> None:
    """Values made absolute where they are given: an interpreter runs with another working
    folder, so a relative ``--python`` is the caller's. A ``--patchset`` that is none is refused
    here, before any command reads an index or a tree."""
    for name in ("python", "transformers_python"):
        python = getattr(args, name, None)  # a str, or a Path where the option checks its length
        if python is not None and os.sep in str(python):
            setattr(args, name, type(python)(os.path.abspath(python)))
    if getattr(args, "installed", False) and getattr(args, "python", "") is None:
        args.python = activated_python(args)
    patchset = getattr(args, "patchset", None)
    if isinstance(patchset, str) and patchset.strip() != "all":
        from patcher import patchset as patchsets

        for name in patchset.split(","):  # each is the user's error before any work is done
            if name.strip():
                patchsets.load(name.strip())
    if getattr(args, "platform", "") is None:
        from patcher.index import machine_platform  # the network stack: a command's, not --help's

        args.platform = machine_platform()


def activated_python(args: argparse.Namespace) -> str | None:
    """``--installed`` without ``--python``: the activated venv's interpreter (``VIRTUAL_ENV``),
    said on stderr, where one is activated; else None, this interpreter (patcher's own)."""
    folder = os.environ.get("VIRTUAL_ENV")
    if not folder or os.path.realpath(folder) == os.path.realpath(sys.prefix):
        return None  # none, or patcher's own (nox's session, a venv patcher was installed in)
    python = os.path.join(os.path.abspath(folder), "bin", "python")
    if not os.path.exists(python):
        raise PatcherError(f"$VIRTUAL_ENV is {folder}, which has no bin/python; give --python")
    if not args.quiet:
        said = f"patcher: reading the vLLM of {python} ($VIRTUAL_ENV)"
        err.print(said, markup=False, soft_wrap=True)
    return python


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, whose defaults tell a flag given from one left out."""
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def run_with_progress(args: argparse.Namespace) -> int:
    """The command, its long steps shown unless ``--quiet``: as transient bars when stderr is a
    terminal (as lines there too with ``--verbose``), else as a line each on stderr, as pip
    and uv say their steps in a log."""
    from patcher.progress import shown_by

    if err.live and not args.verbose:
        from patcher.cli.terminal import StepDisplay

        with shown_by(StepDisplay(err)):
            code: int = args.run(args)
    elif not args.quiet:
        from patcher.cli.terminal import LineDisplay

        with shown_by(LineDisplay(err)):
            code = args.run(args)
    else:
        code = args.run(args)
    return code


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser({chosen_command(words)})
    args = parser.parse_args(words)
    out.quiet = err.quiet = args.quiet  # out too: a "-" output moves its tables to stderr
    if getattr(args, "format", None) == "json":
        json_only()  # stdout holds the JSON document alone; stderr progress and errors
    stop_on_sigterm()  # the one way a stopped run ends: patcher.cli.terminal
    stdout = sys.stdout
    sys.stdout = GuardedStdout(stdout)  # type: ignore[assignment]
    try:
        if stdout is None:  # before any work: its result would have nowhere to go
            raise closed_stdout()
        command = subcommand(parser, args.command)
        refuse_misplaced(args, command)
        refuse_empty_names(args, command)
        resolve_values(args)
        code: int = run_with_progress(args)
        sys.stdout.flush()
        return code
    except PatcherError as error:
        if (stop := interruption(error)) is not None:  # raised while an interrupt unwound
            return interrupted(stop)
        if not isinstance(error, OutputClosed):
            from patcher.pipconfig import redacted  # an index URL may hold a password

            # a line a problem; a newline within one (a path, a config) is escaped
            for problem in error.lines():
                line = printable(redacted(problem), newlines=True)
                err.print(f"patcher: error: {line}", markup=False, soft_wrap=True)
        return error.exit_code
    except (KeyboardInterrupt, Exception) as error:
        if (stop := interruption(error)) is None:
            raise
        return interrupted(stop)
    finally:
        try:
            sys.stdout.flush()
        except StdoutError:  # after a failure above: what is still buffered is dropped
            discard_stdout()
        sys.stdout = stdout
        out.file = None  # back to stdout, if a "-" output moved it
        out.quiet = err.quiet = False
        out.tables = err.tables = True
