"""The official wheel a command line names (``--wheel``, or ``--vllm`` on the index), read in
place or handed to ``patcher.official`` for the patchset's settled run over it.

Shared by the commands of ``patcher.cli.commands`` that read a release.
"""

from __future__ import annotations

import argparse

from patcher import distributions
from patcher.cli.terminal import err
from patcher.errors import PatcherError
from patcher.index import PackageIndex
from patcher.official import IndexedWheel, NamedWheel
from patcher.sources.base import Source
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.installation import InstalledSource, find_installation
from patcher.sources.wheel import WheelSource


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
