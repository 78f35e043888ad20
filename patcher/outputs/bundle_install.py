"""Check, unpack and switch an offline bundle made by ``patcher bundle``; standard library only.

Copied beside the bundle's parts as ``install.py`` and into the bundle itself, so the target
machine needs nothing but Python 3.8 or later:

    python3 install.py unpack DEST          # parts checked against parts.json, unpacked to DEST
    python3 install.py check DEST/BUNDLE    # every file against manifest.json
    python3 install.py state DEST/BUNDLE    # which state of the patchset the tree is in
    python3 install.py swap DEST/BUNDLE LABEL   # official, a prefix, or the whole patchset
    python3 install.py env DEST/BUNDLE      # the PYTHONPATH line and the settings it forces

Exit codes: 0 ok, 1 a check failed (a part, a file, a state), 2 bad input. Every failure is
one line on stderr.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import sys
import tarfile
from pathlib import Path
from typing import BinaryIO

PIECE = 1 << 20


class Failed(Exception):
    """A check that did not hold (exit 1)."""


class Refused(Exception):
    """Input this script will not act on (exit 2)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(PIECE)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def read_json(path: Path) -> dict:
    try:
        if not path.is_file():
            raise Refused(f"{path} is not a file")
        if path.stat().st_size > 64 << 20:
            raise Refused(f"{path} is over 64 MiB: not a bundle's index")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise Refused(f"cannot read {path}: {error}") from error
    if not isinstance(data, dict):
        raise Refused(f"{path} is not a JSON object")
    return data


