"""The one interface every place patched code goes to offers the CLI."""

from __future__ import annotations

from abc import ABC, abstractmethod

from patcher.result import PatchResult


class Output(ABC):
    """Where ``patcher apply`` puts a patchset's changed files: all of them, or none."""

    @abstractmethod
    def write(self, result: PatchResult) -> str:
        """Put ``result``'s changed files in place; one line saying where they went."""
