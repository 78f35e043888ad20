"""The acceptance proof's trained target and drafters, made once and cached by content.

The key is everything the weights follow from: the recipe (seeds and hyperparameters, less the
time budget), the bytes of both in-venv scripts, the replica's own files and the torch that
trains. An entry is a folder written in staging and renamed into place, with the sha256 of
every file it holds; each file is hashed again before an entry is trusted, and one that does
not match is trained again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from patcher.acceptance import train
from patcher.acceptance.recipe import Recipe
from patcher.cache import cache_dir, sha256_of
from patcher.errors import PatcherError
from patcher.replica import seeded
from patcher.replica.build import Replica
from patcher.replica.weights import SeededWeights, run_script
from patcher.replica.write import read_manifest, write_replica
from patcher.serving.venv import ServingVenv

SCRIPT = Path(train.__file__)
CONTROL = "control"
"""The trained drafter with ``fc`` zeroed: it drafts blind to the aux states."""
RESULT = "training.json"
HASHES = "sha256.json"
TIMEOUT_MARGIN = 300
"""Seconds past the recipe's budget for imports, the data and saving, before the run is killed."""


@dataclass(frozen=True)
class Trained:
    """A replica folder whose target and drafter are trained, beside the blind control."""

    folder: Path
    result: dict[str, Any]
    """What ``train.py`` reported: losses, held-out top-1 per step, seconds, served prompts."""
    cached: bool
    seconds: float

    @property
    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.folder)

    def to_json(self) -> dict[str, Any]:
        """The training as a proof's report holds it."""
        return {
            "cached": self.cached,
            "folder": str(self.folder),
            "seconds": self.seconds,
            "result": self.result,
        }

    @property
    def target(self) -> Path:
        return self.folder / self.manifest["target"]

    @property
    def drafter(self) -> Path:
        return self.folder / self.manifest["drafter"]

    @property
    def control(self) -> Path:
        return self.folder / CONTROL


def entry_key(recipe: Recipe, replica: Replica, venv: ServingVenv) -> str:
    """The content key of one training: what the trained weights follow from."""
    parts = {k: v for k, v in recipe.to_json().items() if k != "budget_seconds"}
    digest = hashlib.sha256()
    digest.update(json.dumps(parts, sort_keys=True).encode())
    for script in (SCRIPT, Path(seeded.__file__)):
        digest.update(script.read_bytes())
    for side in (replica.target, replica.drafter):
        for name in sorted(side):
            digest.update(name.encode() + b"\0" + side[name])
    digest.update(venv.torch.describe().encode())
    return digest.hexdigest()[:24]


def file_hashes(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): sha256_of(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != HASHES
    }


def verified(folder: Path) -> dict[str, Any] | None:
    """The training result of a cached entry whose every file is as it was written; else None."""
    try:
        expected = json.loads((folder / HASHES).read_text())
        result = json.loads((folder / RESULT).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(expected, dict) or not isinstance(result, dict):
        return None
    return result if file_hashes(folder) == expected else None


def run_trainer(venv: ServingVenv, folder: Path, recipe: Recipe) -> dict[str, Any]:
    """``train.py`` in ``venv`` on a replica folder with seeded weights; one line on a refusal."""
    manifest = read_manifest(folder)
    control = folder / CONTROL
    control.mkdir()
    shutil.copy2(folder / manifest["drafter"] / "config.json", control / "config.json")
    (folder / "recipe.json").write_text(json.dumps(recipe.to_json(), indent=1) + "\n")
    out = folder / RESULT
    log = folder / "training.log"
    command = [
        str(venv.python),
        "-I",
        str(SCRIPT),
        str(folder / manifest["target"]),
        str(folder / manifest["drafter"]),
        str(control),
        "--recipe",
        str(folder / "recipe.json"),
        "--out",
        str(out),
    ]
    timeout = recipe.budget_seconds + TIMEOUT_MARGIN
    with log.open("w") as sink:
        run_script(command, "training", timeout, stdout=sink)
    try:
        result = json.loads(out.read_text())
    except (OSError, ValueError) as error:
        raise PatcherError(f"training: {SCRIPT.name} wrote no readable result") from error
    for path in folder.rglob("*.safetensors"):
        path.chmod(0o644)  # safetensors writes it private; the cache is for any user
    return dict(result)


def trained_replica(
    replica: Replica, recipe: Recipe, venv: ServingVenv, root: Path | None = None
) -> Trained:
    """The cached training for this replica and recipe, verified; or a new one, trained now."""
    started = time.monotonic()
    root = root or cache_dir() / "acceptance"
    root.mkdir(parents=True, exist_ok=True)
    key = entry_key(recipe, replica, venv)
    final = root / key
    with FileLock(str(root / f"{key}.lock")):
        result = verified(final)
        if result is not None:
            return Trained(final, result, True, round(time.monotonic() - started, 1))
        for leftover in root.glob(f".{key}.*"):  # a training that died, under this lock
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}."))
        try:
            folder = write_replica(
                replica, staging / "replica", weights=SeededWeights(venv.python, recipe.seed)
            )
            result = run_trainer(venv, folder, recipe)
            (folder / HASHES).write_text(json.dumps(file_hashes(folder), indent=1) + "\n")
            if final.exists():  # it failed verification: replaced, never trusted
                shutil.rmtree(final)
            folder.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Trained(final, result, False, round(time.monotonic() - started, 1))
