"""The command's consoles: Rich in a terminal, plain when piped."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from patcher.outputs.named import check_file, one_stdout, stdout_error


def console(stderr: bool = False) -> Console:
    """Rich in a terminal; piped, plain text wide enough that no cell is cut short."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=400, no_color=True)


out = console()
err = console(stderr=True)

NAME_MAX = 255
PATH_MAX = 4096
"""Linux's limits, in bytes, on one name in a path and on the whole path: past them, every
call fails with ENAMETOOLONG, so a longer path is refused where it is parsed."""


def path_argument(text: str) -> Path:
    """A path option's value (argparse names the option in the error): not empty, and short
    enough for the kernel, so a bad one is a one-line usage error, not a traceback later."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    raw = os.fsencode(text)
    if len(raw) >= PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(
            f"the path is too long ({len(raw)} bytes; a name may have {NAME_MAX}, "
            f"a path {PATH_MAX - 1})"
        )
    return Path(text)


def new_table(title: str, on: Console = out) -> Table:
    """Boxed in a terminal; piped, columns separated by spaces only, easy to grep."""
    return Table(title=title, title_justify="left", box=box.HEAVY_HEAD if on.is_terminal else None)


class GuardedStdout:
    """``sys.stdout`` whose failed writes raise ``StdoutError``: a closed pipe ends the command
    quietly and a full disk is one line, where Python would print a traceback (and Rich would
    exit 1 without a word on a closed pipe)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            raise stdout_error(error) from error

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            raise stdout_error(error) from error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def discard_stdout() -> None:
    """Point fd 1 at /dev/null once stdout has failed, so the interpreter's last flush of what
    is still buffered cannot fail again and print "Exception ignored" after the one line."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ else 1
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError):
        pass


def check_outputs(options: dict[str, Path | None]) -> None:
    """The named output files checked before the work that fills them; with one of them ``-``
    (stdout), the tables go to stderr so that stdout holds that output alone."""
    if one_stdout(options):
        out.file = sys.stderr
    for flag, path in options.items():
        if path is not None:
            check_file(path, flag)
