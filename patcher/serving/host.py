"""Whether this machine can run the servers at all: checked before a 30-minute load."""

from __future__ import annotations

import shutil
import subprocess
from importlib.util import find_spec

from patcher.errors import PatcherError


def count_gpus() -> tuple[int, str]:
    """The GPUs the driver lists, and how they were counted, for the error message."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return 0, f"nvidia-smi -L failed: {error}"
        if listed.returncode != 0:
            said = (listed.stderr or listed.stdout).strip().splitlines()
            return 0, f"nvidia-smi -L exited {listed.returncode}: {said[-1] if said else ''}"
        return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()), "nvidia-smi"
    if find_spec("torch") is None:
        return 0, "no nvidia-smi on PATH, no torch"
    import torch

    return torch.cuda.device_count(), "torch.cuda.device_count()"


def check_gpus(needed: int) -> None:
    """Refuse before a 30-minute load that cannot succeed."""
    found, counted_by = count_gpus()
    if found < needed:
        raise PatcherError(f"needs {needed} GPUs, found {found} ({counted_by})")
