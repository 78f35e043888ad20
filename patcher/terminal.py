"""The command's consoles: Rich in a terminal, plain when piped."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table


def console(stderr: bool = False) -> Console:
    """Rich in a terminal; piped, plain text wide enough that no cell is cut short."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=400, no_color=True)


out = console()
err = console(stderr=True)


def new_table(title: str, on: Console = out) -> Table:
    """Boxed in a terminal; piped, columns separated by spaces only, easy to grep."""
    return Table(title=title, title_justify="left", box=box.HEAVY_HEAD if on.is_terminal else None)
