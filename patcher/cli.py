"""The ``patcher`` command line: the parser, and the dispatch to the module of each command.

This module imports nothing heavy: each command's options and code live in its own module
(``COMMANDS``), imported only when that command runs, or when its own ``--help`` is asked for.
``build_parser()`` builds them all, for the documentation.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Collection

from patcher.cli_main import (
    COMMANDS,
    DESCRIPTION,
    SUBCOMMANDS_HELP,
    VERSION,
    help_column_limit,
    help_width,
    terminal_width,
)
from patcher.errors import OutputClosed, PatcherError, StdoutError
from patcher.terminal import GuardedStdout, closed_stdout, discard_stdout, err, out

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


QUIET_HELP = "no tables of context and no progress on stderr; results and errors still print"


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subparsers action: each command gets its summary, its examples and ``--quiet``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        command = COMMANDS.get(name)
        if command is not None:
            kwargs.update(help=command.summary, description=command.summary + ".")
            kwargs.update(epilog=command.epilog)
        kwargs.setdefault("formatter_class", HelpFormatter)
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
        return parser

    def listed(self, name: str) -> None:
        """A command in the list only, with its summary: its module is not imported."""
        super().add_parser(name, help=COMMANDS[name].summary, add_help=False)


def build_parser(full: Collection[str | None] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The ``patcher`` parser; the commands in ``full`` get their options (their modules are
    imported), the others only their summary line."""
    parser = argparse.ArgumentParser(
        prog="patcher", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    parser.register("action", "parsers", Commands)
    parser.add_argument("--version", action="version", version=VERSION)
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        title="commands",
        help=SUBCOMMANDS_HELP,
    )
    assert isinstance(commands, Commands)
    wanted = {COMMANDS[name].module for name in full if name in COMMANDS}
    modules = dict.fromkeys(command.module for command in COMMANDS.values())  # in order
    for module in modules:
        if module in wanted:
            importlib.import_module(module).add_parsers(commands)
        else:
            for name in (n for n, c in COMMANDS.items() if c.module == module):
                commands.listed(name)
    return parser


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


SOURCE_MODES = {
    "vllm": "--vllm",
    "wheel": "--wheel",
    "tree": "--source",
    "git": "--git",
    "installed": "--installed",
}
"""The options that pick the ``Source`` a command reads, each under the name argparse keeps it
by: one of them is its mode."""

BELONGS: dict[str, dict[str, tuple[str, ...]]] = {
    "diff": {
        "ref": ("--git",),
        "vllm_version": ("--source", "--git"),
        "package": ("--vllm", "--wheel"),
        "index_url": ("--vllm",),
        "platform": ("--vllm",),
    },
    "apply": {
        "ref": ("--git",),
        "branch": ("--git",),
        "vllm_version": ("--source", "--git"),
        "force": ("--source",),
        "python": ("--installed",),
        "require_patch": ("--installed",),
    },
    "build-wheel": {
        "package": ("--vllm", "--wheel"),
        "index_url": ("--vllm",),
        "platform": ("--vllm",),
    },
    "verify": {
        "package": ("--vllm", "--wheel"),
        "index_url": ("--vllm",),
        "platform": ("--vllm",),
        "python": ("--installed",),
    },
    "preflight": {"index_url": ("--vllm",)},
    "serve-bench": {
        **dict.fromkeys(
            (
                "wheel",
                "vllm",
                "package",
                "index_url",
                "patched_wheel",
                "with_patched",
                "barrier_chain",
                "patchset",
                "drafter_kind",
                "replica",
            ),
            ("--device cpu",),
        ),
        **dict.fromkeys(("port", "trust_remote_code"), ("--device gpu",)),
    },
}
"""Per command, the options that do something in some of its modes only; any other mode
refuses them, so a flag is never silently ignored."""

COMMA_LISTS = ("patchset", "versions", "package")
"""``matrix``'s options that take comma lists."""


