"""The overlay wheel: the patched modules of one vLLM release, served at import, no vLLM file
touched.

It installs beside the official vLLM and leaves with ``pip uninstall``. Its code is
``overlay_boot.py`` and ``overlay_runtime.py`` (standard library only), copied in as the
package's ``__init__.py`` and ``runtime.py``; the manifest names the vLLM distribution and
version and, per module, the official and patched sha256, which the runtime checks before it
serves anything.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from patcher import __version__
from patcher.errors import PatcherError
from patcher.outputs.wheel import local_version
from patcher.records import Hash
from patcher.result import PatchResult
from patcher.sources.base import Source

PACKAGE = "vllm_patcher_overlay"
"""The import name and the distribution's normalised name: one overlay per environment, so a
second one replaces the first (pip uninstalls it) rather than stacking."""
DISTRIBUTION = "vllm-patcher-overlay"
FORMAT = 1
RUNTIME = Path(__file__).with_name("overlay_runtime.py")
"""The finder's logic, ``vllm_patcher_overlay/runtime.py``: read on the first vLLM import."""
BOOT = Path(__file__).with_name("overlay_boot.py")
"""The package's ``__init__.py``, which every interpreter imports: small."""
PTH_LINE = f"import {PACKAGE}; {PACKAGE}.activate()\n"
"""A ``.pth`` import line: ``site`` runs it at every interpreter's start."""
START_LINE = f"{PACKAGE}:activate\n"
"""PEP 829's ``.start`` entry point, the same call; where Python reads it, it disables the
``.pth`` file's import line of the same name."""
STAMP = (1980, 1, 1, 0, 0, 0)
"""Every member's time: equal inputs give equal bytes."""


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def module_name(path: str) -> str:
    """``vllm/config/speculative.py`` -> ``vllm.config.speculative``; a package's
    ``__init__.py`` is the package."""
    stem = path.removesuffix(".py").removesuffix("/__init__")
    return stem.replace("/", ".")


