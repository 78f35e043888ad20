"""Whole-wheel downloads into the cache: verified by sha256, resumable, one writer at a time.

A cached wheel is trusted only once its sha256 matched the index. Hashing 500 MB takes
seconds, so a match is remembered in a sidecar with the file's size, mtime, ctime, inode and
device (``patcher.cache.fingerprint``); while those are unchanged the file is not hashed
again. Anything else is hashed, and a mismatch is deleted and downloaded again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from patcher.cache import (
    cache_dir,
    fingerprint,
    read_checked,
    remove_stale,
    sha256_of,
    write_checked,
)
from patcher.errors import NetworkError, PatcherError
from patcher.index import (
    NETWORK_FAULTS,
    Deadline,
    HttpClient,
    IndexEntry,
    iter_body,
    timeout,
)

CHUNK = 1024 * 1024
STALE_PART_SECONDS = 24 * 3600  # a .part this old is from a download nobody came back to
Progress = Callable[[int, int | None], None]


def cached_wheel_path(wheel: IndexEntry) -> Path:
    return cache_dir() / "wheels" / (wheel.sha256 or "unhashed") / wheel.filename


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def remember_verified(path: Path, sha256: str) -> None:
    record = {"sha256": sha256, **fingerprint(path)}
    write_checked(sidecar(path), json.dumps(record, sort_keys=True).encode())


def verified_sha256(path: Path, expected: str) -> str:
    """``path``'s sha256: from the sidecar if the file is as it was hashed, else hashed now."""
    remembered = read_checked(sidecar(path))
    state = {"sha256": expected, **fingerprint(path)}
    if remembered is not None and expected and json.loads(remembered) == state:
        return expected
    actual = sha256_of(path)
    if actual == expected:
        remember_verified(path, actual)
    return actual


def usable_cached(target: Path, wheel: IndexEntry) -> bool:
    """Whether the cached wheel is the index's; one that is not is deleted."""
    if not target.exists():
        return False
    if wheel.size is not None and target.stat().st_size != wheel.size:
        good = False
    elif not wheel.sha256:
        good = True  # nothing to check it against; the index gave no sha256
    else:
        good = verified_sha256(target, wheel.sha256) == wheel.sha256
    if not good:
        target.unlink()
        sidecar(target).unlink(missing_ok=True)
    return good


def download_wheel(wheel: IndexEntry, client: HttpClient, progress: Progress | None = None) -> Path:
    """The wheel's path in the cache, verified, downloading (or resuming) it first if needed.

    A partial download stays in ``<name>.part`` and is resumed with a range request; a
    finished one is renamed into place only after its sha256 matches the index.
    """
    target = cached_wheel_path(wheel)
    wheels = target.parent.parent
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PatcherError(f"cannot write {target.parent}: {error.strerror or error}") from error
    with FileLock(str(target) + ".lock"):
        if usable_cached(target, wheel):
            return target
        remove_stale(wheels, "*/*.part", STALE_PART_SECONDS)
        partial = target.with_name(target.name + ".part")
        actual = fetch(wheel, client, partial, progress)
        if wheel.sha256 and actual != wheel.sha256:
            partial.unlink()
            raise PatcherError(
                f"{wheel.filename}: sha256 {actual} does not match the index's {wheel.sha256}"
            )
        partial.replace(target)
        if wheel.sha256:
            remember_verified(target, wheel.sha256)
        return target


def complete(partial: Path, wheel: IndexEntry) -> bool:
    return bool(wheel.sha256) and sha256_of(partial) == wheel.sha256


def fetch(wheel: IndexEntry, client: HttpClient, partial: Path, progress: Progress | None) -> str:
    """Fill ``partial`` with the whole wheel, resuming what it holds; the sha256 of its bytes,
    hashed as they arrive, so a 500 MB download is not read back to be checked.

    Every CHUNK of the body must arrive within ``timeout()``, so a server trickling bytes is
    cut off while an honest slow one is not.
    """
    have = partial.stat().st_size if partial.exists() else 0
    if have and have == wheel.size and complete(partial, wheel):
        return wheel.sha256  # an earlier run got every byte but stopped before the rename
    if wheel.size is not None and have >= wheel.size:
        have = 0  # nothing is left to resume: a range from the end would get 416
    headers = {"Range": f"bytes={have}-"} if have else {}
    response = client.get(wheel.url, headers=headers, stream=True, accept=(416,))
    if response.status_code == 416:  # nothing past ``have``: an index that lists no size
        response.close()
        if have and complete(partial, wheel):
            return wheel.sha256
        partial.unlink(missing_ok=True)
        response = client.get(wheel.url, stream=True)
        have = 0
    if have and response.status_code != 206:
        have = 0  # the server restarted from byte 0: so do we
    total = wheel.size
    seconds = timeout()
    digest = hashlib.sha256()
    if have:  # the bytes resumed from, read once
        with partial.open("rb") as held:
            digest = hashlib.file_digest(held, "sha256")
    with response, partial.open("ab" if have else "wb") as out:
        done = have
        if progress:
            progress(done, total)
        try:
            deadline, mark = Deadline(seconds), done
            for piece in iter_body(response, deadline):
                out.write(piece)
                digest.update(piece)
                done += len(piece)
                if done - mark >= CHUNK:
                    deadline.restart()
                    mark = done
                    if progress:
                        progress(done, total)
        except Exception as error:  # the partial file stays for the next attempt to resume
            failure = NetworkError if isinstance(error, NETWORK_FAULTS) else PatcherError
            raise failure(
                f"download of {wheel.filename} interrupted at {done} bytes "
                f"({error if str(error) else type(error).__name__}); run again to resume"
            ) from error
        if progress:
            progress(done, total)
    return digest.hexdigest()