def mode_of(args: argparse.Namespace) -> str:
    """The mode a command line chose, spelled as its flag: ``--git``, ``--device cpu``."""
    if args.command == "serve-bench":
        return f"--device {args.device}"
    return next(
        flag
        for name, flag in SOURCE_MODES.items()
        if getattr(args, name, None) not in (None, False)
    )


def refuse_misplaced(args: argparse.Namespace, command: argparse.ArgumentParser) -> None:
    """Before any work: a flag given where it does nothing, and an empty name in a list."""
    flags = {a.dest: a.option_strings[0] for a in command._actions if a.option_strings}
    if args.command in BELONGS:
        mode = mode_of(args)
        for dest, modes in BELONGS[args.command].items():
            given = getattr(args, dest) != command.get_default(dest)
            if given and mode not in modes:
                raise PatcherError(
                    f"{flags[dest]} goes with {' or '.join(modes)} only, not with {mode}"
                )
    lists = COMMA_LISTS if args.command == "matrix" else ("patchset",)
    for dest in lists:
        value = getattr(args, dest, None)
        if value is not None and "" in (v.strip() for v in value.split(",")):
            what = "an empty name" if "," in value else "no name"
            raise PatcherError(f"{flags[dest]} {value!r} has {what}")


def resolve_values(args: argparse.Namespace) -> None:
    """Values made absolute where they are given: an interpreter runs with another working
    folder, so a relative ``--python`` is the caller's."""
    python = getattr(args, "python", None)  # a str, or a Path where the option checks its length
    if python is not None and os.sep in str(python):
        args.python = type(python)(os.path.abspath(python))
    if getattr(args, "platform", "") is None:
        from patcher.index import machine_platform  # the network stack: a command's, not --help's

        args.platform = machine_platform()


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, whose defaults tell a flag given from one left out."""
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def interrupt_on_sigterm() -> None:
    """Let SIGTERM unwind like Ctrl-C, so temporary files are removed on the way out."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread: it cannot set handlers
        signal.signal(signal.SIGTERM, handler)


def run_with_progress(args: argparse.Namespace) -> int:
    """The command, its long steps shown as transient bars when stderr is a terminal and
    ``--quiet`` is not given; otherwise they show nothing."""
    if not err.live:
        code: int = args.run(args)
        return code
    from patcher.progress import shown_by
    from patcher.terminal import StepDisplay

    with shown_by(StepDisplay(err)):
        code = args.run(args)
    return code


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser({chosen_command(words)})
    args = parser.parse_args(words)
    out.quiet = err.quiet = args.quiet  # out too: a "-" output moves its tables to stderr
    out.tables_as_json = getattr(args, "format", None) == "json"
    interrupt_on_sigterm()
    stdout = sys.stdout
    sys.stdout = GuardedStdout(stdout)  # type: ignore[assignment]
    try:
        if stdout is None:  # before any work: its result would have nowhere to go
            raise closed_stdout()
        refuse_misplaced(args, subcommand(parser, args.command))
        resolve_values(args)
        code: int = run_with_progress(args)
        sys.stdout.flush()
        return code
    except PatcherError as error:
        if not isinstance(error, OutputClosed):
            from patcher.pipconfig import redacted  # an index URL may hold a password

            for line in redacted(str(error)).splitlines():  # several problems: a line each
                err.print(f"patcher: error: {line}", markup=False, soft_wrap=True)
        return error.exit_code
    except KeyboardInterrupt:
        err.print("patcher: interrupted", markup=False)
        return 130
    finally:
        try:
            sys.stdout.flush()
        except StdoutError:  # after a failure above: what is still buffered is dropped
            discard_stdout()
        sys.stdout = stdout
        out.file = None  # back to stdout, if a "-" output moved it
        out.quiet = err.quiet = out.tables_as_json = False


if __name__ == "__main__":
    sys.exit(main())