@dataclass(frozen=True)
class OverlayPlan:
    """What decides the overlay's bytes. Validates itself and reports every problem at once."""

    distribution: str
    vllm: str
    version: Version
    """The overlay's own version: the vLLM release with the patchset's local label."""
    patchsets: tuple[str, ...]
    modules: tuple[tuple[str, bytes, bytes], ...]
    """Each patched file: its path in the wheel (``vllm/...py``), official bytes, patched bytes."""
    states: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """A bundle's other states of a module (``official``, ``first1`` ...): its path and their
    sha256, which the runtime serves too, so that ``install.py swap`` can bisect the chain in the
    overlay's own copy. Empty for an overlay of its own."""

    def __post_init__(self) -> None:
        problems = []
        if not self.modules:
            problems.append("no patched module (the release needs no patch)")
        for path, official, patched in self.modules:
            parts = path.split("/")
            if (
                len(parts) < 2
                or parts[0] != "vllm"
                or not path.endswith(".py")
                or not all(p.removesuffix(".py").isidentifier() for p in parts)
            ):
                problems.append(f"{path!r} is not a module of the vllm package")
            elif official == patched:
                problems.append(f"{path}: the patched bytes are the official ones")
        paths = {path for path, _, _ in self.modules}
        for path, hashes in self.states:
            if path not in paths:
                problems.append(f"states of {path!r}, which the overlay does not patch")
            if not hashes or not all(_is_sha256(h) for h in hashes):
                problems.append(f"{path}: the states' hashes are not sha256")
        if self.version.public != Version(self.vllm).public:
            problems.append(f"overlay version {self.version} is not of vLLM {self.vllm}")
        if problems:
            raise PatcherError("overlay: " + "; ".join(problems))

    @property
    def wheel_name(self) -> str:
        return f"{PACKAGE}-{self.version}-py3-none-any.whl"

    def manifest(self) -> dict[str, object]:
        states = dict(self.states)
        return {
            "format": FORMAT,
            "distribution": self.distribution,
            "version": self.vllm,
            "patchsets": list(self.patchsets),
            "tool": f"patcher {__version__}",
            "modules": {
                module_name(path): {
                    "file": path,
                    "official_sha256": hashlib.sha256(official).hexdigest(),
                    "patched_sha256": hashlib.sha256(patched).hexdigest(),
                    **({"states_sha256": sorted(set(states[path]))} if path in states else {}),
                }
                for path, official, patched in sorted(self.modules)
            },
        }

    def members(self) -> list[tuple[str, bytes]]:
        """The wheel's files but RECORD, in order."""
        info = f"{PACKAGE}-{self.version}.dist-info"
        manifest = json.dumps(self.manifest(), indent=2, sort_keys=True) + "\n"
        metadata = (
            "Metadata-Version: 2.1\n"
            f"Name: {DISTRIBUTION}\n"
            f"Version: {self.version}\n"
            f"Summary: patched modules of {self.distribution} {self.vllm} served at import "
            f"({', '.join(self.patchsets)}), made by patcher\n"
            f"Requires-Dist: {self.distribution}=={self.vllm}\n"
        )
        wheel = (
            "Wheel-Version: 1.0\n"
            f"Generator: patcher {__version__}\n"
            "Root-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        )
        entry_points = f"[vllm.general_plugins]\npatcher_overlay = {PACKAGE}:plugin\n"
        return [
            (f"{PACKAGE}/__init__.py", BOOT.read_bytes()),
            (f"{PACKAGE}/runtime.py", RUNTIME.read_bytes()),
            (f"{PACKAGE}/manifest.json", manifest.encode()),
            *((f"{PACKAGE}/modules/{path}", patched) for path, _, patched in sorted(self.modules)),
            (f"{PACKAGE}.pth", PTH_LINE.encode()),
            (f"{PACKAGE}.start", START_LINE.encode()),
            (f"{info}/METADATA", metadata.encode()),
            (f"{info}/WHEEL", wheel.encode()),
            (f"{info}/entry_points.txt", entry_points.encode()),
        ]


def overlay_plan(
    result: PatchResult,
    official: Source,
    label: str | None = None,
    patchsets: tuple[str, ...] | None = None,
    states: dict[str, tuple[bytes, ...]] | None = None,
) -> OverlayPlan:
    """The overlay of ``result``, a run over ``official``, whose bytes it hashes; labelled with
    the patchset's local label unless ``label`` is given, naming ``patchsets`` (default: the
    result's) where it holds more than one patchset's texts, serving also a bundle's ``states``
    of each module (its path and every state's bytes)."""
    modules = []
    for path, text in sorted(result.changed.items()):
        data = official.read(path)
        if data is None:
            raise PatcherError(f"{path}: gone from {result.distribution} {result.version}")
        modules.append((path, data, text.encode("utf-8")))
    chosen = result.patchset.local_label if label is None else label
    return OverlayPlan(
        distribution=result.distribution,
        vllm=str(result.version),
        version=local_version(str(result.version), chosen),
        patchsets=patchsets or (result.patchset.name,),
        modules=tuple(modules),
        states=tuple(
            (path, tuple(hashlib.sha256(data).hexdigest() for data in datas))
            for path, datas in sorted((states or {}).items())
        ),
    )


def wheel_bytes(plan: OverlayPlan) -> bytes:
    """The whole wheel, RECORD last, members in a fixed order with a fixed time."""
    members = plan.members()
    record_name = f"{PACKAGE}-{plan.version}.dist-info/RECORD"
    record = "".join(f"{name},{Hash.of(data)},{len(data)}\n" for name, data in members)
    record += f"{record_name},,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in [*members, (record_name, record.encode())]:
            info = zipfile.ZipInfo(name, STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def cached_overlay(plan: OverlayPlan, official_sha256: str) -> Path:
    """The overlay in patcher's cache beside the patched wheels of the same official wheel;
    equal plans give equal bytes, so one written before is kept."""
    from patcher.cache import cache_dir

    dist = cache_dir() / "patched" / official_sha256 / "overlay"
    target = dist / plan.wheel_name
    if target.is_file() and target.read_bytes() == wheel_bytes(plan):
        return target
    return build_overlay(plan, dist)


def build_overlay(plan: OverlayPlan, dist: Path, replace_other: bool = True) -> Path:
    """The overlay wheel written into ``dist`` (made if missing), whole or not at all. Without
    ``replace_other`` (``overlay`` without ``--force``), a file already at its name that holds
    other bytes is kept and refused; the same bytes are a rebuild, and stay."""
    data = wheel_bytes(plan)
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / plan.wheel_name
    if target.is_dir() and not target.is_symlink():
        raise PatcherError(f"{target} is a folder, not this overlay (nothing was written)")
    if not replace_other and (target.exists() or target.is_symlink()):
        same = target.is_file() and not target.is_symlink() and target.read_bytes() == data
        if same:
            return target
        raise PatcherError(
            f"{target} exists and is not this overlay: --force replaces it (nothing was written)"
        )
    handle, temporary = tempfile.mkstemp(dir=dist, prefix=f".{plan.wheel_name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def installed_overlay(site: Path) -> dict[str, object] | None:
    """The manifest of the overlay in ``site`` (site-packages), None where there is none; a
    manifest that cannot be read is an error naming it."""
    manifest = site / PACKAGE / "manifest.json"
    if not manifest.exists():
        return None
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PatcherError(
            f"{manifest}: an overlay's manifest that cannot be read ({error})"
        ) from error
    if not isinstance(data, dict):
        raise PatcherError(f"{manifest}: an overlay's manifest that is not a JSON object")
    return data


def describe(data: dict[str, object]) -> str:
    """An overlay's manifest or status in words: its patchsets and the vLLM it is for."""
    patchsets = data.get("patchsets")
    names = ", ".join(map(str, patchsets)) if isinstance(patchsets, list) else "?"
    return f"{names or '?'} for {data.get('distribution', 'vllm')} {data.get('version', '?')}"


STATUS_SCRIPT = f"""
import json, sys
try:
    import {PACKAGE} as overlay
except ImportError:
    print("null")
    sys.exit(0)
print(json.dumps(overlay.status()))
"""


def overlay_status(python: str) -> dict[str, object] | None:
    """What the overlay installed for ``python`` would do there (its runtime's ``status()``,
    asked in that interpreter, so its site and its environment decide), None without one."""
    import subprocess

    try:
        done = subprocess.run(
            [python, "-c", STATUS_SCRIPT], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PatcherError(f"{python}: cannot ask it about an overlay ({error})") from error
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PatcherError(f"{python}: its overlay's status is unreadable ({tail})") from None
    if data is not None and not isinstance(data, dict):
        raise PatcherError(f"{python}: its overlay's status is not an object")
    return data
