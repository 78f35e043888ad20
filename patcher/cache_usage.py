"""What patcher's cache holds, by kind, and trimming it (``patcher cache``).

The layout under the cache root (``patcher.cache.cache_dir``), as the modules that write it
keep it:

- ``wheels/SHA256/``: whole wheels (``patcher.sources.download``), each with its ``.lock``;
- ``checked/members/SHA256/``: members of a wheel read by range (``patcher.sources.index_wheel``);
- ``envs/KEY`` (its ``KEY.lock``, ``KEY.log``) and uv's cache ``uv/`` (``patcher.venvs``); the
  layout before it, ``venvs/``;
- ``acceptance/KEY`` (its ``KEY.lock``): trained drafters (``patcher.acceptance.trained``);
- ``patched/SHA256/``: patched wheels and overlays of one official wheel;
- ``verify/``, ``serve/``: the last reports of ``verify`` and ``serve-bench``, the proofs the
  matrix shows (``patcher.proofs``);
- anything else (``checked/KIND`` results, ``logs/``, ``folder-locks/``, a name this version of
  patcher does not know, written by another): ``other``, read and trimmed as files.

An entry with a lock of its own (a wheel, a venv, a trained drafter) is removed only while
that lock is free, taken for the removal. The rest have none: they are removed only while no
other patcher runs on the cache, which every patcher shows by holding ``.in-use.lock`` shared
(``patcher.cache.hold_in_use``). Lock files are never removed: a patcher waiting on one must
find the same file. Symbolic links are never followed, and a file counted twice (uv hardlinks
its cache into the venvs) is counted once.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from patcher.cache import CACHE_TAG, IN_USE_LOCK, cache_dir, foreign_names, in_use_exclusively
from patcher.defaults import CACHE_KINDS as KINDS
from patcher.errors import PatcherError

CLEANED_BY_DEFAULT = tuple(kind for kind in KINDS if kind != "proofs")
"""``clean`` without ``--kind``: proofs are kept unless named (the matrix shows them)."""

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w``: seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if found is None:
        raise PatcherError(
            f"--older-than {text!r}: give a number and a unit, s, m, h, d or w (7d, 12h)"
        )
    return float(found[1]) * UNITS[found[2]]


def parse_kinds(text: str) -> tuple[str, ...]:
    """A comma list of kinds, or ``all``."""
    if text.strip() == "all":
        return KINDS
    chosen = tuple(word.strip() for word in text.split(","))
    unknown = [word for word in chosen if word not in KINDS]
    if unknown or not chosen:
        raise PatcherError(
            f"--kind {text!r}: no kind {', '.join(map(repr, unknown))}; "
            f"the kinds are {', '.join(KINDS)}, or all"
        )
    return chosen


@dataclass
class Entry:
    """One thing to keep or remove whole: a wheel's folder, a venv with its log, ..."""

    kind: str
    name: str
    """Its path under the cache root."""
    paths: list[Path]
    lock: Path | None = None
    """Its own lock, taken to remove it; None: it is removed only with the cache to itself."""
    size: int = 0
    files: int = 0
    newest: float = 0.0
    """The newest modification time of anything in it: its age is from there."""
    unreadable: list[str] = field(default_factory=list)

    def age(self, now: float) -> float:
        return now - self.newest


def lock_file(path: Path) -> bool:
    return path.name.endswith(".lock")


def children(folder: Path) -> list[Path]:
    """A folder's entries by name; none where it is not a folder (or not one patcher can read)."""
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return []
        return sorted(folder.iterdir())
    except OSError:
        return []


def entries(root: Path) -> list[Entry]:
    """Every entry of the cache at ``root``, with its kind."""
    found: list[Entry] = []

    def add(kind: str, path: Path, *others: Path, lock: Path | None = None) -> None:
        found.append(Entry(kind, str(path.relative_to(root)), [path, *others], lock))

    known = {"wheels", "checked", "envs", "uv", "venvs", "acceptance", "patched"}
    known |= {"verify", "serve", IN_USE_LOCK, CACHE_TAG}
    for path in children(root / "wheels"):
        locks = [p for p in children(path) if lock_file(p)]
        add("wheels", path, lock=locks[0] if len(locks) == 1 else None)
    for path in children(root / "checked"):
        if path.name == "members" and is_folder(path):
            for member in children(path):
                add("members", member)
        else:
            add("other", path)
    for folder, kind in (("envs", "venvs"), ("venvs", "venvs"), ("acceptance", "trained")):
        keyed(root / folder, kind, add)
    if is_folder(root / "uv"):
        add("venvs", root / "uv")
    for path in children(root / "patched"):
        add("patched", path)
    for folder in ("verify", "serve"):
        for path in children(root / folder):
            add("proofs", path)
    for path in children(root):
        # a name of another layout (another version's), or a known name that is no folder
        if path.name not in known or (
            path.name not in (IN_USE_LOCK, CACHE_TAG) and not is_folder(path)
        ):
            add("other", path)
    return found


