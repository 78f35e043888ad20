"""A vLLM source tree on disk: a checkout or an unpacked wheel."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

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
    except InvalidVersion as error:
        raise PatcherError(f"{where}: {text!r} is not a valid version") from error


class DirectorySource(Source):
    def __init__(self, root: Path, version: str | None = None) -> None:
        if not (root / "vllm" / "__init__.py").is_file():
            raise PatcherError(f"{root}: not a vLLM source tree (no vllm/__init__.py)")
        self.root = root
        if version is None:
            version_file = root / "vllm" / "_version.py"
            found = (
                version_from_module(version_file.read_text()) if version_file.is_file() else None
            )
            if found is None:
                raise PatcherError(f"{root}: no version in vllm/_version.py; pass --vllm-version")
            version = found
        self.version = parse_version(version, str(root))
        self.description = f"vllm {self.version} ({root})"
        self._names: list[str] | None = None

    def names(self) -> Sequence[str]:
        if self._names is None:
            self._names = sorted(
                p.relative_to(self.root).as_posix()
                for p in (self.root / "vllm").rglob("*")
                if p.is_file() and "__pycache__" not in p.parts
            )
        return self._names

    def read(self, path: str) -> bytes | None:
        file = self.root / path
        return file.read_bytes() if file.is_file() else None
