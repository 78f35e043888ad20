"""What a patchset's run over one vLLM tree came to: each patch's outcome, the changed texts,
and the verdict they add up to. The engine makes one; outputs write it; the CLI shows it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from packaging.version import Version

from patcher.codemods.base import Outcome, Status
from patcher.patchset import Patchset


class Judged:
    """The verdict a set of patch outcomes adds up to, and whether it is what was declared."""

    outcomes: dict[str, Outcome]
    expected: str | None

    @property
    def verdict(self) -> str:
        return verdict_of([o.status for o in self.outcomes.values()])

    @property
    def drift(self) -> bool:
        return self.expected is not None and self.expected != self.verdict


@dataclass
class PatchResult(Judged):
    """Each patch's outcome on one tree, the files it changed, and the verdict they add up to."""

    version: str
    patchset: Patchset
    outcomes: dict[str, Outcome]
    originals: dict[str, str] = field(default_factory=dict)
    changed: dict[str, str] = field(default_factory=dict)
    distribution: str = "vllm"

    @property
    def expected(self) -> str | None:  # type: ignore[override]
        return self.patchset.expected(Version(self.version))

    def diff(self) -> str:
        """A unified diff of every changed file, ``a/`` and ``b/`` prefixed as git writes it."""
        chunks: list[str] = []
        for path in sorted(self.changed):
            chunks.extend(
                difflib.unified_diff(
                    self.originals[path].splitlines(keepends=True),
                    self.changed[path].splitlines(keepends=True),
                    f"a/{path}",
                    f"b/{path}",
                )
            )
        return "".join(chunks)


def verdict_of(statuses: list[Status]) -> str:
    if Status.FAILED in statuses:
        return "broken"
    if Status.UNSUPPORTED in statuses:
        return "unsupported"
    if Status.APPLIED in statuses:
        return "needs-patch"
    return "upstream"
