"""Check, unpack and switch an offline bundle made by ``patcher bundle``; standard library only.

Copied beside the bundle's parts as ``install.py`` and into the bundle itself, so the target
machine needs nothing but Python 3.8 or later:

    python3 install.py unpack DEST          # parts checked against parts.json, unpacked to DEST
    python3 install.py check DEST/BUNDLE    # every file in the tree against manifest.json
    python3 install.py state DEST/BUNDLE    # which state of the patchset the tree is in
    python3 install.py swap DEST/BUNDLE LABEL   # official, a prefix, or the whole patchset
    python3 install.py env DEST/BUNDLE      # the PYTHONPATH line and the settings it forces

Nothing read from ``manifest.json`` or ``parts.json`` is trusted: every path in them is a plain
relative path that stays in the bundle's own folder, and passes through no link there; every
value has the type it must have. Either is refused before anything is written. ``check`` reads
every file in the tree, byte-code and nested ``manifest.json`` files included: a file the
manifest does not list fails it (byte-code Python wrote as the tree ran too: delete the
``__pycache__`` folders to check again). States with the same bytes are one state: ``state``
names the longest prefix of the chain with those bytes, and the others with it.

Exit codes: 0 ok, 1 a check failed (a part, a file, a state), 2 bad input. Every failure is
one line on stderr.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shlex
import shutil
import stat
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PIECE = 1 << 20
FORMAT = 1
INDEX_LIMIT = 64 << 20
HEX = re.compile(r"[0-9a-f]{64}")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
XZ_MAGIC = b"\xfd7zXZ\x00"


class Failed(Exception):
    """A check that did not hold (exit 1)."""


class Refused(Exception):
    """Input this script will not act on (exit 2)."""


def shown(text: object) -> str:
    """``text`` with every control character escaped: a message stays one line."""
    return CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", str(text))


# ---- values read from manifest.json and parts.json ---------------------------------------------


def kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refused(f"{what} is {kind(value)}, not an object")
    return value


def sequence(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise Refused(f"{what} is {kind(value)}, not a list")
    return value


def text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise Refused(f"{what} is {kind(value)}, not a string")
    if CONTROL.search(value):
        raise Refused(f"{what} {shown(repr(value))} holds a control character")
    return value


def digest(value: Any, what: str) -> str:
    if not isinstance(value, str) or not HEX.fullmatch(value):
        raise Refused(f"{what} {shown(repr(value))[:80]} is not a sha256 in lower-case hex")
    return value


def count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused(f"{what} {shown(repr(value))[:80]} is not a size in bytes")
    return value


def relative(value: Any, what: str) -> str:
    """A path in the bundle: relative, of plain names, none of them ``.`` or ``..``."""
    path = text(value, what)
    names = path.split("/")
    if any(name in ("", ".", "..") for name in names):
        raise Refused(f"{what} {shown(repr(path))} is not a plain path inside the bundle")
    try:
        os.fsencode(path)
    except UnicodeError as error:
        raise Refused(f"{what} {shown(repr(path))} is not a file name: {error}") from error
    return path


def name(value: Any, what: str) -> str:
    """One name in a folder: no ``/``."""
    found = relative(value, what)
    if "/" in found:
        raise Refused(f"{what} {shown(repr(found))} is not one name")
    return found


def expect_format(data: dict[str, Any], where: str) -> None:
    found = data.get("format")
    if type(found) is not int or found != FORMAT:  # not 1.0, not True
        raise Refused(f"{where}: format {shown(repr(found))[:40]} is not {FORMAT}")


# ---- files -------------------------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    hasher = hashlib.sha256()
    handle = os.open(path, os.O_RDONLY | NOFOLLOW)
    with os.fdopen(handle, "rb") as stream:
        while True:
            chunk = stream.read(PIECE)
            if not chunk:
                return hasher.hexdigest()
            hasher.update(chunk)


def inside(root: Path, rel: str, what: str) -> Path:
    """``root/rel``: a regular file reached through real folders, no step of it a link."""
    path = root
    steps = rel.split("/")
    for number, step in enumerate(steps):
        path = path / step
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise Failed(f"{shown(what)} {shown(rel)} is missing") from None
        if stat.S_ISLNK(mode):
            raise Refused(f"{shown(what)} {shown(rel)} passes through a link: {shown(path)}")
        last = number == len(steps) - 1
        if (last and not stat.S_ISREG(mode)) or (not last and not stat.S_ISDIR(mode)):
            raise Refused(f"{shown(what)} {shown(rel)}: {shown(path)} is not a plain file")
    return path


def read_json(path: Path) -> dict[str, Any]:
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise Refused(f"{shown(path)} is a link: a bundle's index is a file of its own")
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{shown(path)} is not a file")
        if info.st_size > INDEX_LIMIT:
            raise Refused(f"{shown(path)} is over 64 MiB: not a bundle's index")
        handle = os.open(path, os.O_RDONLY | NOFOLLOW)
        with os.fdopen(handle, "rb") as stream:
            data = json.loads(stream.read(INDEX_LIMIT + 1).decode("utf-8"))
    except (OSError, ValueError) as error:
        raise Refused(f"cannot read {shown(path)}: {shown(error)}") from error
    return mapping(data, str(path))


# ---- the manifest ------------------------------------------------------------------------------


class Manifest:
    """``manifest.json``, every value it holds that this script reads checked for its type and
    every path in it for staying in the bundle."""

    def __init__(self, root: Path) -> None:
        self.root = root
        where = shown(root / "manifest.json")
        data = read_json(root / "manifest.json")
        expect_format(data, where)
        files = mapping(data.get("files"), f"{where}: files")
        self.files: dict[str, str] = {}
        self.sizes: dict[str, int] = {}
        for rel, entry in files.items():
            relative(rel, f"{where}: the listed file")
            if rel == "manifest.json":
                raise Refused(f"{where} lists itself")
            entry = sequence(entry, f"{where}: files[{shown(repr(rel))}]")
            if len(entry) != 2:
                raise Refused(f"{where}: files[{shown(repr(rel))}] is not [sha256, size]")
            self.files[rel] = digest(entry[0], f"{where}: the sha256 of {shown(rel)}")
            self.sizes[rel] = count(entry[1], f"{where}: the size of {shown(rel)}")
        states = mapping(data.get("states"), f"{where}: states")
        order = sequence(states.get("order"), f"{where}: states.order")
        if not order:
            raise Refused(f"{where}: states.order lists no state")
        self.labels: list[str] = []
        for number, link in enumerate(order):
            link = mapping(link, f"{where}: states.order[{number}]")
            label = name(link.get("label"), f"{where}: the label of states.order[{number}]")
            if label in self.labels:
                raise Refused(f"{where}: the state {shown(label)} is listed twice")
            for patch in sequence(link.get("patches", []), f"{where}: {shown(label)}'s patches"):
                text(patch, f"{where}: a patch of {shown(label)}")
            self.labels.append(label)
        installed = states.get("installed", self.labels[-1])
        if text(installed, f"{where}: states.installed") not in self.labels:
            raise Refused(f"{where}: states.installed {shown(installed)} is no state listed")
        self.states: dict[str, dict[str, str]] = {}
        for rel, entry in mapping(states.get("files"), f"{where}: states.files").items():
            relative(rel, f"{where}: the patched file")
            entry = mapping(entry, f"{where}: states.files[{shown(repr(rel))}]")
            for key in ("official_record", "patched_record"):
                if key in entry:
                    digest(entry[key], f"{where}: {key} of {shown(rel)}")
            hashes = mapping(entry.get("states"), f"{where}: the states of {shown(rel)}")
            if sorted(hashes) != sorted(self.labels):
                listed = shown(", ".join(map(str, sorted(hashes))))[:200]
                raise Refused(f"{where}: {shown(rel)} has the states {listed}, not states.order's")
            self.states[rel] = {
                label: digest(value, f"{where}: {shown(rel)} in state {shown(label)}")
                for label, value in hashes.items()
            }
        self.forces: dict[str, str] = {}
        for key, value in mapping(data.get("forces", {}), f"{where}: forces").items():
            if not SETTING.fullmatch(key):
                raise Refused(f"{where}: forces names {shown(repr(key))}, not a setting")
            self.forces[key] = text(value, f"{where}: the value forced for {key}")

    def site_file(self, rel: str) -> Path:
        return inside(self.root, f"site/{rel}", "the patched file")

    def state_file(self, label: str, rel: str) -> Path:
        return inside(self.root, f"states/{label}/{rel}", f"state {label}'s copy of")

    def layout(self) -> None:
        """Each patched file, each state's copy of it and its byte-code folder: real files and
        folders in the tree. Read before a swap or a state writes or reports anything."""
        for folder in ("site", "states"):
            inside_folder(self.root, folder)
        for rel in self.states:
            cache = self.site_file(rel).parent / "__pycache__"
            if os.path.lexists(cache):
                info = os.lstat(cache)
                if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
                    raise Refused(f"{shown(cache)} is not a folder of the tree (a link?)")
            for label in self.labels:
                self.state_file(label, rel)


def inside_folder(root: Path, rel: str) -> Path:
    path = root / rel
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise Failed(f"{shown(path)} is missing") from None
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise Refused(f"{shown(path)} is not a folder of the tree (a link?)")
    return path


# ---- unpack ------------------------------------------------------------------------------------


class Index:
    """``parts.json``: the bundle's name and its parts, checked."""

    def __init__(self, folder: Path) -> None:
        where = shown(folder / "parts.json")
        data = read_json(folder / "parts.json")
        expect_format(data, where)
        self.bundle = name(data.get("bundle"), f"{where}: the bundle's name")
        parts = sequence(data.get("parts"), f"{where}: parts")
        if not parts:
            raise Refused(f"{where} lists no parts")
        self.parts: list[dict[str, Any]] = []
        for number, part in enumerate(parts):
            part = mapping(part, f"{where}: parts[{number}]")
            self.parts.append(
                {
                    "name": name(part.get("name"), f"{where}: the name of parts[{number}]"),
                    "sha256": digest(part.get("sha256"), f"{where}: the sha256 of parts[{number}]"),
                    "size": count(part.get("size"), f"{where}: the size of parts[{number}]"),
                }
            )
        names = [part["name"] for part in self.parts]
        twice = sorted({one for one in names if names.count(one) > 1})
        if twice:
            raise Refused(f"{where} lists {shown(', '.join(twice))} more than once")
        manifest = data.get("manifest_sha256")
        self.manifest_sha256: str | None = (
            None if manifest is None else digest(manifest, f"{where}: manifest_sha256")
        )


