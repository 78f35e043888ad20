"""A replica on disk: ``OUT/target``, ``OUT/drafter`` and ``OUT/patcher-replica.json``.

Written into a staging folder beside ``OUT`` and renamed into place, so ``OUT`` is either the old
replica or the whole new one. A folder that is not a replica is never replaced, nor one that
holds a file the replica did not write (its manifest lists what it wrote), but with ``--force``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from patcher.cache import removed_on_failure
from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.outputs.named import check_folder
from patcher.replica.build import Replica
from patcher.replica.weights import SeededWeights

MANIFEST = "patcher-replica.json"
NO_WEIGHTS = "none: configs only, for --load-format dummy"


def write_replica(
    replica: Replica,
    out: Path,
    option: str | None = None,
    weights: SeededWeights | None = None,
    force: bool = False,
) -> Path:
    """Write ``replica`` to ``out``, replacing an earlier replica there; return ``out``.

    ``option`` is the flag that named ``out`` (``--out``), whose folder must then exist (see
    ``patcher.outputs.named``); None for a folder of patcher's own, made with its parents. With
    ``weights``, the staging folder gets them before it is renamed into place.

    An earlier replica is replaced only where it holds nothing but the files it wrote, as they
    were written (its manifest lists each with its sha256): a file added, changed, linked or
    made by anyone else is never deleted, unless ``force`` (``--force``) says so. A folder that
    is not a replica is never replaced.
    """
    out = check_replica_folder(out, option, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    except OSError as error:
        raise PatcherError(f"cannot write to {out.parent}: {error.strerror or error}") from error
    with removed_on_failure(staging, out):
        staging.chmod(0o755)  # mkdtemp makes it private; a replica is for any user
        for folder, files in (("target", replica.target), ("drafter", replica.drafter)):
            (staging / folder).mkdir()
            for name, content in files.items():
                (staging / folder / name).write_bytes(content)
        written = weights.write(staging) if weights else NO_WEIGHTS
        manifest = {**replica.manifest(), "weights": written, "files": files_in(staging)}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            old = out.rename(out.parent / f"{staging.name}.old")
            try:
                staging.rename(out)
            except BaseException:
                old.rename(out)
                raise
            shutil.rmtree(old)
        else:
            staging.rename(out)
    return out


def check_replica_folder(out: Path, option: str | None = None, force: bool = False) -> Path:
    """Refuse ``out`` before any work if ``write_replica`` would refuse it; the folder it
    writes (a link to a folder is followed)."""
    if option is not None:
        check_folder(out, option)
    if out.is_symlink() and out.is_dir():  # a link to a folder: the folder is the output
        out = Path(os.path.realpath(out))
    try:
        busy = out.is_dir() and any(out.iterdir())
    except OSError as error:
        raise PatcherError(f"cannot read {out}: {error.strerror or error}") from error
    if busy:
        refuse_replacing(out, option, force)
    return out


def files_in(folder: Path) -> dict[str, str]:
    """Each file under ``folder`` but the manifest, by its path there, with its sha256."""
    found = {}
    for top, _, names in os.walk(folder):
        for name in names:
            path = Path(top) / name
            relative = path.relative_to(folder).as_posix()
            if relative != MANIFEST:
                found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(found.items()))


def refuse_replacing(out: Path, option: str | None, force: bool) -> None:
    """Refuse to replace the folder ``out`` where that would delete what this command did
    not write: a folder that is not a replica always; without ``force``, a file an earlier
    replica did not write, or one changed since. A folder the deletion could not enter is
    refused before any work, so a replacement never stops half way."""
    if not (out / MANIFEST).is_file():
        raise PatcherError(f"{out} exists and is not a replica; choose an empty or new folder")
    if not force:
        other = not_written(out)
        if other is not None:
            how = " (--force replaces it, with all it holds)" if option == "--out" else ""
            raise PatcherError(
                f"{out} holds {other}, which patcher did not write there; it would be "
                f"deleted with the earlier replica: choose an empty or new folder{how}"
            )
    for top, folders, _ in os.walk(out):
        for folder in (top, *(os.path.join(top, f) for f in folders)):
            if not os.path.islink(folder) and not writable(Path(folder)):
                raise PatcherError(f"cannot replace the replica in {out}: {folder} is not writable")


def writable(folder: Path) -> bool:
    """Whether ``folder`` takes deletions: by its owner's write bit too, so a folder its user
    made read-only is kept as such even by root, whom ``os.access`` lets through."""
    return os.access(folder, os.W_OK | os.X_OK) and bool(folder.stat().st_mode & stat.S_IWUSR)


def not_written(out: Path) -> str | None:
    """The first thing in the replica folder ``out`` that its manifest does not list as
    written there (by its sha256); None if it holds only what the replica wrote."""
    try:
        listed = read_manifest(out).get("files")
    except PatcherError:
        return MANIFEST
    if not isinstance(listed, dict):
        return "an earlier replica whose manifest lists no files"
    folders = {"."} | {p.as_posix() for name in listed for p in PurePosixPath(name).parents}
    for top, dirs, names in os.walk(out):
        for name in sorted((*dirs, *names)):
            path = Path(top) / name
            relative = path.relative_to(out).as_posix()
            if relative == MANIFEST:
                continue
            if path.is_symlink():
                return relative
            if path.is_dir():
                if relative not in folders:
                    return f"{relative}/"
            elif not path.is_file() or listed.get(relative) != sha256_of(path):
                return relative
    return None


def sha256_of(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a replica folder written by ``write_replica``."""
    try:
        data = read_json(folder / MANIFEST, "replica manifest")
    except PatcherError as error:
        raise PatcherError(f"{folder} is not a replica ({error})") from error
    if not isinstance(data, dict):
        raise PatcherError(f"{folder / MANIFEST}: not a JSON object")
    return data
