"""The long steps (a download, the RECORD check, the repack, a venv build, a server's start-up)
tell how far they are, without knowing who shows it.

The command line sets a display for its run when stderr is a terminal and ``--quiet`` is not
given (transient bars, ``patcher.cli.terminal.StepDisplay``); with none set (a pipe, ``--quiet``,
the library called from Python, the bench) a step costs a context variable's lookup and shows
nothing, so piped output holds results and tables only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol

Advance = Callable[[int], None]
"""Adds that many units (bytes) to the step's count."""


class Display(Protocol):
    def step(self, what: str, total: int | None) -> contextlib.AbstractContextManager[Advance]:
        """Show ``what`` while the block runs: a bar toward ``total`` bytes, or with no total a
        spinner and the time taken."""
        ...


DISPLAY: ContextVar[Display | None] = ContextVar("patcher_progress_display", default=None)


def nothing(amount: int) -> None:
    """The ``Advance`` of a step that no display shows."""


@contextlib.contextmanager
def step(what: str, total: int | None = None) -> Iterator[Advance]:
    """A long step, shown by the display the command line set, if any."""
    display = DISPLAY.get()
    if display is None:
        yield nothing
        return
    with display.step(what, total) as advance:
        yield advance


@contextlib.contextmanager
def shown_by(display: Display) -> Iterator[None]:
    """The steps run inside the block shown by ``display``."""
    token = DISPLAY.set(display)
    try:
        yield
    finally:
        DISPLAY.reset(token)
