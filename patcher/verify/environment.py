"""Verify venvs: the official wheel's venv, and the patched wheel's venv layered on it.

The plans come from :mod:`patcher.verify.requirements` (the wheel's requirements less the GPU
stack, with the CPU torch); :mod:`patcher.venvs` builds them. The patched venv is a hardlink
clone of the official one with the patched wheel installed over it by uv, so installing it
exercises its RECORD and the uninstall of the official wheel the way a user's upgrade would.
"""

from __future__ import annotations

from pathlib import Path

from patcher.errors import PatcherError
from patcher.venvs import Venv, VenvPlan, ready_venv
from patcher.verify.requirements import plan_for_wheel


def official_plan(wheel: Path) -> VenvPlan:
    """The official wheel on CPU: its requirements, the CPU torch, no CUDA binaries."""
    if not wheel.is_file():
        raise PatcherError(f"no such wheel: {wheel}")
    install = plan_for_wheel(wheel)
    return VenvPlan(
        requirements=(install.torch, *install.install),
        constraints=(install.torch,),
        wheel=wheel,
        drop_cuda_binaries=True,
    )


def patched_plan(official: VenvPlan, wheel: Path) -> VenvPlan:
    """The patched wheel installed over the official wheel's venv."""
    return VenvPlan(wheel=wheel, drop_cuda_binaries=True, base=official)


def verify_venvs(official: Path, patched: Path | None) -> list[Venv]:
    """The venv of the official wheel and, if given, the one of the patched wheel."""
    plan = official_plan(official)
    if patched is None:
        return [ready_venv(plan)]
    if not patched.is_file():
        raise PatcherError(f"no such wheel: {patched}")
    return [ready_venv(plan), ready_venv(patched_plan(plan, patched))]
