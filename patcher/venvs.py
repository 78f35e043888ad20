"""Lean venvs from a plan: requirements, constraints, exclusions and a wheel -> a ready venv.

Shared by verify and serving. What makes them lean:

- uv installs every requirement as hardlinks into its cache (kept in patcher's cache, so on
  the same file system as the venvs): torch and the other dependencies that releases share
  take their disk space once, not once per venv.
- A plan may be layered on a base plan: the venv is a hardlink clone of the base venv, and
  only the plan's wheel is installed over it, by uv, which uninstalls the base's copy from
  its RECORD first. That is how the patched wheel's venv is made from the official one.
- A plan may drop CUDA binaries: shared objects of the wheel that link against CUDA
  libraries, which the CPU torch cannot load anyway (vLLM's kernels are 1.3 GB of them).
  They are removed after the installer ran, and the venv's marker lists each one.

A venv is keyed by everything that decides its content (the wheel's sha256 included), built
in a staging directory beside its final place and renamed into place when complete, under
a file lock, so concurrent runs either wait for it or find it whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, Any

from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement

from patcher.cache import cache_dir, sha256_of
from patcher.elf import needed_libraries
from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.pipconfig import PipSources, pip_sources, redacted
from patcher.progress import step

FORMAT = 1
"""Bumped when the way a venv is built changes, so venvs built the old way are not reused."""

MARKER = "patcher-venv.json"
"""Written last inside a finished venv: its key, its plan and what was dropped."""

LEGACY_ROOT = "venvs"
"""The layout before this module: one full venv per wheel (3.8 GB each), now stale."""

CUDA_LIBRARY = re.compile(r"lib(cuda|cudart|cublas\w*|cudnn\w*|nvrtc|nccl|torch_cuda|c10_cuda)\.")
"""Libraries that exist only with a CUDA torch or the CUDA toolkit."""


@dataclass(frozen=True)
class VenvPlan:
    """What goes into a venv. Validates itself and reports every problem at once."""

    requirements: tuple[str, ...] = ()
    """Requirement lines, resolved together (with their dependencies) by uv."""
    constraints: tuple[str, ...] = ()
    """Constraint lines on top of pip's own, e.g. ``torch==2.13.0+cpu``."""
    excludes: tuple[str, ...] = ()
    """Distributions never installed, even as a dependency (uv's ``--excludes``)."""
    wheel: Path | None = None
    """A wheel installed last, without its dependencies (the plan lists those it wants)."""
    drop_cuda_binaries: bool = False
    """Remove the wheel's shared objects that link against CUDA libraries."""
    base: VenvPlan | None = None
    """Clone this plan's venv and install only ``wheel`` over it."""
    python: str = field(default=sys.executable)

    def __post_init__(self) -> None:
        problems = []
        for line in (*self.requirements, *self.constraints, *self.excludes):
            try:
                Requirement(line)
            except InvalidRequirement:
                problems.append(f"not a requirement: {line!r}")
        if self.wheel is not None and self.wheel.suffix != ".whl":
            problems.append(f"not a wheel: {self.wheel}")
        if self.base is not None:
            if self.wheel is None:
                problems.append("a plan on a base installs a wheel over it; none given")
            if self.requirements or self.constraints or self.excludes:
                problems.append("a plan on a base takes its requirements from the base")
            if self.python != self.base.python:
                problems.append("a plan on a base uses the base's interpreter")
        if problems:
            raise PatcherError("venv plan: " + "; ".join(problems))

    def describe(self, wheel_sha256: str | None) -> dict[str, Any]:
        """The plan as data; its hash is the venv's key."""
        return {
            "format": FORMAT,
            "python": os.path.realpath(self.python),
            "python_version": _python_version(self.python),
            "requirements": list(self.requirements),
            "constraints": list(self.constraints),
            "excludes": list(self.excludes),
            "wheel": None if self.wheel is None else self.wheel.name,
            "wheel_sha256": wheel_sha256,
            "drop_cuda_binaries": self.drop_cuda_binaries,
            "base": None if self.base is None else venv_key(self.base),
        }


@dataclass(frozen=True)
class Venv:
    """A ready venv."""

    path: Path
    key: str
    plan: VenvPlan
    created: bool
    """Built by this call, not found in the cache."""
    dropped: tuple[str, ...] = ()
    """Files removed after install (CUDA binaries), relative to site-packages."""

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def venvs_root() -> Path:
    return cache_dir() / "envs"


def uv_cache() -> Path:
    """uv's cache inside patcher's, so hardlinks from it into the venvs always work."""
    return cache_dir() / "uv"


