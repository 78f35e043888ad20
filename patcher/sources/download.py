"""Whole-wheel downloads into the cache: verified by sha256, resumable, one writer at a time."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from patcher.cache import cache_dir
from patcher.errors import PatcherError
from patcher.index import HttpClient, WheelFile

CHUNK = 1024 * 1024
Progress = Callable[[int, int | None], None]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cached_wheel_path(wheel: WheelFile) -> Path:
    return cache_dir() / "wheels" / (wheel.sha256 or "unhashed") / wheel.filename


def download_wheel(wheel: WheelFile, client: HttpClient, progress: Progress | None = None) -> Path:
    """The wheel's path in the cache, downloading (or resuming) it first if needed.

    A partial download stays in ``<name>.part`` and is resumed with a range request; a
    finished one is renamed into place only after its sha256 matches the index.
    """
    target = cached_wheel_path(wheel)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.exists():
            return target
        partial = target.with_name(target.name + ".part")
        have = partial.stat().st_size if partial.exists() else 0
        if wheel.size is not None and have >= wheel.size:
            have = 0  # nothing is left to resume: a range from the end would get 416
        headers = {"Range": f"bytes={have}-"} if have else {}
        response = client.get(wheel.url, headers=headers, stream=True)
        if have and response.status_code != 206:
            have = 0  # the server restarted from byte 0: so do we
        total = wheel.size
        with response, partial.open("ab" if have else "wb") as out:
            done = have
            if progress:
                progress(done, total)
            try:
                for chunk in response.iter_content(CHUNK):
                    out.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            except Exception as error:  # the partial file stays for the next attempt to resume
                raise PatcherError(
                    f"download of {wheel.filename} interrupted at {done} bytes "
                    f"({type(error).__name__}); run again to resume"
                ) from error
        if wheel.sha256:
            actual = sha256_of(partial)
            if actual != wheel.sha256:
                partial.unlink()
                raise PatcherError(
                    f"{wheel.filename}: sha256 {actual} does not match the index's {wheel.sha256}"
                )
        partial.replace(target)
        return target
