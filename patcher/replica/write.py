"""A replica on disk: ``OUT/target``, ``OUT/drafter`` and ``OUT/patcher-replica.json``.

Written into a staging folder beside ``OUT`` and renamed into place, so ``OUT`` is either the old
replica or the whole new one. A folder that is not a replica is never replaced.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from patcher.cache import removed_on_failure
from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.outputs.named import check_folder
from patcher.replica.build import Replica
from patcher.replica.weights import SeededWeights

MANIFEST = "patcher-replica.json"
NO_WEIGHTS = "none: configs only, for --load-format dummy"


def write_replica(
    replica: Replica,
    out: Path,
    option: str | None = None,
    weights: SeededWeights | None = None,
) -> Path:
    """Write ``replica`` to ``out``, replacing an earlier replica there; return ``out``.

    ``option`` is the flag that named ``out`` (``--out``), whose folder must then exist (see
    ``patcher.outputs.named``); None for a folder of patcher's own, made with its parents. With
    ``weights``, the staging folder gets them before it is renamed into place.
    """
    if option is not None:
        check_folder(out, option)
    if out.exists() and not (out / MANIFEST).is_file() and any(out.iterdir()):
        raise PatcherError(f"{out} exists and is not a replica; choose an empty or new folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    except OSError as error:
        raise PatcherError(f"cannot write to {out.parent}: {error.strerror or error}") from error
    with removed_on_failure(staging, out):
        staging.chmod(0o755)  # mkdtemp makes it private; a replica is for any user
        for folder, files in (("target", replica.target), ("drafter", replica.drafter)):
            (staging / folder).mkdir()
            for name, content in files.items():
                (staging / folder / name).write_bytes(content)
        written = weights.write(staging) if weights else NO_WEIGHTS
        manifest = {**replica.manifest(), "weights": written}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            old = out.rename(out.parent / f"{staging.name}.old")
            try:
                staging.rename(out)
            except BaseException:
                old.rename(out)
                raise
            shutil.rmtree(old)
        else:
            staging.rename(out)
    return out


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a replica folder written by ``write_replica``."""
    try:
        data = read_json(folder / MANIFEST, "replica manifest")
    except PatcherError as error:
        raise PatcherError(f"{folder} is not a replica ({error})") from error
    if not isinstance(data, dict):
        raise PatcherError(f"{folder / MANIFEST}: not a JSON object")
    return data
