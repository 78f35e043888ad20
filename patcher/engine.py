"""Runs a patchset's codemods over one vLLM tree and says what came of it."""

from __future__ import annotations

import difflib

from patcher import results_cache
from patcher.codemods.base import (
    BOM,
    FAILING,
    Codemod,
    Outcome,
    ShapeError,
    Status,
    Tree,
    decode,
    moved_class,
)
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.sources.base import Source


def needed_paths(patchset: Patchset, tree: Tree) -> list[str]:
    """The files a run of ``patchset`` reads: its requirements' and its codemods'."""
    wanted = {r.module for r in patchset.requires if tree.exists(r.module)}
    for codemod in patchset.codemods():
        wanted.update(tree.files(codemod))
    return sorted(wanted)


def run_patchset(patchset: Patchset, source: Source, memo: bool = True) -> PatchResult:
    """Apply every patch in order, each seeing the ones before it, all in memory.

    With ``memo``, a codemod whose input texts were seen before replays its cached run. Where
    a codemod could not search a source read by range (``unknown``), the source is settled
    (every Python member read) and the run repeated.
    """
    tree = Tree(source)
    source.prefetch(needed_paths(patchset, tree))
    version = str(source.version)
    try:
        missing = [r for r in patchset.requires if not tree.defines_class(r.module, r.class_name)]
    except ShapeError as error:
        failed = {name: Outcome(Status.FAILED, str(error)) for name in patchset.patch_names}
        return PatchResult(version, patchset, failed)
    if missing:
        why = ", ".join(f"no {r.class_name} in {r.module}" for r in missing)
        moved = next(
            (m for r in missing if (m := moved_class(tree, r.class_name, why)) is not None), None
        )
        outcome = moved or Outcome(Status.UNSUPPORTED, why)
        outcomes = {name: outcome for name in patchset.patch_names}
        return PatchResult(version, patchset, outcomes, distribution=source.distribution)
    outcomes = {}
    for codemod in patchset.codemods():
        outcomes[codemod.name] = run_codemod(codemod, tree) if memo else run_fresh(codemod, tree)
    if any(o.status is Status.UNKNOWN for o in outcomes.values()) and (
        not source.searchable and source.settle()
    ):
        return run_patchset(patchset, source, memo)  # settled: searched, not unknown
    originals = {path: tree_text_original(source, path) for path in tree.overlay}
    laid_out = {p: keep_layout(originals[p], t) for p, t in tree.overlay.items()}
    changed = {p: t for p, t in laid_out.items() if t != originals[p]}
    return PatchResult(version, patchset, outcomes, originals, changed, source.distribution)


def run_codemod(codemod: Codemod, tree: Tree) -> Outcome:
    """Run one codemod, or replay its cached run on the same input texts. A ``not-needed`` or
    an ``applied``/``present`` is proven afresh: the search behind it reads files beyond the
    inputs the cache is keyed by."""
    try:
        key = results_cache.codemod_key(codemod, tree)
    except ShapeError as error:  # an input it cannot even read
        return Outcome(Status.FAILED, str(error))
    before = tree.snapshot()
    cached = results_cache.load_codemod(key)
    if cached is not None:
        outcome, changed = cached
        tree.replay(changed)
    else:
        outcome = attempt(codemod, tree)
        changed = {p: t for p, t in tree.overlay.items() if before.get(p) != t}
        results_cache.store_codemod(key, outcome, changed)
    return proven(codemod, tree, outcome, before)


def run_fresh(codemod: Codemod, tree: Tree) -> Outcome:
    before = tree.snapshot()
    return proven(codemod, tree, attempt(codemod, tree), before)


def proven(codemod: Codemod, tree: Tree, outcome: Outcome, before: dict[str, str]) -> Outcome:
    """The outcome after its proof over the whole tree; one that fails leaves no change."""
    outcome = codemod.prove_absent(tree, outcome)
    if outcome.status in FAILING:
        tree.restore(before)
    return outcome


def attempt(codemod: Codemod, tree: Tree) -> Outcome:
    before = tree.snapshot()
    outcome = codemod.attempt(tree)
    if outcome.status in FAILING:
        tree.restore(before)  # a failed patch leaves nothing half-done behind
    return outcome


def tree_text_original(source: Source, path: str) -> str:
    data = source.read(path)
    return "" if data is None else decode(data, path)


def keep_layout(original: str, patched: str) -> str:
    """``patched`` with the original's BOM, and each untouched line with its original ending.

    libcst drops a BOM, writes new lines with the module's first line ending, and may give a
    neighbouring line the ending of the line it copied its layout from.
    """
    if original.startswith(BOM) and not patched.startswith(BOM):
        patched = BOM + patched
    if "\r" not in original:  # one line ending throughout: libcst keeps it
        return patched
    old, new = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    kept = list(new)
    matcher = difflib.SequenceMatcher(
        None,
        [line.rstrip("\r\n") for line in old],
        [line.rstrip("\r\n") for line in new],
        autojunk=False,
    )
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                kept[j1 + k] = old[i1 + k]
    return "".join(kept)
