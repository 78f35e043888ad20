"""The official wheel a command line names, and the patchset's run over it.

Shared by the commands of ``patcher.cli.patching``, ``patcher.cli.serve`` and
``patcher.cli.doctor``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from patcher import distributions
from patcher.cli.terminal import err
from patcher.codemods.base import FAILING, Status
from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.index import IndexEntry, PackageIndex, Release
from patcher.patchset import Patchset
from patcher.progress import step
from patcher.result import PatchResult
from patcher.sources.base import Source
from patcher.sources.download import download_wheel
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.installation import InstalledSource, find_installation
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


def open_named_wheel(args: argparse.Namespace) -> NamedWheel:
    """``--wheel`` opened (once, for the command's length: the caller closes it), or ``--vllm``'s
    wheel found on the index: ``--package``, ``--index-url`` and ``--platform`` resolved and
    validated here, so nothing below the command reads its options."""
    chosen = distributions.DEFAULT if args.package is None else args.package  # '' is refused
    package = distributions.validate_name(chosen)
    if args.wheel:
        wheel = WheelSource(args.wheel)  # a clear error if it is not a vLLM wheel
        if args.package and wheel.distribution != package:
            wheel.close()
            own = wheel.distribution
            raise PatcherError(f"{args.wheel.name} is a wheel of {own}, not of {package}")
        return wheel
    index = PackageIndex(args.index_url, distribution=package)
    release = index.release(args.vllm)
    return IndexedWheel(index, release, release.require_wheel(args.platform))


def read_in_place(named: NamedWheel) -> Source:
    """The wheel's members as a ``Source``: the file itself, or the index's wheel by range."""
    return named if isinstance(named, WheelSource) else named.remote()


def say_if_unchecked(source: Source) -> None:
    """After a command's result read from the index's wheel by range: a line on stderr saying
    that the sha256 the index lists was not checked. It qualifies the result, so ``--quiet``
    keeps it, as it keeps errors (a quiet diff of unchecked bytes said nothing: hostile pass)."""
    if isinstance(source, IndexWheelSource) and not source.sha256_checked:
        err.print(f"patcher: note: {source.unchecked_note()}", markup=False, soft_wrap=True)


def open_release(args: argparse.Namespace) -> Source:
    """The release ``add_release_options`` named, read in place (by range, from the index)."""
    if args.python and not args.installed:
        raise PatcherError("--python goes with --installed only")
    if args.package and not args.vllm:
        raise PatcherError("--package goes with --vllm only")
    if args.installed:
        return InstalledSource(find_installation(args.python))
    return read_in_place(open_named_wheel(args))


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
