"""The files and folders a command line names for its results (``--json``, ``--dist``...).

What a name points at decides how it is written. A regular file or a new name gets an atomic
write: a temporary file beside it, renamed over it, so a reader sees the old file or the whole
new one. A symlink is followed, and its target gets that write; the link stays. A character
device, a FIFO or an open descriptor (``/dev/null``, a named pipe, ``/dev/stdout``) is written
in place, as a stream: renaming over it would replace the device with a file. ``-`` is stdout.

A missing parent folder is an error, except under the tool's own default folders
(``reports/``, ``dist/``): a typo in a path makes a one-line error, not a new tree of folders.
Each name is checked before the work whose result it takes, so a bad one fails in a second.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from pathlib import Path
from typing import BinaryIO

from patcher.cache import create_new, name_beside
from patcher.errors import OutputClosed, PatcherError, StdoutError

STDOUT = Path("-")
OWN_FOLDERS = ("reports", "dist")
"""Folders under the working directory that patcher's defaults and workflows write into."""


def stdout_error(error: OSError) -> StdoutError:
    """A failed write to stdout: a reader that went away ends quietly, anything else is a line."""
    if error.errno == errno.EPIPE:
        return OutputClosed()
    return StdoutError(f"cannot write to stdout: {error.strerror or error}")


def _own_folder(folder: Path) -> bool:
    """Whether ``folder`` is, or lies under, one of ``OWN_FOLDERS`` of the working directory."""
    try:
        parts = Path(os.path.abspath(folder)).relative_to(Path.cwd()).parts
    except ValueError:
        return False
    return bool(parts) and parts[0] in OWN_FOLDERS


def _descriptor(path: Path) -> bool:
    """Whether ``path`` names an open descriptor (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), by its own name or a symlink's: that is a stream, whatever the
    descriptor is open on. (``realpath`` would name the file behind it, and a rename over that
    file would leave the descriptor writing to a deleted one.)"""
    current = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on a chain of links
        if current.parts[1:2] == ("proc",) or current.parts[1:3] == ("dev", "fd"):
            return True
        if not current.is_symlink():
            return False
        current = Path(os.path.abspath(current.parent / os.readlink(current)))
    return False


def _resolved(path: Path) -> Path:
    """``path`` with its symlinks followed, so the link's target is what gets written."""
    return Path(os.path.realpath(path))