class Parts:
    """The parts, read in order as one stream; each one's hash checked as it is read to its end."""

    def __init__(self, folder: Path, parts: list[dict[str, Any]]) -> None:
        self.folder = folder
        self.parts = list(parts)
        self.handle: Any = None
        self.hasher = hashlib.sha256()
        self.current: dict[str, Any] = {}

    def _open_next(self) -> bool:
        self._close_current()
        if not self.parts:
            return False
        self.current = self.parts.pop(0)
        handle = os.open(self.folder / self.current["name"], os.O_RDONLY | NOFOLLOW)
        self.handle = os.fdopen(handle, "rb")
        self.hasher = hashlib.sha256()
        return True

    def _close_current(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
            if self.hasher.hexdigest() != self.current["sha256"]:
                raise Failed(f"part {shown(self.current['name'])} changed while it was read")

    def read(self, size: int = -1) -> bytes:
        size = PIECE if size is None or size < 0 else size
        while True:
            if self.handle is None and not self._open_next():
                return b""
            data = self.handle.read(size)
            if data:
                self.hasher.update(data)
                return data
            self._close_current()

    def close(self) -> None:
        self._close_current()
        if self.parts:
            raise Failed(f"part {shown(self.parts[0]['name'])} was never read")


class Xz:
    """The xz streams in ``source``, read to their true end as ``xz`` reads a file: one stream or
    more, each followed by stream padding (null bytes, a multiple of four); anything else
    after a stream, or a stream cut short, is refused."""

    def __init__(self, source: Parts) -> None:
        self.source = source
        self.decoder: lzma.LZMADecompressor | None = None
        self.pending = b""
        self.padding = 0
        self.streams = 0
        self.ended = False

    def read(self, size: int = -1) -> bytes:
        size = PIECE if size is None or size < 0 else size
        while not self.ended:
            if self.decoder is not None:
                if self.decoder.needs_input:
                    data = self.pending or self.source.read(PIECE)
                    self.pending = b""
                    if not data:
                        raise Refused("the parts end inside an xz stream: a part is cut short")
                else:
                    data = b""
                out = self.decoder.decompress(data, size)
                if self.decoder.eof:
                    self.pending = self.decoder.unused_data
                    self.decoder = None
                if out:
                    return out
                continue
            if not self.pending:
                self.pending = self.source.read(PIECE)
                if not self.pending:
                    if self.streams == 0:
                        raise Refused("the parts hold no xz stream")
                    if self.padding % 4:
                        raise Refused("the xz stream padding is not a multiple of four bytes")
                    self.ended = True
                    break
            rest = self.pending.lstrip(b"\0")
            if self.streams == 0 and len(rest) != len(self.pending):
                raise Refused("the parts do not begin with an xz stream")
            self.padding += len(self.pending) - len(rest)
            self.pending = rest
            if rest:
                if self.padding % 4:
                    raise Refused("the xz stream padding is not a multiple of four bytes")
                while len(rest) < len(XZ_MAGIC):
                    more = self.source.read(PIECE)
                    if not more:
                        break
                    rest += more
                self.pending = rest
                if not rest.startswith(XZ_MAGIC):
                    raise Refused(
                        "the parts are not xz"
                        if self.streams == 0
                        else "what follows an xz stream in the parts is neither xz nor padding"
                    )
                self.padding = 0
                self.streams += 1
                self.decoder = lzma.LZMADecompressor(lzma.FORMAT_XZ)
        return b""

    def finish(self) -> None:
        """Read to the end: what the tar did not need is checked as xz checks it."""
        while self.read(PIECE):
            pass


def unpack(folder: Path, dest: Path) -> Path:
    """The parts in ``folder`` checked and unpacked under ``dest``; the bundle's folder."""
    index = Index(folder)
    for part in index.parts:  # every part whole before any is unpacked: a bad one is named
        path = folder / part["name"]
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise Failed(f"part {shown(part['name'])} is missing") from None
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            raise Refused(f"part {shown(part['name'])} is not a file beside parts.json (a link?)")
        if info.st_size != part["size"] or sha256_of(path) != part["sha256"]:
            raise Failed(f"part {shown(part['name'])} is not the bytes parts.json lists")
    root = dest / index.bundle
    if os.path.lexists(root):
        raise Refused(f"{shown(root)} exists already: unpack into another folder")
    made = []  # the folders made for DEST, removed again if the unpack fails
    for folder_above in reversed([dest, *dest.parents]):
        if not os.path.lexists(folder_above):
            made.append(folder_above)
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{index.bundle}.", suffix=".unpacking"))
    try:
        stream = Parts(folder, index.parts)
        xz = Xz(stream)
        with tarfile.open(fileobj=xz, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                write_member(tar, member, staging, index.bundle)
        xz.finish()
        stream.close()
        tree = staging / index.bundle
        if not tree.is_dir():
            raise Refused(f"the parts hold no folder {shown(index.bundle)}")
        check(tree)
        if index.manifest_sha256 and sha256_of(tree / "manifest.json") != index.manifest_sha256:
            raise Failed("manifest.json is not the one parts.json lists")
        if os.path.lexists(root):
            raise Refused(f"{shown(root)} appeared while the parts were unpacked")
        tree.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder_made in reversed(made):
            try:
                folder_made.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return root


def write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, staging: Path, top: str) -> None:
    rel = relative(member.name.rstrip("/") if member.isdir() else member.name, "a member")
    if rel.split("/")[0] != top:
        raise Refused(f"{shown(rel)}: a member outside the bundle's folder {shown(top)}")
    target = staging.joinpath(*rel.split("/"))
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
    elif member.isreg():
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        if source is None:
            raise Refused(f"{shown(rel)}: a member tar cannot read")
        with target.open("xb") as out:
            shutil.copyfileobj(source, out, PIECE)
        os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
    else:
        raise Refused(f"{shown(rel)}: a bundle holds only files and folders, not links or devices")


# ---- check, state, swap, env -------------------------------------------------------------------


def check(root: Path) -> Manifest:
    """Every file in the tree, with the hash the manifest lists; nothing it does not list (the
    manifest itself aside), nothing that is not a plain file or folder."""
    manifest = Manifest(root)
    bad: list[str] = []
    seen = set()
    problems: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=problems.append):
        base = Path(folder)
        for entry in sorted(dirs + files):
            path = base / entry
            rel = path.relative_to(root).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                continue
            if rel == "manifest.json":
                continue
            if stat.S_ISLNK(mode):
                bad.append(f"{rel} is a link")
                continue
            if not stat.S_ISREG(mode):
                bad.append(f"{rel} is not a plain file")
                continue
            seen.add(rel)
            expected = manifest.files.get(rel)
            if expected is None:
                bad.append(f"{rel} is not in the manifest")
            elif sha256_of(path) != expected:
                if not known_state(manifest, rel, path):
                    bad.append(f"{rel} is not the bytes the manifest lists")
            elif os.lstat(path).st_size != manifest.sizes[rel]:  # the manifest contradicts itself
                bad.append(f"{rel} is not the size the manifest lists")
    if problems:
        bad.append(f"cannot read {problems[0].filename}: {problems[0].strerror}")
    bad += [f"{rel} is missing" for rel in manifest.files if rel not in seen]
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        byte_code = any("__pycache__/" in line or ".pyc " in line for line in bad)
        hint = "; byte-code written as the tree ran is checked too" if byte_code else ""
        raise Failed(shown("; ".join(bad[:3]) + more + hint))
    return manifest


