"""Per-user on-disk cache, safe for concurrent processes: every write is a rename.

Entries written with ``write_checked`` carry the sha256 of their payload in front of it, so a
truncated, emptied or garbled entry is seen by ``read_checked``, dropped, and made again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs
from filelock import FileLock

from patcher.errors import PatcherError
from patcher.files import Missing, NotRegular, read_regular

CACHE_ENV = "PATCHER_CACHE_DIR"
IN_USE_LOCK = ".in-use.lock"
"""Held shared by every patcher using the cache, exclusively by ``patcher cache clean``."""
CHECKED_HEADER = b"patcher-sha256:"
DIGEST_LENGTH = 64


def cache_dir() -> Path:
    """The cache root: ``$PATCHER_CACHE_DIR`` if set, else the platform's user cache dir."""
    root = os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("vllm-patcher")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PatcherError(
            f"cache dir {path} is unusable ({error.strerror or error}); set {CACHE_ENV}"
        ) from error
    if not path.is_dir():
        raise PatcherError(f"cache dir {path} is not a directory; set {CACHE_ENV}")
    hold_in_use(path)
    return path


CACHE_TAG = "CACHEDIR.TAG"
"""The Cache Directory Tagging Specification's file. ``patcher cache clean`` takes a folder
holding it as a cache whatever else it holds (a later patcher's names); patcher itself writes
none, since a command that fails writes nothing to the cache."""
OWN_NAMES = frozenset(
    {
        "wheels",
        "checked",
        "envs",
        "uv",
        "venvs",
        "acceptance",
        "patched",
        "verify",
        "serve",
        "logs",
        "folder-locks",
        IN_USE_LOCK,
        CACHE_TAG,
    }
)
"""What patcher writes at the top of its cache (and ``.bench-venvs-*``, the bench's)."""


def foreign_names(root: Path) -> list[str]:
    """What ``root`` holds at its top that patcher does not write there; none where it is
    tagged (a newer patcher's cache may hold names this one does not know)."""
    if (root / CACHE_TAG).is_file():
        return []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [n for n in names if n not in OWN_NAMES and not n.startswith(".bench-venvs")]


_IN_USE: dict[str, int] = {}
"""The cache root this process holds ``IN_USE_LOCK`` of, shared, and its descriptor."""


def hold_in_use(root: Path) -> None:
    """Hold ``root``'s ``IN_USE_LOCK`` shared until the process ends (once per process, for
    the root last used), so ``patcher cache clean`` leaves the entries without a lock of their
    own alone while this patcher runs. A cache where the lock cannot be made is used as before."""
    import fcntl

    key = str(root)
    if key in _IN_USE:
        return
    for held in _IN_USE.values():
        os.close(held)
    _IN_USE.clear()
    path = root / IN_USE_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, file_mode())
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # another user's shared cache
        except OSError:
            return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits out a clean, which takes a moment
    except OSError:
        os.close(fd)
        return
    _IN_USE[key] = fd


@contextmanager
def in_use_exclusively(root: Path) -> Iterator[bool]:
    """Whether this process has the cache at ``root`` to itself (no other patcher holds
    ``IN_USE_LOCK``), holding it exclusively inside the block if so."""
    import fcntl

    hold_in_use(root)
    fd = _IN_USE.get(str(root))
    if fd is None:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a failed conversion may have dropped the shared one
        yield False
        return
    try:
        yield True
    finally:
        fcntl.flock(fd, fcntl.LOCK_SH)


def folder_lock(folder: Path) -> FileLock:
    """One patcher at a time writing ``folder`` in place (a source tree, an installation's
    dist-info), across processes. The lock lives here: a file left in the folder would be one
    its owner never put there (and, in a dist-info, one RECORD does not list)."""
    key = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:16]
    locks = cache_folder(cache_dir() / "folder-locks")
    return FileLock(str(locks / f"{key}.lock"))


def cache_folder(folder: Path) -> Path:
    """``folder`` of patcher's cache, made if missing; one line where something else (a file,
    a dangling link) stands in its place, which patcher never removes for the user."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise PatcherError(
            f"{error.filename or folder}: in patcher's cache (PATCHER_CACHE_DIR), not a folder; "
            f"remove it"
        ) from error
    except OSError as error:
        raise PatcherError(f"cannot make {folder}: {error.strerror or error}") from error
    return folder


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time (wheels run to 500 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(path: Path) -> dict[str, int]:
    """What changes whenever a file's bytes are rewritten: its ctime too, which a write sets to
    the clock and no call sets back, so a byte flipped with the mtime put back shows."""
    stat = path.stat()
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
        "device": stat.st_dev,
    }


def file_mode() -> int:
    """The mode ``open()`` would give a new file under this process's umask (0644 typically)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def name_beside(path: Path, suffix: str) -> Path:
    """A fresh hidden name next to ``path``, for ``create_new``.

    Naming comes first so a caller can arm its cleanup before the file exists: an interrupt
    between a file's creation and its owner learning the name would leave it behind.
    """
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")


@contextmanager
def removed_on_failure(staging: Path, out: Path) -> Iterator[None]:
    """Build ``out`` in the folder ``staging`` and rename it into place inside this block: on
    any failure ``staging`` goes, and an OSError becomes one line, ``cannot write OUT: why``."""
    try:
        yield
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            raise PatcherError(f"cannot write {out}: {error.strerror or error}") from error
        raise


def create_new(path: Path) -> int:
    """Create ``path``, which must not exist, with the umask's mode; its descriptor."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, file_mode())


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    tmp = name_beside(path, ".part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = create_new(tmp)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise PatcherError(f"cannot write {path}: {error.strerror or error}") from error
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def checked_dir(kind: str) -> Path:
    """Where one kind of ``write_checked`` entry lives: apart from the unchecked files that
    earlier versions of patcher wrote, which a shared cache may still hold and serve them."""
    return cache_dir() / "checked" / kind


def write_checked(path: Path, payload: bytes) -> None:
    """``atomic_write`` with the payload's sha256 in front, for ``read_checked``."""
    digest = hashlib.sha256(payload).hexdigest().encode()
    atomic_write(path, CHECKED_HEADER + digest + b"\n" + payload)


def read_checked(path: Path) -> bytes | None:
    """The payload ``write_checked`` stored, or None (and the entry is gone) if it is not whole."""
    try:
        data = read_regular(path, "cache entry")
    except Missing:
        return None
    except NotRegular:  # a FIFO would block the reader, a device never end: not an entry
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    start = len(CHECKED_HEADER) + DIGEST_LENGTH + 1
    header, payload = data[:start], data[start:]
    expected = CHECKED_HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n"
    if header != expected:
        path.unlink(missing_ok=True)
        return None
    return payload


def fresh(path: Path, seconds: float) -> bool:
    """Whether ``path`` was modified less than ``seconds`` ago: a modification time in the
    future (a clock set back, a file touched by hand) is stale, never fresh for ever."""
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return False
    return 0 <= age < seconds


def remove_stale(folder: Path, pattern: str, age_seconds: float) -> list[Path]:
    """Delete files matching ``pattern`` under ``folder`` untouched for ``age_seconds``.

    Temporary files are written continuously while in use, so one this old was left by a
    process killed before it could clean up (SIGKILL, a power cut).
    """
    removed = []
    for path in folder.glob(pattern) if folder.is_dir() else ():
        try:
            if path.is_file() and not fresh(path, age_seconds):
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # gone already, or not ours to remove: leave it
    return removed
