"""Verify venvs: one per wheel, keyed by the wheel's sha256, built once and reused.

A venv is built in a temporary directory beside its final place and renamed into place
only when complete, under a file lock, so concurrent runs either wait for it or find it
whole. The scripts in its ``bin/`` keep the temporary path in their shebangs, so
everything runs as ``bin/python -m ...``. Pip, with its own configuration, decides where
packages come from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from filelock import FileLock

from patcher.cache import cache_dir
from patcher.errors import PatcherError
from patcher.verify.requirements import InstallPlan, plan_for_wheel

MARKER = "patcher-venv.json"
"""Written last inside a finished venv: what it was built from."""


@dataclass(frozen=True)
class Venv:
    """A ready verify venv."""

    path: Path
    sha256: str
    plan: InstallPlan
    created: bool
    """Built by this call, not found in the cache."""

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def wheel_sha256(wheel: Path) -> str:
    """The hex sha256 of the wheel file: the venv's identity."""
    digest = hashlib.sha256()
    with wheel.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def venv_for(wheel: Path) -> Venv:
    """The venv for ``wheel``: reused when a complete one built by the same plan exists."""
    if not wheel.is_file():
        raise PatcherError(f"no such wheel: {wheel}")
    plan = plan_for_wheel(wheel)
    sha = wheel_sha256(wheel)
    root = cache_dir() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    final = root / sha[:16]
    with FileLock(str(root / f"{sha[:16]}.lock")):
        if _built_by(final, sha, plan):
            return Venv(final, sha, plan, created=False)
        # Holding the lock, any staging folder for this key is from a build that died.
        for leftover in root.glob(f".{sha[:16]}.*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{sha[:16]}."))
        try:
            _build(staging, wheel, sha, plan, log=root / f"{sha[:16]}.log")
            if final.exists():
                # Built by an older plan: move it aside first so the rename cannot fail.
                shutil.rmtree(final.rename(root / f".{sha[:16]}.stale.{os.getpid()}"))
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Venv(final, sha, plan, created=True)


def _built_by(path: Path, sha: str, plan: InstallPlan) -> bool:
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("sha256") == sha and marker.get("plan") == plan.fingerprint()


def _build(path: Path, wheel: Path, sha: str, plan: InstallPlan, log: Path) -> None:
    """Create the venv at ``path``: CPU torch first, so no requirement can pull a CUDA one."""
    venv.EnvBuilder(with_pip=True, symlinks=True, clear=True).create(path)
    python = path / "bin" / "python"
    constraints = path / "patcher-constraints.txt"
    constraints.write_text(plan.torch + "\n")
    requirements = path / "patcher-requirements.txt"
    requirements.write_text("".join(f"{line}\n" for line in plan.install))
    pip = [str(python), "-m", "pip", "install", "--no-input", "--no-compile"]
    with log.open("w") as out:
        _pip([*pip, "-c", str(constraints), plan.torch], "the CPU torch", out, log)
        _pip([*pip, "-c", str(constraints), "-r", str(requirements)], "the requirements", out, log)
        _pip([*pip, "--no-deps", str(wheel)], wheel.name, out, log)
    marker = {
        "wheel": wheel.name,
        "sha256": sha,
        "plan": plan.fingerprint(),
        "left_out": [list(item) for item in plan.left_out],
    }
    (path / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def _pip(command: list[str], what: str, out: IO[str], log: Path) -> None:
    out.write(f"$ {' '.join(command)}\n")
    out.flush()
    done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise PatcherError(f"pip could not install {what} into the verify venv (log: {log})")
