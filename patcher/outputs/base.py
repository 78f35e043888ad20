"""The one interface every place patched code goes to offers the CLI."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from patcher.result import PatchResult


class Output(ABC):
    """Where ``patcher apply`` puts a patchset's changed files: all of them, or none."""

    @abstractmethod
    def write(self, result: PatchResult) -> str:
        """Put ``result``'s changed files in place; one line saying where they went."""

    def locked(self) -> AbstractContextManager[object]:
        """Held from reading the files to writing them: another patcher writing the same place
        in between would have its change lost. None is needed where ``write`` only adds."""
        return contextlib.nullcontext()
