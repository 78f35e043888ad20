"""What a patchset's run over one vLLM tree came to: each patch's outcome, the changed texts,
and the verdict they add up to. The engine makes one; outputs write it; the CLI shows it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from packaging.version import Version

from patcher import distributions
from patcher.codemods.base import Outcome, Verdict
from patcher.patchset import Patchset


@dataclass
class PatchResult:
    """Each patch's outcome on one tree, the files it changed, and the verdict they add up to."""

    version: str
    patchset: Patchset
    outcomes: dict[str, Outcome]
    originals: dict[str, str] = field(default_factory=dict)
    changed: dict[str, str] = field(default_factory=dict)
    distribution: str = distributions.DEFAULT

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(o.status for o in self.outcomes.values())

    @property
    def expected(self) -> Verdict | None:
        return self.patchset.expected(Version(self.version))

    @property
    def drift(self) -> bool:
        return self.verdict.drifts_from(self.expected)

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