def is_folder(path: Path) -> bool:
    """A folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def keyed(folder: Path, kind: str, add: object) -> None:
    """A folder of ``KEY`` entries, each with ``KEY.lock``, ``KEY.log`` and staging
    ``.KEY.*`` beside it (``patcher.venvs``, ``patcher.acceptance.trained``)."""
    assert callable(add)
    names = children(folder)
    keys = {p.name.removesuffix(".lock") for p in names if lock_file(p)}
    keys |= {p.name for p in names if not p.name.startswith(".") and "." not in p.name}
    claimed: set[Path] = set()
    for key in sorted(keys):
        own = [p for p in names if p.name in (key, f"{key}.log") or p.name.startswith(f".{key}.")]
        claimed |= set(own) | {folder / f"{key}.lock"}
        if own:
            add(kind, own[0], *own[1:], lock=folder / f"{key}.lock")
    for path in names:
        if path not in claimed and not lock_file(path):
            add(kind, path)


def walk(path: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every file and link under ``path`` (itself, if it is one), never following a link."""
    try:
        info = path.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        yield path, info
        return
    yield path, info
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        yield from walk(path / name)


def measure(entry: Entry, seen: set[tuple[int, int]]) -> None:
    """The entry's size (a file with several links once over the cache), files and age."""
    for top in entry.paths:
        for path, info in walk(top):
            entry.newest = max(entry.newest, info.st_mtime)
            if stat.S_ISDIR(info.st_mode) or lock_file(path):  # locks stay, and are empty
                continue
            entry.files += 1
            key = (info.st_dev, info.st_ino)
            if key not in seen:
                seen.add(key)
                entry.size += info.st_size


def measured(root: Path) -> list[Entry]:
    seen: set[tuple[int, int]] = set()
    found = entries(root)
    for entry in found:
        measure(entry, seen)
    return found


def sizes(root: Path) -> dict[str, dict[str, int]]:
    """Per kind: its bytes, entries and files."""
    totals = {kind: {"bytes": 0, "entries": 0, "files": 0} for kind in KINDS}
    for entry in measured(root):
        if entry.files:
            totals[entry.kind]["bytes"] += entry.size
            totals[entry.kind]["entries"] += 1
            totals[entry.kind]["files"] += entry.files
    return totals


@dataclass
class Cleaning:
    removed: list[Entry] = field(default_factory=list)
    in_use: list[Entry] = field(default_factory=list)
    failed: list[tuple[Entry, str]] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return sum(entry.size for entry in self.removed)


def clean(root: Path, kinds: Iterable[str], older_than: float | None, dry_run: bool) -> Cleaning:
    """Remove the entries of ``kinds`` not modified for ``older_than`` seconds (any age: None).

    ``dry_run``: none is removed; the result says which would be, and which are in use.

    Only a folder that is patcher's cache is cleaned: tagged (``CACHE_TAG``, written where
    patcher made the folder) or holding only the names patcher writes. ``PATCHER_CACHE_DIR``
    naming a folder of other files (a typo, a home folder) is refused in one line, and nothing
    there is touched."""
    foreign = foreign_names(root)
    if foreign:
        raise PatcherError(
            f"{root} is not a patcher cache: it holds {foreign[0]!r}, which patcher does not "
            f"write there (and no {CACHE_TAG}); cache clean removes nothing; check "
            "PATCHER_CACHE_DIR"
        )
    chosen = set(kinds)
    now = time.time()
    result = Cleaning()
    wanted = [
        entry
        for entry in measured(root)
        if entry.kind in chosen
        and entry.files
        and (older_than is None or entry.age(now) >= older_than)
    ]
    for entry in wanted:  # each under its own lock: other patchers go on meanwhile
        if entry.lock is not None:
            attempt(entry, dry_run, result)
    with in_use_exclusively(root) as alone:  # the rest with the cache to itself, or not at all
        for entry in wanted:
            if entry.lock is None:
                if alone:
                    attempt(entry, dry_run, result)
                else:
                    result.in_use.append(entry)
    return result


def attempt(entry: Entry, dry_run: bool, result: Cleaning) -> None:
    try:
        removed = remove(entry, dry_run)
    except OSError as error:
        result.failed.append((entry, f"{error.filename or entry.name}: {error.strerror}"))
        return
    (result.removed if removed else result.in_use).append(entry)


def remove(entry: Entry, dry_run: bool) -> bool:
    """Remove ``entry`` under its own lock (False where another patcher holds it)."""
    if entry.lock is None:
        if not dry_run:
            for path in entry.paths:
                remove_tree(path)
        return True
    lock = FileLock(str(entry.lock), timeout=0)
    try:
        with lock:
            if not dry_run:
                for path in entry.paths:
                    remove_tree(path)
    except Timeout:
        return False
    return True


def remove_tree(path: Path) -> None:
    """``path`` and all under it, but the lock files in it; a link is removed, not followed."""
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        if not lock_file(path):
            path.unlink()
        return
    for child in list(path.iterdir()):
        remove_tree(child)
    try:
        path.rmdir()
    except OSError:
        if not any(lock_file(p) for p in path.iterdir()):
            raise


def cache_root() -> Path:
    """The cache root, refused in one line where it is not a folder patcher can read."""
    root = cache_dir()
    try:
        os.listdir(root)
    except OSError as error:
        raise PatcherError(f"cannot read the cache {root}: {error.strerror or error}") from error
    return root
