"""A vLLM source tree on disk: a checkout or an unpacked wheel."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from packaging.version import Version

from patcher import files
from patcher.errors import PatcherError
from patcher.sources.base import Source


def version_from_module(text: str) -> str | None:
    """The string assigned to ``__version__`` (or ``version``) in a ``_version.py``."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if names & {"__version__", "version"} and isinstance(node.value.value, str):
                return node.value.value
    return None


def parse_version(text: str, where: str) -> Version:
    try:
        return Version(text)
    except ValueError as error:  # InvalidVersion, or past Python's 4300-digit int limit
        raise PatcherError(f"{where}: {text!r} is not a valid version") from error


class DirectorySource(Source):
    def __init__(self, root: Path, version: str | None = None) -> None:
        if not (root / "vllm" / "__init__.py").is_file():
            raise PatcherError(f"{root}: not a vLLM source tree (no vllm/__init__.py)")
        self.root = root
        if version is None:
            version_file = root / "vllm" / "_version.py"
            found = read_version(version_file) if version_file.is_file() else None
            if found is None:
                raise PatcherError(f"{root}: no version in vllm/_version.py; pass --vllm-version")
            version = found
        self.version = parse_version(version, str(root))
        self.description = f"vllm {self.version} ({root})"
        self._names: list[str] | None = None

    def names(self) -> Sequence[str]:
        """Every file under ``vllm/``, symlinked directories followed (each real one once)."""
        if self._names is None:
            self._names = sorted(walk(self.root, "vllm"))
        return self._names

    def read(self, path: str) -> bytes | None:
        file = self.root / path
        try:
            # a FIFO, a device or a folder where a module should be is refused, never read as
            # absent: a gate behind one would be called not-needed
            return files.read_regular(file, "vLLM source file")
        except files.Missing:  # nothing there, or a symlink that leads nowhere
            return None


def walk(root: Path, top: str) -> Iterator[str]:
    """Paths of the files under ``root/top`` relative to ``root``, following symlinked folders,
    and the symlinks that lead nowhere (``read`` gives None for them).

    A tree may link a folder in from elsewhere; skipping it would drop a patch silently.
    """
    chains: dict[str, frozenset[str]] = {}  # each folder's real path and its ancestors'
    for folder, dirs, entries in os.walk(root / top, followlinks=True):
        real = os.path.realpath(folder)
        above = chains.get(os.path.dirname(folder), frozenset())
        if real in above:  # a link back up its own path: a loop
            dirs.clear()
            continue
        chains[folder] = above | {real}
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        relative = Path(folder).relative_to(root)
        for name in entries:
            path = os.path.join(folder, name)
            if os.path.isfile(path) or not os.path.exists(path) or name.endswith(".py"):
                # a dangling link is listed: a file it hides cannot be proven absent; so is a
                # module that is a FIFO or a device, which read refuses
                yield (relative / name).as_posix()
        # a folder where a module should be is listed too, for read to refuse
        yield from ((relative / d).as_posix() for d in dirs if d.endswith(".py"))


def read_version(version_file: Path) -> str | None:
    """The version ``_version.py`` declares; a one-line error if it cannot be read or parsed."""
    try:
        return version_from_module(version_file.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) else str(error)
        raise PatcherError(
            f"{version_file}: cannot read the version ({reason}); pass --vllm-version"
        ) from error
