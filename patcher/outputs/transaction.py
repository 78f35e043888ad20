"""A set of file writes and removals that happens whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patcher.errors import PatcherError


@dataclass(frozen=True)
class Write:
    target: Path
    data: bytes
    mode: int
    mtime_ns: int | None = None  # kept by the rename, so bytecode compiled against it holds


class Transaction:
    """Every new file is written beside its target first; only when all are written are they
    renamed into place, the replaced and removed files kept aside as hard links until the end.
    Any failure renames everything back and leaves the files as they were."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.removals: list[Path] = []

    def write(self, target: Path, data: bytes, mode: int, mtime_ns: int | None = None) -> None:
        self.writes.append(Write(target, data, mode, mtime_ns))

    def remove(self, target: Path) -> None:
        self.removals.append(target)

    def commit(self) -> None:
        staged: list[tuple[Path, Write]] = []
        made: list[Path] = []  # folders created for new files, outermost first
        undo: list[tuple[Path, Path | None]] = []  # (target, kept-aside copy or None if new)
        current = Path()
        pending: tuple[Path, Path | None] | None = None  # begun, not yet done
        try:
            for write in self.writes:
                current = write.target
                make_parents(write.target.parent, made)
                staged.append((stage(write), write))
            for tmp, write in staged:
                current = write.target
                aside = keep_aside(write.target) if write.target.exists() else None
                pending = (write.target, aside)
                os.replace(tmp, write.target)
                undo.append(pending)
                pending = None
            for target in self.removals:
                current = target
                pending = (target, keep_aside(target))
                target.unlink()
                undo.append(pending)
                pending = None
        except OSError as error:
            if pending is not None and pending[1] is not None:
                pending[1].unlink(missing_ok=True)  # its target was never touched
            stuck = roll_back(undo, [tmp for tmp, _ in staged], made)
            outcome = "nothing was changed" if not stuck else f"could not undo {', '.join(stuck)}"
            raise PatcherError(
                f"cannot write {current}: {error.strerror or error}; {outcome}"
            ) from error
        for _, aside in undo:
            if aside is not None:
                aside.unlink(missing_ok=True)


def roll_back(
    undo: list[tuple[Path, Path | None]], staged: list[Path], made: list[Path]
) -> list[str]:
    """Put every target back as it was; the ones that could not be."""
    stuck = []
    for target, aside in reversed(undo):
        try:
            if aside is None:
                target.unlink(missing_ok=True)
            else:
                os.replace(aside, target)
        except OSError:
            stuck.append(str(target))
    for tmp in staged:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()
    return stuck


def make_parents(folder: Path, made: list[Path]) -> None:
    """Create ``folder`` and its missing parents, adding each to ``made`` as it is created.
    Each is given the owner of the folder it was made in, as a new file is."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    owner = folder.stat()
    for path in reversed(missing):
        path.mkdir()
        made.append(path)
        give_owner(path, owner)


def give_owner(path: Path, like: os.stat_result) -> None:
    """``path`` owned as ``like`` is: root patching a user's files must not leave them root's.
    Only root may give a file away; for anyone else the file is theirs already, or the
    content is what matters."""
    if (like.st_uid, like.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):
            os.chown(path, like.st_uid, like.st_gid)


def owner_for(target: Path) -> os.stat_result:
    """Whose a written file is: the replaced file's owner, else that of the folder it goes in."""
    try:
        return target.stat()
    except FileNotFoundError:
        return target.parent.stat()


def stage(write: Write) -> Path:
    target = write.target
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".patcher")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(write.data)
        os.chmod(tmp, write.mode)
        give_owner(tmp, owner_for(target))
        if write.mtime_ns is not None:
            os.utime(tmp, ns=(write.mtime_ns, write.mtime_ns))
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def keep_aside(target: Path) -> Path:
    """A second name for ``target``'s current bytes, to rename back if the commit fails."""
    aside = target.with_name(f".{target.name}.patcher-old")
    aside.unlink(missing_ok=True)
    try:
        os.link(target, aside)
    except OSError:
        shutil.copy2(target, aside)
    return aside
