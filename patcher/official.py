"""The official wheel, the patchset's settled run over it, and the patched wheel built from it.

Every command that patches a release goes this way: its first run over the official wheel
(from the index, by range reads, before the download), what the command refuses, the run settled
over the wheel on disk, then the patched wheel. The command line names the wheel
(``patcher.cli.wheels.open_named_wheel``); what runs vLLM (``patcher.verify``,
``patcher.serving``) builds on the settled run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from patcher.cache import cache_dir, sha256_of
from patcher.codemods.base import FAILING, Status
from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.index import IndexEntry, PackageIndex, Release
from patcher.outputs.wheel import WheelPlan, build_wheel
from patcher.patchset import Patchset
from patcher.progress import step
from patcher.result import PatchResult
from patcher.sources.download import download_wheel
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.wheel import WheelSource


@dataclass(frozen=True)
class IndexedWheel:
    """``--vllm``'s wheel of ``--package`` for ``--platform``, as ``--index-url`` lists it.

    A context manager like ``WheelSource`` (with nothing to close), so a command holds either
    the same way."""

    index: PackageIndex
    release: Release
    entry: IndexEntry

    def remote(self) -> IndexWheelSource:
        """The wheel read in place, by range."""
        return IndexWheelSource(self.release, self.entry, self.index.client)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


NamedWheel = WheelSource | IndexedWheel
"""The official wheel a command line names: a ``--wheel`` file, open, or one on the index."""


def fail_on_errors(result: PatchResult) -> None:
    failed = [n for n, o in result.outcomes.items() if o.status in FAILING]
    if failed:
        outcome = result.outcomes[failed[0]]
        raise PatcherError(f"{failed[0]} {outcome.status}: {outcome.detail}")


def download_with_progress(wheel: IndexEntry, index: PackageIndex) -> Path:
    """The official wheel downloaded into the cache (or found there, verified)."""
    with step(f"downloading {wheel.filename}", wheel.size) as advance:
        shown = 0

        def downloaded_so_far(done: int, total: int | None) -> None:
            nonlocal shown
            advance(done - shown)
            shown = done

        return download_wheel(wheel, index.client, downloaded_so_far)


def downloaded(named: NamedWheel) -> tuple[Path, str]:
    """The wheel on disk with the sha256 of its bytes: ``--wheel`` itself, or the index's
    downloaded into the shared cache with the sha256 the index lists."""
    if isinstance(named, WheelSource):
        return named.path, named.sha256
    return download_with_progress(named.entry, named.index), named.entry.sha256


def first_run(named: NamedWheel, patchset: Patchset) -> PatchResult:
    """The patchset's run over the official wheel. From the index it reads members by range,
    so what the command refuses is refused before the whole wheel is downloaded."""
    if isinstance(named, WheelSource):
        result = run_patchset(patchset, named)
    else:
        with named.remote() as remote:
            result = run_patchset(patchset, remote)
    fail_on_errors(result)
    return result


@dataclass(frozen=True)
class OfficialRun:
    """The patchset's settled run over the official wheel, which is on disk and open (its
    sha256 known when it came from the index, hashed on first use when it is ``--wheel``)."""

    wheel: WheelSource
    result: PatchResult


@contextmanager
def settled_run(named: NamedWheel, patchset: Patchset, first: PatchResult) -> Iterator[OfficialRun]:
    """``first`` settled. Over ``--wheel`` it is the run; from the index the run is repeated on
    the downloaded wheel, whose sha256 matched the index, and settles what the range reads
    could not search for (``unknown``)."""
    if isinstance(named, WheelSource):
        yield OfficialRun(named, first)
        return
    path, sha256 = downloaded(named)
    with WheelSource(path, sha256) as wheel:
        result = run_patchset(patchset, wheel)
        fail_on_errors(result)
        searched = {n: o for n, o in first.outcomes.items() if o.status is not Status.UNKNOWN}
        if result.changed != first.changed or any(
            result.outcomes[n] != o for n, o in searched.items()
        ):
            raise PatcherError(
                f"{named.entry.filename}: the download disagrees with the range reads of it"
            )
        yield OfficialRun(wheel, result)


def settled_on_disk(
    named: NamedWheel, patchset: Patchset, first: PatchResult
) -> tuple[Path, str, PatchResult]:
    """``settled_run`` for a command that goes on with the wheel's path, not its open zip: the
    path, the sha256 of its bytes and the settled run."""
    with settled_run(named, patchset, first) as run:
        return run.wheel.path, run.wheel.sha256, run.result


def patched_wheel(plan: WheelPlan) -> Path:
    """The patched wheel in the cache; builds are reproducible, so one made before is reused.

    Keyed by the official wheel and by the patched texts, so a changed patchset or codemod
    builds anew instead of reusing a wheel patched by an older one.
    """
    patched = hashlib.sha256()
    for path in sorted(plan.result.changed):
        patched.update(f"{path}\0{plan.result.changed[path]}\0".encode())
    official = plan.official_sha256 or sha256_of(plan.official)
    dist = cache_dir() / "patched" / official / patched.hexdigest()[:16]
    existing = dist / plan.output_name()
    return existing if existing.exists() else build_wheel(plan, dist)
