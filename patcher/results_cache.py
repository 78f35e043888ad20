"""Cached patch outcomes, keyed by everything that decides them, so a warm matrix is instant.

Every entry carries its own sha256 (``write_checked``): one that is not whole is recomputed.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

from patcher import __version__
from patcher.cache import checked_dir, read_checked, write_checked
from patcher.codemods.base import Codemod, Outcome, Status, Tree


@cache
def codemods_digest() -> str:
    """A digest of the codemods' own source: changing a codemod invalidates its cached results."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted((Path(__file__).parent / "codemods").glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def outcome_to_json(outcome: Outcome) -> dict[str, str]:
    return {"status": outcome.status.value, "detail": outcome.detail}


def outcome_from_json(data: dict[str, str]) -> Outcome:
    return Outcome(Status(data["status"]), data["detail"])


def _path(patchset_digest: str, identity: str) -> Path:
    key = hashlib.sha256(f"{codemods_digest()}|{patchset_digest}|{identity}".encode()).hexdigest()
    return checked_dir("results") / f"{key}.json"


def load(patchset_digest: str, identity: str) -> dict[str, Outcome] | None:
    """The outcomes stored for this patchset and tree, or None: never stored, or not whole."""
    if not identity:
        return None
    payload = read_checked(_path(patchset_digest, identity))
    if payload is None:
        return None
    data = json.loads(payload)
    outcomes = {name: outcome_from_json(o) for name, o in data.items()}
    if any(o.status is Status.UNKNOWN for o in outcomes.values()):
        return None  # not settled (stored before sources settled): run again, and settle
    return outcomes


def store(patchset_digest: str, identity: str, outcomes: dict[str, Outcome]) -> None:
    if identity:
        data = {name: outcome_to_json(o) for name, o in outcomes.items()}
        write_checked(_path(patchset_digest, identity), json.dumps(data).encode())


def codemod_key(codemod: Codemod, tree: Tree) -> str:
    """What decides one codemod's outcome: its code, its options, and the text of every file it
    reads. Releases often share files, so the matrix rarely parses a module twice."""
    digest = hashlib.sha256(codemods_digest().encode())
    digest.update(json.dumps([codemod.name, repr(codemod.options), repr(codemod.model)]).encode())
    for path in tree.files(codemod):
        text = tree.text(path)
        digest.update(f"\0{path}\0".encode())
        digest.update(hashlib.sha256((text or "").encode()).digest())
    return digest.hexdigest()


def load_codemod(key: str) -> tuple[Outcome, dict[str, str]] | None:
    """A codemod's stored run, or None: never stored, or not whole."""
    payload = read_checked(checked_dir("codemods") / f"{key}.json")
    if payload is None:
        return None
    data = json.loads(payload)
    return outcome_from_json(data), data["changed"]


def store_codemod(key: str, outcome: Outcome, changed: dict[str, str]) -> None:
    data = {**outcome_to_json(outcome), "changed": changed}
    write_checked(checked_dir("codemods") / f"{key}.json", json.dumps(data).encode())
