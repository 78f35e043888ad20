"""Run the probe's checks in each wheel's venv and pair the results before -> after."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from packaging.version import InvalidVersion, Version

from patcher.checks import CHECKS, MODEL_CHECKS, REPLICA_CHECKS, REPLICA_DIR
from patcher.errors import PatcherError
from patcher.progress import step
from patcher.replica.build import generate
from patcher.replica.write import write_replica
from patcher.venvs import wheel_sha256
from patcher.verify import probe
from patcher.verify.environment import verify_venvs
from patcher.verify.report import CheckOutcome, CheckResult, VerifyReport
from patcher.wheel_metadata import wheel_version

PROBE = Path(probe.__file__)
PROBE_TIMEOUT = 1800
"""Seconds for one wheel's probe; a healthy one takes about a minute on two idle cores."""


class ProbeTarget(Protocol):
    """Where a probe runs: a verify venv, or an environment verified in place."""

    @property
    def path(self) -> Path:
        """The folder vLLM keeps its caches under for the run."""

    @property
    def python(self) -> Path: ...


def verify_wheels(
    official_wheel: Path,
    patched_wheel: Path | None,
    version: str,
    checks: Sequence[str] | None = None,
    model: str | None = None,
) -> VerifyReport:
    """Run ``checks`` (all by default) on the official wheel and, if given, the patched one.

    ``model`` names the patchset's model for the checks in ``MODEL_CHECKS``.
    """
    names = _select(checks, model)
    wheels = [official_wheel] if patched_wheel is None else [official_wheel, patched_wheel]
    for wheel in wheels:
        _check_version(wheel, version)
    if patched_wheel is not None and wheel_sha256(official_wheel) == wheel_sha256(patched_wheel):
        raise PatcherError(f"{patched_wheel} is the official wheel itself, not a patched one")
    start = time.monotonic()
    sides = ("official",) if patched_wheel is None else ("official", "patched")
    venvs = dict(zip(sides, verify_venvs(official_wheel, patched_wheel), strict=True))
    setup = time.monotonic() - start
    # One probe process per wheel runs every check, so vLLM is imported once per wheel.
    with (
        tempfile.TemporaryDirectory(prefix="patcher-verify-") as tmp,
        ThreadPoolExecutor(len(venvs)) as pool,
    ):
        runs = {
            side: pool.submit(run_probe, venv, names, Path(tmp) / side, model)
            for side, venv in venvs.items()
        }
        wheels_said = " and ".join(f"the {side} wheel" for side in venvs)
        with step(f"running {len(names)} check(s) on {wheels_said}, a vLLM probe each"):
            before = runs["official"].result()
            after = runs["patched"].result() if "patched" in runs else None
    return VerifyReport(
        vllm=version,
        wheel=wheels[-1].name,
        checks=tuple(
            CheckResult(name, before[name], None if after is None else after[name])
            for name in names
        ),
        setup_seconds=round(setup, 1),
    )


def run_probe(
    env: ProbeTarget, checks: Sequence[str], workdir: Path, model: str | None = None
) -> dict[str, CheckOutcome]:
    """Run ``checks`` in ``env``'s interpreter; a check the probe did not report failed."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra = ["--model", model] if model and MODEL_CHECKS & set(checks) else []
    if model:
        architecture = model.split(":")[1]
        for check in REPLICA_CHECKS & set(checks):
            write_replica(generate(architecture), workdir / check / REPLICA_DIR)
    try:
        # -I: neither the probe's own folder (patcher/verify) nor PYTHONPATH or the user
        # site may shadow anything the venv's vLLM imports.
        done = subprocess.run(
            [str(env.python), "-I", str(PROBE), *checks, "--workdir", str(workdir), *extra],
            env=probe_environment(env),
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        why = f"error: probe timed out after {PROBE_TIMEOUT} s"
        return _read_results(stdout, checks, why, PROBE_TIMEOUT)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return _read_results(done.stdout, checks, f"error: probe exited {done.returncode}: {tail}")


def _read_results(
    stdout: str, checks: Sequence[str], why: str, seconds: float = 0.0
) -> dict[str, CheckOutcome]:
    """The result line of each check; ``why`` for each check that has none."""
    found: dict[str, CheckOutcome] = {}
    for line in stdout.splitlines():
        try:
            result = json.loads(line)
            found[result["check"]] = CheckOutcome(
                result["status"], result["detail"], float(result["seconds"])
            )
        except (ValueError, KeyError, TypeError):
            continue
    return {name: found.get(name, CheckOutcome("fail", why, seconds)) for name in checks}


def probe_environment(env: ProbeTarget) -> dict[str, str]:
    """The parent's environment plus offline flags, with vLLM's caches kept in the venv."""
    child = dict(os.environ)
    child.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_CACHE_ROOT=str(env.path / "vllm-cache"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    return child


def _select(checks: Sequence[str] | None, model: str | None) -> tuple[str, ...]:
    """The checks asked for (a patchset's, whose reading checked the names), each once; by
    default every check, less the model checks when no model is named (they need one)."""
    if checks is None:
        return tuple(c for c in CHECKS if model or c not in MODEL_CHECKS)
    return tuple(dict.fromkeys(checks))


def _check_version(wheel: Path, version: str) -> None:
    try:
        wanted = Version(version)
    except InvalidVersion as exc:
        raise PatcherError(f"not a vLLM version: {version!r}") from exc
    found = wheel_version(wheel)
    if Version(found.public) != wanted:
        raise PatcherError(f"{wheel.name} is vllm {found}, not {version}")