_SHA_MEMO: dict[tuple[str, int, int, int], str] = {}


def wheel_sha256(wheel: Path) -> str:
    """The wheel's sha256, hashed once per process per (path, inode, size, mtime)."""
    try:
        st = wheel.stat()
    except OSError as exc:
        raise PatcherError(f"no such wheel: {wheel}") from exc
    memo = (str(wheel.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if memo not in _SHA_MEMO:
        _SHA_MEMO[memo] = sha256_of(wheel)
    return _SHA_MEMO[memo]


def venv_key(plan: VenvPlan) -> str:
    sha = None if plan.wheel is None else wheel_sha256(plan.wheel)
    text = json.dumps(plan.describe(sha), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def ready_venv(plan: VenvPlan) -> Venv:
    """The venv for ``plan``: found in the cache when complete, else built now."""
    if plan.wheel is not None and not plan.wheel.is_file():
        raise PatcherError(f"no such wheel: {plan.wheel}")
    base = None if plan.base is None else ready_venv(plan.base)
    key = venv_key(plan)
    root = venvs_root()
    root.mkdir(parents=True, exist_ok=True)
    _clear_legacy()
    final = root / key
    with FileLock(str(root / f"{key}.lock")):
        found = _read_marker(final, key)
        if found is not None:
            return Venv(final, key, plan, created=False, dropped=tuple(found["dropped"]))
        # Holding the lock, any staging folder for this key is from a build that died.
        for leftover in root.glob(f".{key}.*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}."))
        try:
            what = plan.wheel.name if plan.wheel is not None else "its requirements"
            with step(f"building a venv for {what} (log: {root / f'{key}.log'})"):
                dropped = _build(staging, plan, key, base, log=root / f"{key}.log")
            if final.exists():  # no marker: half a venv from outside this lock's rules
                shutil.rmtree(final.rename(root / f".{key}.stale"))
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Venv(final, key, plan, created=True, dropped=dropped)


def _read_marker(path: Path, key: str) -> dict[str, Any] | None:
    try:
        marker = read_json(path / MARKER, "venv marker")
    except PatcherError:
        return None
    ok = isinstance(marker, dict) and marker.get("key") == key
    return marker if ok and isinstance(marker.get("dropped"), list) else None


def _build(path: Path, plan: VenvPlan, key: str, base: Venv | None, log: Path) -> tuple[str, ...]:
    start = time.monotonic()
    with log.open("w") as out:
        # Read for each build, never once per process: the configuration may change in between
        # (the test suite's offline guard sets PIP_INDEX_URL for one test and not the next).
        uv = Uv(out, log, pip_sources())
        if base is not None:
            clone_tree(base.path, path)
            uv.install(path, "--no-deps", "--reinstall", "--no-cache", str(plan.wheel))
        else:
            uv.run(["venv", "--relocatable", "--python", plan.python, str(path)], "a venv")
            if plan.requirements:
                _install_requirements(uv, path, plan)
            if plan.wheel is not None:
                uv.install(path, "--no-deps", "--no-cache", str(plan.wheel))
    dropped = drop_cuda_binaries(path, plan.wheel) if plan.drop_cuda_binaries else ()
    sha = None if plan.wheel is None else wheel_sha256(plan.wheel)
    marker = {
        "key": key,
        "plan": plan.describe(sha),
        "dropped": list(dropped),
        "seconds": round(time.monotonic() - start, 1),
    }
    (path / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return dropped


def _install_requirements(uv: Uv, path: Path, plan: VenvPlan) -> None:
    files = {
        "requirements": plan.requirements,
        "constraints": plan.constraints,
        "excludes": plan.excludes,
    }
    for name, lines in files.items():
        (path / f"patcher-{name}.txt").write_text("".join(f"{line}\n" for line in lines))
    options = ["-r", str(path / "patcher-requirements.txt")]
    if plan.constraints:
        options += ["--constraint", str(path / "patcher-constraints.txt")]
    if plan.excludes:
        options += ["--excludes", str(path / "patcher-excludes.txt")]
    # pip takes the best version from all its sources; uv's default stops at the first.
    options += ["--index-strategy", "unsafe-best-match", *uv.sources.uv_options()]
    uv.install(path, *options)


class Uv:
    """uv with patcher's cache and no config of its own, logging to one file; ``sources`` are
    pip's, which uv does not read."""

    def __init__(self, out: IO[str], log: Path, sources: PipSources) -> None:
        self.out = out
        self.log = log
        self.sources = sources

    def install(self, venv: Path, *args: str) -> None:
        what = args[-1] if args[-1].endswith(".whl") else "the requirements"
        self.run(["pip", "install", "--python", str(venv / "bin" / "python"), *args], what)

    def run(self, args: list[str], what: str) -> None:
        from uv import find_uv_bin

        command = [find_uv_bin(), *args]
        env = {
            **os.environ,
            **self.sources.uv_environment(),
            "UV_CACHE_DIR": str(uv_cache()),
            "UV_NO_CONFIG": "1",
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            # --no-cache unpacks into a temporary cache: keep it on the venvs' file system.
            "TMPDIR": str(cache_dir()),
        }
        self.out.write(f"$ {redacted(' '.join(command))}\n")
        self.out.flush()
        done = subprocess.run(
            command, stdout=self.out, stderr=subprocess.STDOUT, env=env, check=False
        )
        if done.returncode != 0:
            self.out.flush()
            kept = keep_failed_log(self.log)
            shown = f" (log: {kept})" if kept else ""
            raise PatcherError(f"uv could not install {Path(what).name}{shown}")


FAILED_LOGS_KEPT = 20
"""How many logs of failed uv runs ``keep_failed_log`` keeps under the cache, newest first."""


def keep_failed_log(log: Path) -> Path | None:
    """A copy of the log of a failed uv run under the cache (``logs/``), which outlives the
    folder the log was written in: a caller may write it into a staging folder it deletes on
    the way out (a bundle's), and an error must not name a file that is gone. None when no
    copy could be made: then the error names no log."""
    folder = cache_dir() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        handle, name = tempfile.mkstemp(dir=folder, prefix=f"uv-{stamp}-", suffix=".log")
        os.close(handle)
        kept = Path(name)
        shutil.copyfile(log, kept)
        for old in sorted(folder.glob("uv-*.log"), reverse=True)[FAILED_LOGS_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        return None
    return kept


def clone_tree(source: Path, target: Path) -> None:
    """``target`` as a copy of ``source`` made of hardlinks; no byte-code, no marker, no caches.

    Byte-code is left out so that a module replaced later is never shadowed by a ``.pyc`` of
    the old one that happens to match its size and mtime.
    """
    for folder, dirs, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        skip = {"__pycache__", *(("vllm-cache",) if rel == Path(".") else ())}
        dirs[:] = [d for d in dirs if d not in skip]
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in dirs:
            if (Path(folder) / name).is_symlink():
                os.symlink(os.readlink(Path(folder) / name), target / rel / name)
        for name in files:
            if rel == Path(".") and name == MARKER:
                continue
            src = Path(folder) / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / rel / name)
            else:
                os.link(src, target / rel / name)


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise PatcherError(f"{venv}: expected one site-packages, found {len(found)}")
    return found[0]


def installed_files(venv: Path, wheel: Path) -> Iterator[str]:
    """Paths (relative to site-packages) in the RECORD the installer wrote for ``wheel``."""
    name = wheel.name.split("-")
    record = site_packages(venv) / f"{name[0]}-{name[1]}.dist-info" / "RECORD"
    try:
        text = record.read_text()
    except OSError as exc:
        raise PatcherError(f"{wheel.name} was not installed: no {record}") from exc
    for line in text.splitlines():
        yield line.rsplit(",", 2)[0].strip('"')


def drop_cuda_binaries(venv: Path, wheel: Path | None) -> tuple[str, ...]:
    """Remove the wheel's shared objects that link against a CUDA library; the ones removed."""
    if wheel is None:
        return ()
    site = site_packages(venv)
    dropped = []
    for rel in installed_files(venv, wheel):
        path = site / rel
        if not rel.endswith(".so") or ".so." in rel or not path.is_file():
            continue
        if any(CUDA_LIBRARY.match(lib) for lib in needed_libraries(path)):
            path.unlink()
            dropped.append(rel)
    return tuple(sorted(dropped))


@cache
def _python_version(python: str) -> str:
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return sys.version.split()[0]
    done = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise PatcherError(f"cannot run the interpreter {python}")
    return done.stdout.strip()


def _clear_legacy() -> None:
    """Remove venvs of the old one-full-venv-per-wheel layout whose lock is free."""
    legacy = cache_dir() / LEGACY_ROOT
    if not legacy.is_dir():
        return
    for lock in legacy.glob("*.lock"):
        stem = lock.name.removesuffix(".lock")
        held = FileLock(str(lock), timeout=0)
        try:
            with held:
                for path in [legacy / stem, *legacy.glob(f".{stem}.*"), legacy / f"{stem}.log"]:
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
        except TimeoutError:
            continue
        lock.unlink(missing_ok=True)
    if not any(legacy.iterdir()):
        legacy.rmdir()