def known_state(manifest: Manifest, rel: str, path: Path) -> bool:
    """A patched file swapped to another known state is as good as the listed one."""
    hashes = manifest.states.get(rel[len("site/") :]) if rel.startswith("site/") else None
    return hashes is not None and sha256_of(path) in hashes.values()


def current_state(manifest: Manifest) -> list[str]:
    """The labels whose bytes the tree holds (more than one where states are equal)."""
    manifest.layout()
    common = set(manifest.labels)
    for rel, hashes in manifest.states.items():
        found = sha256_of(manifest.site_file(rel))
        matches = {label for label, value in hashes.items() if value == found}
        if not matches:
            raise Failed(f"site/{shown(rel)} is in no state the bundle knows")
        common &= matches
    if not common:
        raise Failed("the patched files are in the states of different links of the chain")
    return [label for label in manifest.labels if label in common]


def said(labels: list[str]) -> str:
    """A state as printed: the longest prefix with its bytes, then any equal to it."""
    others = labels[:-1]
    return labels[-1] + (f" (the same bytes as {', '.join(others)})" if others else "")


def swap(root: Path, label: str) -> str:
    """Each patched file written as state ``label`` leaves it: checked before and after. Only
    the patched files are read: a tree in use is written by what runs from it (byte-code, a
    certificate bundle refreshed in place), which ``check`` reports and a swap need not."""
    manifest = Manifest(root)
    if label not in manifest.labels:
        raise Refused(f"no state {shown(repr(label))}; the bundle has {', '.join(manifest.labels)}")
    before = current_state(manifest)
    if label in before:
        return f"{said(before)}: already {label}, nothing to do"
    wanted = {}
    for rel, hashes in manifest.states.items():
        data = manifest.state_file(label, rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != hashes[label]:
            raise Failed(f"states/{label}/{shown(rel)} is not state {label}'s bytes")
        wanted[rel] = data
    for rel, data in wanted.items():
        site_path = manifest.site_file(rel)
        mode = stat.S_IMODE(os.lstat(site_path).st_mode)
        handle, temporary = tempfile.mkstemp(dir=site_path.parent, prefix=f".{site_path.name}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, site_path)
        except BaseException:
            os.unlink(temporary)
            raise
        cache = site_path.parent / "__pycache__"
        if cache.is_dir() and not cache.is_symlink():
            for stale in cache.iterdir():  # Python would not see a file of the same size and
                if stale.name.startswith(f"{site_path.stem}.") and stale.name.endswith(".pyc"):
                    stale.unlink()  # mtime second as changed
    after = current_state(manifest)
    if label not in after:
        raise Failed(f"after the swap the tree is in state {said(after)}, not {label}")
    return f"{said(before)} -> {label}"


def environment(root: Path) -> list[str]:
    manifest = Manifest(root)
    manifest.layout()
    site = Path(os.path.abspath(root)) / "site"
    if CONTROL.search(str(site)) or ":" in str(site):
        raise Refused(
            f"{shown(site)}: PYTHONPATH cannot hold a path with ':' or a control character"
        )
    lines = [f'export PYTHONPATH={shlex.quote(str(site))}"${{PYTHONPATH:+:$PYTHONPATH}}"']
    for key, value in sorted(manifest.forces.items()):
        lines.append(f"# left out of this bundle, so set: {key}={shlex.quote(value)}")
    return lines


def main(argv: list[str]) -> int:
    usage = (
        "usage: install.py unpack DEST | check BUNDLE | state BUNDLE | swap BUNDLE LABEL"
        " | env BUNDLE"
    )
    here = Path(__file__).resolve().parent
    try:
        if len(argv) == 2 and argv[0] == "unpack":
            print(shown(unpack(here, Path(argv[1]))))
        elif len(argv) == 2 and argv[0] == "check":
            check(Path(argv[1]))
            print(f"{shown(argv[1])}: every file as the manifest lists it")
        elif len(argv) == 2 and argv[0] == "state":
            print(said(current_state(Manifest(Path(argv[1])))))
        elif len(argv) == 3 and argv[0] == "swap":
            print(swap(Path(argv[1]), argv[2]))
        elif len(argv) == 2 and argv[0] == "env":
            print("\n".join(environment(Path(argv[1]))))
        else:
            print(usage, file=sys.stderr)
            return 2
    except Failed as error:
        print(f"error: {shown(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (Refused, OSError, ValueError, EOFError, lzma.LZMAError, tarfile.TarError) as error:
        print(f"error: {shown(error)}", file=sys.stderr)
        return 2
    except Exception as error:  # a last guard: one line, never a traceback
        print(f"error: {type(error).__name__}: {shown(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
