"""Reading a file given to patcher, or one it kept: a regular file only, and a bounded one.

A FIFO would block the read for ever and a device (``/dev/zero``) would never end it, so the
kind of file is checked before it is opened (``os.stat``), and again on the open descriptor
(opened non-blocking, so a FIFO swapped in between cannot block the open); the bytes are read up
to a cap, a byte past it refused.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from patcher.errors import PatcherError

MAX_INPUT_BYTES = 16 * 1024 * 1024
"""The most a config, a JSON file or a cache entry patcher reads may hold."""

CHUNK = 1024 * 1024


class NotRegular(PatcherError):
    """The file is a folder, a FIFO, a device or a socket, or larger than the cap."""


class Missing(PatcherError):
    """There is no file at the path."""


def kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: Path | str, what: str = "file", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; else a one-line
    PatcherError naming it (``what`` says what it was to be: "config", "cache entry")."""
    try:
        before = os.stat(path)
    except FileNotFoundError as error:
        raise Missing(f"cannot read {what} {path}: {error.strerror or error}") from error
    except OSError as error:
        raise PatcherError(f"cannot read {what} {path}: {error.strerror or error}") from error
    refuse(path, what, before, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise PatcherError(f"cannot read {what} {path}: {error.strerror or error}") from error
    try:
        refuse(path, what, os.fstat(fd), limit)  # swapped for another kind since the stat
        chunks = []
        size = 0
        while chunk := os.read(fd, CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise NotRegular(too_big(path, what, limit))
    except OSError as error:
        raise PatcherError(f"cannot read {what} {path}: {error.strerror or error}") from error
    finally:
        os.close(fd)
    return b"".join(chunks)


def refuse(path: Path | str, what: str, st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"cannot read {what} {path}: {kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise NotRegular(too_big(path, what, limit))


def check_regular(path: Path | str, what: str = "file") -> None:
    """Refuse ``path`` unless it is a regular file, before it is opened (a FIFO blocks the
    open itself): for a file read in part, not whole, so not capped."""
    try:
        refuse(path, what, os.stat(path), limit=2**63)
    except FileNotFoundError as error:
        raise Missing(f"cannot read {what} {path}: {error.strerror or error}") from error
    except OSError as error:
        raise PatcherError(f"cannot read {what} {path}: {error.strerror or error}") from error


def too_big(path: Path | str, what: str, limit: int) -> str:
    return f"cannot read {what} {path}: larger than {limit >> 20} MiB, the most patcher reads"


def read_json(path: Path | str, what: str = "JSON file", limit: int = MAX_INPUT_BYTES) -> Any:
    """``path`` parsed as JSON, read as ``read_regular`` reads; a one-line error if it is not."""
    data = read_regular(path, what, limit)
    try:  # UTF-8 only, as transformers and vLLM open configs: bytes would be read as UTF-16 too
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PatcherError(f"{path}: not UTF-8 text (byte {error.start})") from error
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise PatcherError(f"{path}: not valid JSON ({error})") from error
