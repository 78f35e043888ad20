"""What the serving commands' handlers share (serve-bench, preflight, verify
--aux-states-reference, replica): the progress line on stderr, a wheel's file names, the refusal
of a release with nothing to patch. Each handler is in its module of ``patcher.cli.commands``."""

from __future__ import annotations

import zipfile
from pathlib import Path

from patcher.cli.terminal import err
from patcher.codemods.base import Verdict
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.result import PatchResult


def progress(message: str) -> None:
    if not err.quiet:
        err.print(message, markup=False, soft_wrap=True)


def release_files(wheel: Path) -> frozenset[str]:
    """The file names in a wheel: what the replica generator chooses by."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            return frozenset(archive.namelist())
    except (OSError, zipfile.BadZipFile) as error:
        raise PatcherError(f"{wheel}: cannot read wheel: {error}") from error


def refuse_noop(patchset: Patchset, result: PatchResult) -> None:
    """Nothing to patch means nothing to serve as patched: say so before the download."""
    if result.verdict is not Verdict.NEEDS_PATCH:
        raise PatcherError(
            f"{result.distribution} {result.version} is {result.verdict} for {patchset.name}: "
            "nothing to patch, so no patched run"
        )
