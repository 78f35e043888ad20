"""Per-user on-disk cache, safe for concurrent processes: every write is a rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import platformdirs

CACHE_ENV = "PATCHER_CACHE_DIR"


def cache_dir() -> Path:
    """The cache root: ``$PATCHER_CACHE_DIR`` if set, else the platform's user cache dir."""
    root = os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("vllm-patcher")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
