"""Patch a vLLM tree on disk in place: every file or none."""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from patcher.cache import folder_lock
from patcher.errors import PatcherError
from patcher.outputs.base import Output
from patcher.outputs.transaction import give_owner
from patcher.result import PatchResult


class TreeOutput(Output):
    """The tree on disk the patch was computed from, patched in place."""

    def __init__(self, root: Path, force: bool = False) -> None:
        self.root, self.force = root, force

    def locked(self) -> AbstractContextManager[object]:
        """The tree is read, patched and written under one lock: two applies at once each
        patched the tree as it was, and the second rename lost the first one's change."""
        return folder_lock(self.root)

    def write(self, result: PatchResult) -> str:
        written = write_tree(self.root, result.changed, force=self.force)
        return f"patched {len(written)} file(s) under {self.root}"


@dataclass
class Staged:
    """A target, its bytes and metadata before patching, and the temporary file beside it."""

    target: Path
    original: bytes
    meta: os.stat_result
    tmp: Path | None = None


def write_tree(root: Path, changed: dict[str, str], force: bool = False) -> list[Path]:
    """Write each changed file beside its target, then rename them all into place.

    A symlinked or read-only target is refused unless ``force`` (then a link is patched where it
    points). Any failure, while writing or renaming, puts back every file already renamed and
    removes every temporary file: the tree is as it was.
    """
    targets = [target_of(root, relative, force) for relative in sorted(changed)]
    staged: list[Staged] = []
    try:
        for relative, target in zip(sorted(changed), targets, strict=True):
            staged.append(Staged(target, target.read_bytes(), target.stat()))
            staged[-1].tmp = write_beside(target, changed[relative].encode(), staged[-1].meta)
    except BaseException as error:
        remove_temporaries(staged)
        if isinstance(error, OSError):
            raise PatcherError(f"cannot write the patched files under {root}: {error}") from error
        raise
    replaced: list[Staged] = []
    try:
        for entry in staged:
            assert entry.tmp is not None
            os.replace(entry.tmp, entry.target)
            entry.tmp = None
            replaced.append(entry)
    except BaseException as error:
        remove_temporaries(staged)
        lost = roll_back(replaced)
        if not isinstance(error, OSError):
            raise
        failed = staged[len(replaced)].target
        outcome = (
            f"could not restore {', '.join(map(str, lost))}"
            if lost
            else "every file already replaced was restored; the tree is as it was"
        )
        raise PatcherError(f"cannot replace {failed} ({error.strerror}): {outcome}") from error
    return [entry.target for entry in staged]


def target_of(root: Path, relative: str, force: bool) -> Path:
    """The file to replace for ``relative``; refuses links and read-only files unless ``force``."""
    target = root / relative
    links = [
        path
        for path in [*reversed(Path(relative).parents[:-1]), Path(relative)]
        if (root / path).is_symlink()
    ]
    writable = target.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    # root may write anything, but not an immutable file: os.access knows that
    read_only = not writable or not os.access(target, os.W_OK)
    if not force:
        if links:
            raise PatcherError(
                f"{root / links[0]} is a symlink (to {os.readlink(root / links[0])}); "
                "patching would write outside the tree or replace the link (--force patches "
                "the file it points to)"
            )
        if read_only:
            raise PatcherError(f"{target} is read-only (--force replaces it anyway)")
    return Path(os.path.realpath(target)) if links else target


def write_beside(target: Path, data: bytes, original: os.stat_result) -> Path:
    """``data`` in a temporary file in ``target``'s folder, with the target's mode and owner."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".patcher")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, stat.S_IMODE(original.st_mode))
        give_owner(tmp, original)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def remove_temporaries(staged: list[Staged]) -> None:
    for entry in staged:
        if entry.tmp is not None:
            entry.tmp.unlink(missing_ok=True)
            entry.tmp = None


def roll_back(replaced: list[Staged]) -> list[Path]:
    """Put each replaced file's original bytes back the same way; the ones that would not go."""
    lost = []
    for entry in reversed(replaced):
        try:
            os.replace(write_beside(entry.target, entry.original, entry.meta), entry.target)
        except OSError:
            lost.append(entry.target)
    return lost
