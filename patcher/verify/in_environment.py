"""``patcher verify --installed``: run a patchset's checks in an environment as it is.

Where ``verify --vllm`` builds a venv per wheel and compares the official wheel with the patched
one, this runs the same probe, every check in one process, with the interpreter given: it proves an
environment patched in place (or shows what an unpatched one lacks). Nothing is installed;
vLLM's caches for the run go to a temporary folder, not into the environment.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patcher.verify.report import CheckResult, VerifyReport
from patcher.verify.runner import run_probe


@dataclass(frozen=True)
class InPlace:
    """The interpreter to probe, and a scratch folder for vLLM's caches."""

    python: Path
    path: Path


def verify_in_place(
    python: str, version: str, description: str, checks: Sequence[str], model: str | None = None
) -> VerifyReport:
    """Each check's outcome in ``python``'s environment, in the report's ``before`` slot (the
    only side there is); the report's ``ok`` is then whether every check passes there."""
    with tempfile.TemporaryDirectory(prefix="patcher-verify-installed-") as tmp:
        outcomes = run_probe(InPlace(Path(python), Path(tmp)), checks, Path(tmp) / "probe", model)
    return VerifyReport(
        vllm=version,
        wheel=description,
        checks=tuple(CheckResult(c, outcomes[c], None) for c in checks),
        setup_seconds=0.0,
    )
