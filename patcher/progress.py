"""The long steps (a download, the RECORD check, the repack, a venv build, a server's start-up)
tell how far they are, without knowing who shows it.

The command line sets a display for its run unless ``--quiet`` is given: in a terminal,
transient bars (``patcher.cli.terminal.StepDisplay``); off a terminal (stderr to a file or a
pipe), a line on stderr as each step starts, a download with its size
(``patcher.cli.terminal.LineDisplay``), as pip and uv say their steps. With none set
(``--quiet``, the library called from Python, the bench) a step costs a context variable's
lookup and shows nothing. The display is set in the command's own thread: a step taken in a
worker thread shows nothing, so the steps are taken where the work is waited on.
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

    def note(self, message: str) -> None:
        """How far the step that is open has come (``settled 12 of 51 releases``)."""
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


def note(message: str) -> None:
    """How far a long step has come, shown by the display the command line set, if any: a line
    off a terminal, the open step's bar updated in one."""
    display = DISPLAY.get()
    if display is not None:
        display.note(message)


@contextlib.contextmanager
def shown_by(display: Display) -> Iterator[None]:
    """The steps run inside the block shown by ``display``."""
    token = DISPLAY.set(display)
    try:
        yield
    finally:
        DISPLAY.reset(token)
