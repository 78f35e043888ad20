"""Runs a patchset's codemods over one vLLM tree and says what came of it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from packaging.version import Version

from patcher import results_cache
from patcher.codemods.base import Codemod, Outcome, Status, Tree
from patcher.patchset import Patchset
from patcher.sources.base import Source


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


def needed_paths(patchset: Patchset, source: Source) -> list[str]:
    names = source.names()
    wanted = {r.module for r in patchset.requires}
    for codemod in patchset.codemods():
        wanted.update(codemod.paths(names))
    return sorted(wanted & set(names))


def run_patchset(patchset: Patchset, source: Source, memo: bool = True) -> PatchResult:
    """Apply every patch in order, each seeing the ones before it, all in memory.

    With ``memo``, a codemod whose input texts were seen before replays its cached run.
    """
    source.prefetch(needed_paths(patchset, source))
    tree = Tree(source)
    version = str(source.version)
    missing = [r for r in patchset.requires if not tree.defines_class(r.module, r.class_name)]
    if missing:
        why = ", ".join(f"no {r.class_name} in {r.module}" for r in missing)
        outcomes = {name: Outcome(Status.UNSUPPORTED, why) for name in patchset.patch_names}
        return PatchResult(version, patchset, outcomes, distribution=source.distribution)
    outcomes = {}
    for codemod in patchset.codemods():
        outcomes[codemod.NAME] = run_codemod(codemod, tree) if memo else run_fresh(codemod, tree)
    originals = {path: tree_text_original(source, path) for path in tree.overlay}
    changed = {p: t for p, t in tree.overlay.items() if t != originals[p]}
    return PatchResult(version, patchset, outcomes, originals, changed, source.distribution)


def run_codemod(codemod: Codemod, tree: Tree) -> Outcome:
    """Run one codemod, or replay its cached run on the same input texts."""
    key = results_cache.codemod_key(codemod, tree)
    cached = results_cache.load_codemod(key)
    if cached is not None:
        outcome, changed = cached
        tree.replay(changed)
        return outcome
    before = tree.snapshot()
    outcome = run_fresh(codemod, tree)
    changed = {p: t for p, t in tree.overlay.items() if before.get(p) != t}
    results_cache.store_codemod(key, outcome, changed)
    return outcome


def run_fresh(codemod: Codemod, tree: Tree) -> Outcome:
    before = tree.snapshot()
    outcome = codemod.run(tree)
    if outcome.status is Status.FAILED:
        tree.restore(before)  # a failed patch leaves nothing half-done behind
    return outcome


def tree_text_original(source: Source, path: str) -> str:
    data = source.read(path)
    return "" if data is None else data.decode("utf-8")