class Parts:
    """The parts, read in order as one stream; each one's hash checked as it is read."""

    def __init__(self, folder: Path, parts: list) -> None:
        self.folder = folder
        self.parts = list(parts)
        self.handle: BinaryIO | None = None
        self.digest = hashlib.sha256()
        self.current: dict = {}

    def _open_next(self) -> bool:
        self._close_current()
        if not self.parts:
            return False
        self.current = self.parts.pop(0)
        name = str(self.current.get("name", ""))
        if "/" in name or name in ("", ".", ".."):
            raise Refused(f"parts.json names a part {name!r} outside its folder")
        self.handle = (self.folder / name).open("rb")
        self.digest = hashlib.sha256()
        return True

    def _close_current(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
            if self.digest.hexdigest() != self.current.get("sha256"):
                raise Failed(f"part {self.current.get('name')} is not the bytes parts.json lists")

    def read(self, size: int = -1) -> bytes:
        size = PIECE if size is None or size < 0 else size
        while True:
            if self.handle is None and not self._open_next():
                return b""
            assert self.handle is not None
            data = self.handle.read(size)
            if data:
                self.digest.update(data)
                return data
            self._close_current()

    def close(self) -> None:
        self._close_current()


def unpack(folder: Path, dest: Path) -> Path:
    """The parts in ``folder`` checked and unpacked under ``dest``; the bundle's folder."""
    index = read_json(folder / "parts.json")
    parts = index.get("parts")
    name = str(index.get("bundle", ""))
    if not isinstance(parts, list) or not parts or "/" in name or name in ("", ".", ".."):
        raise Refused(f"{folder / 'parts.json'} lists no parts or no bundle name")
    missing = [p.get("name") for p in parts if not (folder / str(p.get("name"))).is_file()]
    if missing:
        raise Failed(f"missing parts: {', '.join(map(str, missing))}")
    for part in parts:  # every part whole before any is unpacked: a bad one is named
        if sha256_of(folder / str(part.get("name"))) != part.get("sha256"):
            raise Failed(f"part {part.get('name')} is not the bytes parts.json lists")
    root = dest / name
    if root.exists():
        raise Refused(f"{root} exists already: unpack into another folder")
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / f".{name}.unpacking"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    stream = Parts(folder, parts)
    try:
        with lzma.open(stream) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                target = safe_target(staging, member)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    with target.open("wb") as out:
                        shutil.copyfileobj(source, out, PIECE)
                    os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
                else:
                    raise Failed(f"{member.name}: a bundle holds only files and folders")
        stream.close()
        if not (staging / name).is_dir():
            raise Failed(f"the parts hold no folder {name}")
        check(staging / name)
        (staging / name).rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def safe_target(root: Path, member: tarfile.TarInfo) -> Path:
    parts = Path(member.name).parts
    if not parts or member.name.startswith("/") or ".." in parts:
        raise Failed(f"{member.name!r}: a path outside the bundle")
    return root.joinpath(*parts)


def check(root: Path) -> dict:
    """Every file the manifest lists, with its hash; and nothing it does not list."""
    manifest = read_json(root / "manifest.json")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise Refused(f"{root / 'manifest.json'} lists no files")
    bad = []
    seen = set()
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.name == "manifest.json":
            continue
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts:
            continue  # written by Python as the tree runs
        seen.add(rel)
        expected = files.get(rel)
        if expected is None:
            if not state_file(manifest, rel, path):
                bad.append(f"{rel} is not in the manifest")
        elif sha256_of(path) != expected[0] and not state_file(manifest, rel, path):
            bad.append(f"{rel} is not the bytes the manifest lists")
    bad += [f"{rel} is missing" for rel in files if rel not in seen]
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise Failed("; ".join(bad[:3]) + more)
    return manifest


def state_file(manifest: dict, rel: str, path: Path) -> bool:
    """A patched file swapped to another known state is as good as the listed one."""
    if not rel.startswith("site/"):
        return False
    entry = manifest.get("states", {}).get("files", {}).get(rel[len("site/") :])
    return bool(entry) and sha256_of(path) in entry["states"].values()


def current_state(root: Path, manifest: dict) -> str:
    files = manifest["states"]["files"]
    labels = [entry["label"] for entry in manifest["states"]["order"]]
    found = set()
    for rel, entry in files.items():
        digest = sha256_of(root / "site" / rel)
        matches = {label for label, value in entry["states"].items() if value == digest}
        if not matches:
            raise Failed(f"site/{rel} is in no state the bundle knows")
        found.add(frozenset(matches))
    common = frozenset(labels).intersection(*found) if found else frozenset(labels)
    for label in labels:  # the first of the chain that explains every file
        if label in common:
            return label
    raise Failed(
        "the patched files are in states of different links: "
        + ", ".join(sorted("/".join(sorted(m)) for m in found))
    )


def swap(root: Path, label: str) -> str:
    """Each patched file written as state ``label`` leaves it: checked before and after. Only
    the patched files are read: a tree in use is written by what runs from it (byte-code, a
    certificate bundle refreshed in place), which ``check`` reports and a swap need not."""
    manifest = read_json(root / "manifest.json")
    states = manifest["states"]
    labels = [entry["label"] for entry in states["order"]]
    if label not in labels:
        raise Refused(f"no state {label!r}; the bundle has {', '.join(labels)}")
    before = current_state(root, manifest)
    for rel, entry in states["files"].items():
        site_path = root / "site" / rel
        source = root / "states" / label / rel
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["states"][label]:
            raise Failed(f"{source} is not state {label}'s bytes")
        tmp = site_path.with_name(f".{site_path.name}.swap")
        tmp.write_bytes(data)
        os.replace(tmp, site_path)
        cache = site_path.parent / "__pycache__"
        for stale in cache.glob(f"{site_path.stem}.*.pyc"):
            stale.unlink()  # Python would not notice a file of the same size and mtime second
    after = current_state(root, manifest)
    if after != label:
        raise Failed(f"after the swap the tree is in state {after}, not {label}")
    return before


def environment(root: Path) -> list[str]:
    manifest = read_json(root / "manifest.json")
    lines = [f"export PYTHONPATH={root / 'site'}${{PYTHONPATH:+:$PYTHONPATH}}"]
    for key, value in sorted(manifest.get("forces", {}).items()):
        lines.append(f"# left out of this bundle, so set: {key}={value}")
    return lines


def main(argv: list) -> int:
    usage = (
        "usage: install.py unpack DEST | check BUNDLE | state BUNDLE | swap BUNDLE LABEL"
        " | env BUNDLE"
    )
    here = Path(__file__).resolve().parent
    try:
        if len(argv) == 2 and argv[0] == "unpack":
            root = unpack(here, Path(argv[1]))
            print(root)
        elif len(argv) == 2 and argv[0] == "check":
            check(Path(argv[1]))
            print(f"{argv[1]}: every file as the manifest lists it")
        elif len(argv) == 2 and argv[0] == "state":
            root = Path(argv[1])
            print(current_state(root, read_json(root / "manifest.json")))
        elif len(argv) == 3 and argv[0] == "swap":
            before = swap(Path(argv[1]), argv[2])
            print(f"{before} -> {argv[2]}")
        elif len(argv) == 2 and argv[0] == "env":
            print("\n".join(environment(Path(argv[1]))))
        else:
            print(usage, file=sys.stderr)
            return 2
    except Failed as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (Refused, OSError, KeyError, lzma.LZMAError, tarfile.TarError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