def _check_parent(
    path: Path, option: str, parent: Path | None = None, folder: bool = False
) -> None:
    """``path``'s folder (``parent``: where a symlink's target goes) must take a new entry."""
    parent = path.parent if parent is None else parent
    refused = f"cannot write {'to ' if folder else ''}{path}"
    if not parent.exists():
        if _own_folder(parent):
            return
        raise PatcherError(f"{refused}: its folder {parent} does not exist ({option})")
    if not parent.is_dir():
        raise PatcherError(f"{refused}: {parent} is not a directory ({option})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PatcherError(f"{refused}: {parent} is not writable ({option})")


def _mode(path: Path, option: str) -> int | None:
    """The mode of what ``path`` names, symlinks followed by the kernel (so ``/dev/stdout``
    is whatever fd 1 is); None for a new name or a dangling link."""
    try:
        return path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        raise PatcherError(f"cannot write {path}: {error.strerror or error} ({option})") from error


def check_file(path: Path, option: str) -> None:
    """Refuse a file name that cannot take the output, before the work that makes it."""
    if path == STDOUT:
        return
    mode = _mode(path, option)
    if mode is None:
        _check_parent(path, option, _resolved(path).parent)
        return
    if stat.S_ISDIR(mode):
        raise PatcherError(f"cannot write {path}: it is a directory; give a file name ({option})")
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise PatcherError(f"cannot write {path}: not a file, a device or a FIFO ({option})")
    if not os.access(path, os.W_OK):
        raise PatcherError(f"cannot write {path}: it is not writable ({option})")
    if stat.S_ISREG(mode):
        _check_parent(path, option, _resolved(path).parent)


def write_file(path: Path, data: bytes, option: str) -> None:
    """Write ``data`` to the file ``path`` names, as the module's docstring says."""
    check_file(path, option)
    if path == STDOUT:
        _write_stdout(data)
        return
    mode = _mode(path, option)
    try:
        if _descriptor(path):  # after what the command printed there, if it is stdout
            sys.stdout.flush()
            with path.open("ab") as stream:
                stream.write(data)
        elif mode is not None and stat.S_ISFIFO(mode):
            with _fifo_writer(path) as stream:  # in place, for the process reading it
                stream.write(data)
        elif mode is not None and not stat.S_ISREG(mode):
            with path.open("wb") as stream:  # a device: in place
                stream.write(data)
        else:
            _replace(_resolved(path), data, None if mode is None else stat.S_IMODE(mode))
    except OSError as error:
        raise PatcherError(f"cannot write {path}: {error.strerror or error}") from error


FIFO_WAIT = 10.0
"""How long a FIFO named as an output may go without a reader before patcher gives up: a
blocking open would wait for one for ever."""


def _fifo_writer(path: Path) -> BinaryIO:
    """``path``, a FIFO, open for writing once a process reads it; a one-line error where none
    has in ``FIFO_WAIT`` seconds (a blocking open would hang the command)."""
    wait = FIFO_WAIT
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if time.monotonic() > deadline:
                raise PatcherError(
                    f"cannot write {path}: a FIFO no process read in {wait:.0f} s"
                ) from error
            time.sleep(0.05)
    os.set_blocking(fd, True)  # the reader may be slower than this writer
    return os.fdopen(fd, "wb")


def _write_stdout(data: bytes) -> None:
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as error:
        raise stdout_error(error) from error


def _replace(target: Path, data: bytes, mode: int | None) -> None:
    """An atomic write of a regular file; an existing one keeps its permission bits."""
    if not target.parent.exists():  # only under OWN_FOLDERS: check_file refused the rest
        target.parent.mkdir(parents=True, exist_ok=True)
    tmp = name_beside(target, ".part")
    try:
        fd = create_new(tmp)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def check_folder(folder: Path, option: str) -> None:
    """Refuse a folder name that cannot take the output, before the work; nothing is made."""
    try:
        folder.stat()
    except FileNotFoundError:
        pass
    except OSError as error:  # a symlink loop: exists() says False, and a write fails later
        raise PatcherError(
            f"cannot write to {folder}: {error.strerror or error} ({option})"
        ) from error
    if not folder.exists():
        _check_parent(folder, option, folder=True)
        return
    if not folder.is_dir():
        raise PatcherError(f"cannot write to {folder}: it is not a directory ({option})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PatcherError(f"cannot write to {folder}: it is not writable ({option})")


def prepare_folder(folder: Path, option: str) -> Path:
    """A named output folder, made if new (its parent must exist, but under OWN_FOLDERS)."""
    check_folder(folder, option)
    try:
        folder.mkdir(parents=_own_folder(folder), exist_ok=True)
    except OSError as error:
        raise PatcherError(f"cannot write to {folder}: {error.strerror or error}") from error
    return folder


def one_stdout(options: dict[str, Path | None]) -> bool:
    """Whether one of ``options`` (flag -> path) is ``-``; two is an error: they would mix."""
    on_stdout = [flag for flag, path in options.items() if path == STDOUT]
    if len(on_stdout) > 1:
        raise PatcherError(f"{' and '.join(on_stdout)} cannot both write to stdout (-)")
    return bool(on_stdout)


def distinct_files(options: dict[str, Path | None]) -> None:
    """Two of ``options`` (flag -> path) naming one file, by any spelling or link, is an
    error: one would overwrite the other."""
    seen: dict[Path, str] = {}
    for flag, path in options.items():
        if path is None or path == STDOUT:
            continue
        real = Path(os.path.realpath(path))  # the same file by another spelling or a link
        if real in seen:
            raise PatcherError(
                f"{seen[real]} and {flag} name the same file, {path}: one would overwrite the other"
            )
        seen[real] = flag
