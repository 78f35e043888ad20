"""Patch a vLLM tree on disk in place: every file or none."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from patcher.errors import PatcherError


def write_tree(root: Path, changed: dict[str, str]) -> list[Path]:
    """Write each changed file beside its target first, then rename them all into place.

    Writing is where things fail (a full disk, a read-only file); if any write fails, the
    temporary files are removed and the tree is as it was.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for relative, text in sorted(changed.items()):
            target = root / relative
            fd, tmp = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}.", suffix=".patcher"
            )
            staged.append((tmp, target))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.chmod(tmp, target.stat().st_mode & 0o7777)
    except OSError as error:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise PatcherError(f"cannot write the patched files under {root}: {error}") from error
    for tmp, target in staged:
        os.replace(tmp, target)
    return [target for _, target in staged]
