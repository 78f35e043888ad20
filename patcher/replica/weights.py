"""Seeded weights for a replica, written by transformers in a venv that has it and torch.

patcher depends on neither, so ``seeded.py`` runs in another interpreter (a serving venv's): on
a replica's staging folder, before ``write_replica`` renames it into place, so a failure leaves
no half-weighted replica behind.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from patcher.errors import PatcherError
from patcher.replica import seeded

SCRIPT = Path(seeded.__file__)
TIMEOUT = 900
"""Seconds for transformers to import and save a replica; about 25 s on two shared cores."""
WEIGHT_GLOB = "*.safetensors"


@dataclass(frozen=True)
class SeededWeights:
    """How a replica's weights are made: reproducible from these three."""

    python: Path
    """An interpreter with torch and transformers (a serving venv's)."""
    seed: int = 0
    init_std: float = 0.02
    """transformers' ``initializer_range``: 0.02 is what a drafter could learn from (issue 18)."""

    def describe(self) -> str:
        return f"seeded (seed {self.seed}, init std {self.init_std:g}, written by transformers)"

    def write(self, folder: Path) -> dict[str, object]:
        """Weights into ``folder``'s ``target`` and ``drafter``; one-line error on a refusal.

        Returns what was written: each side's class and tensor count, for the manifest."""
        command = [
            str(self.python),
            "-I",  # nothing beside the script or on PYTHONPATH may shadow the venv's packages
            str(SCRIPT),
            str(folder / "target"),
            str(folder / "drafter"),
            "--seed",
            str(self.seed),
            "--init-std",
            repr(self.init_std),
        ]
        done = run_script(command, "no seeded weights", TIMEOUT)
        try:
            written = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as error:
            raise PatcherError(f"{SCRIPT.name} reported nothing readable") from error
        for path in folder.rglob(WEIGHT_GLOB):
            path.chmod(0o644)  # safetensors writes it private; a replica is for any user
        return {"how": self.describe(), **written}


def run_script(
    command: list[str], failing: str, timeout: float, stdout: IO[str] | int = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    """Run a patcher script in another interpreter (``command[0]``, a venv's python); one line
    on a failure, ``failing: why``, whether it cannot start, overruns ``timeout`` or refuses."""
    try:
        done = subprocess.run(
            command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
    except OSError as error:
        raise PatcherError(f"cannot run {command[0]}: {error.strerror or error}") from error
    except subprocess.TimeoutExpired as error:
        raise PatcherError(f"{failing}: over {timeout:.0f} s, killed") from error
    if done.returncode != 0:
        raise PatcherError(f"{failing}: {refusal(done)}")
    return done


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """Why an in-venv script failed: its last ``error: ...`` line (a refusal it printed), else
    the last line of its stderr (a crash)."""
    lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
    refused = [line for line in lines if line.startswith("error: ")]
    return refused[-1].removeprefix("error: ") if refused else lines[-1]


def holds_weights(folder: Path) -> bool:
    """Whether a model folder has weights on disk (a hub id or a configs-only folder has not)."""
    return folder.is_dir() and any(folder.glob(WEIGHT_GLOB))
