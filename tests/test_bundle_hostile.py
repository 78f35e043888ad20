"""Hand-made hostile bundles against the bundle's own ``install.py`` (issue 38, class 2).

A small bundle is made here, with no index: a tree like ``patcher bundle``'s (``site/``,
``states/LABEL/``, ``install.py``, ``manifest.json``) packed by ``bundle.write_tar`` into an xz
stream cut into parts. A generator then spoils it: escaping paths in every field that holds one,
smuggled files, every field ``install.py`` reads given wrong types, truncated and padded parts.
Each case runs the real script (``python3 install.py ...``) in a process of its own and holds it
to: the exit status the case expects, at most one line on stderr and no traceback, and no file
written, changed or removed outside the bundle's own folder (nothing at all where it refuses).
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from patcher.outputs import bundle

INSTALL = Path(bundle.__file__).with_name("bundle_install.py")
NAME = "vllm-0.20.0-cp311-manylinux_2_28_x86_64"
SPEC = "vllm/config/speculative.py"
EAGLE = "vllm/v1/spec_decode/eagle.py"
CHAIN: dict[str, dict[str, bytes]] = {
    "official": {SPEC: b"SUPPORTED = ['llama']\n", EAGLE: b"class Eagle: pass\n"},
    "first1": {SPEC: b"SUPPORTED = ['llama', 'kimi']\n", EAGLE: b"class Eagle: pass\n"},
    "patched": {SPEC: b"SUPPORTED = ['llama', 'kimi']\n", EAGLE: b"class Eagle: aux = 1\n"},
}
VICTIM = b"a file beside the bundle\n"
PART_SIZE = 4096


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_tree(root: Path, chain: dict[str, dict[str, bytes]], forces: dict[str, str]) -> None:
    """A bundle's unpacked tree, as ``bundle.build`` lays it out, installed in the last state."""
    labels = list(chain)
    site = root / "site"
    files = {
        "vllm/__init__.py": b"",
        "vllm/_C.abi3.so": os.urandom(3 * PART_SIZE),  # incompressible: several parts
        **chain[labels[-1]],
    }
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    for label, state in chain.items():
        for rel, data in state.items():
            (root / "states" / label / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "states" / label / rel).write_bytes(data)
    shutil.copy2(INSTALL, root / "install.py")
    paths = sorted(chain[labels[-1]])
    manifest = {
        "format": bundle.FORMAT,
        "release": "0.20.0",
        "forces": forces,
        "states": {
            "installed": labels[-1],
            "order": [
                {"label": label, "patches": labels[1 : i + 1]} for i, label in enumerate(labels)
            ],
            "files": {
                rel: {
                    "official_record": sha(chain[labels[0]][rel]),
                    "patched_record": sha(chain[labels[-1]][rel]),
                    "states": {label: sha(chain[label][rel]) for label in labels},
                }
                for rel in paths
            },
        },
        "files": bundle.file_hashes(root),
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def tar_bytes(root: Path, extra: Callable[[tarfile.TarFile], None] | None = None) -> bytes:
    buffer = io.BytesIO()
    bundle.write_tar(root, buffer)
    if extra is None:
        return buffer.getvalue()
    data = io.BytesIO()  # the same members, then the extra ones
    with (
        tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as source,
        tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for member in source:
            tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        extra(tar)
    return data.getvalue()


def write_parts(out: Path, packed: bytes, name: str = NAME) -> None:
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for number, start in enumerate(range(0, len(packed), PART_SIZE)):
        chunk = packed[start : start + PART_SIZE]
        part = f"{name}.tar.xz.{number:03d}"
        (out / part).write_bytes(chunk)
        parts.append({"name": part, "size": len(chunk), "sha256": sha(chunk)})
    shutil.copy2(INSTALL, out / "install.py")
    index = {"format": bundle.FORMAT, "bundle": name, "parts": parts}
    (out / "parts.json").write_text(json.dumps(index, indent=1) + "\n")


@dataclass
class Sandbox:
    """``top/bundle`` the parts, ``top/dest/NAME`` an unpacked tree, ``top/victim.txt`` and
    ``top/dest/victim.txt`` files beside them, ``top/outside`` a folder of its own."""

    top: Path

    @property
    def parts(self) -> Path:
        return self.top / "bundle"

    @property
    def root(self) -> Path:
        return self.top / "dest" / NAME

    def index(self) -> dict[str, Any]:
        return json.loads((self.parts / "parts.json").read_text())

    def write_index(self, index: Any) -> None:
        (self.parts / "parts.json").write_text(json.dumps(index))

    def manifest(self) -> dict[str, Any]:
        return json.loads((self.root / "manifest.json").read_text())

    def write_manifest(self, manifest: Any) -> None:
        (self.root / "manifest.json").write_text(json.dumps(manifest))

    def repack(self, tree: Path, extra: Callable[[tarfile.TarFile], None] | None = None) -> None:
        for path in self.parts.iterdir():
            path.unlink()
        write_parts(self.parts, lzma.compress(tar_bytes(tree, extra)))

    def last_part(self, change: Callable[[bytes], bytes]) -> None:
        """The last part's bytes changed, and its size and hash in parts.json with them."""
        index = self.index()
        entry = index["parts"][-1]
        path = self.parts / entry["name"]
        data = change(path.read_bytes())
        path.write_bytes(data)
        entry.update(size=len(data), sha256=sha(data))
        self.write_index(index)


def make_sandbox(top: Path, chain: dict[str, dict[str, bytes]] | None = None) -> Sandbox:
    box = Sandbox(top)
    source = top / "src" / NAME
    make_tree(source, chain or CHAIN, {"attention_backend": "TRITON_ATTN"})
    write_parts(box.parts, lzma.compress(tar_bytes(source)))
    shutil.copytree(source, box.root)
    shutil.rmtree(top / "src")
    (top / "victim.txt").write_bytes(VICTIM)
    (top / "dest" / "victim.txt").write_bytes(VICTIM)
    (top / "outside").mkdir()
    (top / "outside" / "secret.txt").write_bytes(b"not the bundle's\n")
    return box


def snapshot(top: Path, skip: Path | None = None) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``top`` (none followed through a link), but those under ``skip``."""
    seen: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            if skip is not None and (path == skip or skip in path.parents):
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                seen[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                seen[str(path)] = ("file", sha(path.read_bytes()), stat.S_IMODE(info.st_mode))
            else:
                seen[str(path)] = (stat.S_IFMT(info.st_mode),)
    return seen


PYTHON = os.environ.get("PATCHER_INSTALL_PYTHON", sys.executable)
"""The interpreter the script runs under: the target's may be as old as 3.8 (set this to one)."""


def run_install(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, str(box.parts / "install.py"), *args],
        cwd=box.top,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=60,
        check=False,
    )


@dataclass
class Case:
    id: str
    setup: Callable[[Sandbox], None]
    command: str
    """``unpack``, ``check``, ``state``, ``swap:LABEL`` or ``env``."""
    expect: int
    post: Callable[[Sandbox, subprocess.CompletedProcess[str]], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def argv(box: Sandbox, command: str) -> list[str]:
    if command == "unpack":
        return ["unpack", str(box.top / "out")]
    if command.startswith("swap:"):
        return ["swap", str(box.root), command[5:]]
    return [command, str(box.root)]


# ---- the generator ----------------------------------------------------------------------------

TREE_COMMANDS = ("check", "state", "swap:official", "swap:patched", "env")
WRONG = {
    "dict": [[], "x", 7, None],
    "list": [{}, "x", None, 7],
    "str": [7, None, [], True],
    "hex": [7, None, "A" * 64, "00"],
    "int": ["1", None, -1, True, 1.5, 1.0],  # 1.0 == 1 in Python, but not an int
}
MANIFEST_FIELDS: list[tuple[tuple[Any, ...], str]] = [
    ((), "dict"),
    (("format",), "int"),
    (("files",), "dict"),
    (("files", "install.py"), "list"),
    (("files", "install.py", 0), "hex"),
    (("files", "install.py", 1), "int"),
    (("states",), "dict"),
    (("states", "installed"), "str"),
    (("states", "order"), "list"),
    (("states", "order", 0), "dict"),
    (("states", "order", 0, "label"), "str"),
    (("states", "order", 0, "patches"), "list"),
    (("states", "files"), "dict"),
    (("states", "files", SPEC), "dict"),
    (("states", "files", SPEC, "states"), "dict"),
    (("states", "files", SPEC, "states", "official"), "hex"),
    (("states", "files", SPEC, "states", "patched"), "hex"),
    (("forces",), "dict"),
    (("forces", "attention_backend"), "str"),
]
INDEX_FIELDS: list[tuple[tuple[Any, ...], str]] = [
    ((), "dict"),
    (("format",), "int"),
    (("bundle",), "str"),
    (("parts",), "list"),
    (("parts", 0), "dict"),
    (("parts", -1), "dict"),
    (("parts", 0, "name"), "str"),
    (("parts", 0, "sha256"), "hex"),
    (("parts", 0, "size"), "int"),
]


def replaced(data: Any, where: tuple[Any, ...], value: Any) -> Any:
    if not where:
        return value
    data = copy.deepcopy(data)
    holder = data
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = value
    return data


def set_manifest(where: tuple[Any, ...], value: Any) -> Callable[[Sandbox], None]:
    return lambda box: box.write_manifest(replaced(box.manifest(), where, value))


def set_index(where: tuple[Any, ...], value: Any) -> Callable[[Sandbox], None]:
    return lambda box: box.write_index(replaced(box.index(), where, value))


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Sandbox], None]:
    def setup(box: Sandbox) -> None:
        manifest = box.manifest()
        change(manifest)
        box.write_manifest(manifest)

    return setup


def edit_index(change: Callable[[dict[str, Any]], None]) -> Callable[[Sandbox], None]:
    def setup(box: Sandbox) -> None:
        index = box.index()
        change(index)
        box.write_index(index)

    return setup


def escaping_state_path(rel_of: Callable[[Sandbox], str]) -> Callable[[Sandbox], None]:
    """The issue's shape: a state path out of ``site/`` whose current bytes are the victim's,
    and whose ``official`` bytes a file the bundle carries (listed, so ``check`` passes)."""

    def setup(box: Sandbox) -> None:
        rel = rel_of(box)
        evil = b"written by the bundle\n"
        (box.root / "evil.txt").write_bytes(evil)
        manifest = box.manifest()
        manifest["files"]["evil.txt"] = [sha(evil), len(evil)]
        states = {"official": sha(evil), "first1": sha(evil), "patched": sha(VICTIM)}
        manifest["states"]["files"][rel] = {"states": states}
        box.write_manifest(manifest)
        for label in ("official", "first1", "patched"):
            source = box.root / "states" / label / rel
            if not source.resolve().is_relative_to(box.root):
                continue
            source.parent.mkdir(parents=True, exist_ok=True)
            if not source.exists():
                source.write_bytes(evil if label != "patched" else VICTIM)

    return setup


def rename_state_path(new: str) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["states"]["files"][new] = manifest["states"]["files"].pop(SPEC)

    return change


def rename_label(new: Any) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["states"]["order"][1]["label"] = new
        for entry in manifest["states"]["files"].values():
            entry["states"][new if isinstance(new, str) else "x"] = entry["states"].pop("first1")

    return change


def rename_listed(new: Any) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["files"][new] = [sha(VICTIM), len(VICTIM)]

    return change


def smuggle(rel: str, data: bytes = b"import os; os.system('touch PWNED')\n") -> Callable:
    def setup(box: Sandbox) -> None:
        path = box.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return setup


def link_in_tree(rel: str, target: Callable[[Sandbox], Path], keep: bool = False) -> Callable:
    """``rel`` in the tree made a link to ``target``; with ``keep``, a copy of what it was."""

    def setup(box: Sandbox) -> None:
        path = box.root / rel
        goal = target(box)
        if path.is_dir():
            if keep:
                shutil.copytree(path, goal)
            shutil.rmtree(path)
        elif path.exists():
            if keep:
                goal.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, goal)
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(goal)

    return setup


def pyc() -> bytes:
    """An unchecked-hash ``.pyc`` (flags 0b01): Python runs it without looking at the source."""
    import importlib.util
    import marshal

    code = compile("import os\nos.system('touch PWNED')\n", "speculative.py", "exec")
    return importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + b"\0" * 8 + marshal.dumps(code)


def repacked(change: Callable[[Path], None] | None = None, extra: Callable | None = None):
    """The parts rebuilt from the tree, changed by ``change`` and/or with ``extra`` members."""

    def setup(box: Sandbox) -> None:
        tree = box.top / "work" / NAME
        shutil.copytree(box.root, tree)
        if change is not None:
            change(tree)
        box.repack(tree, extra)
        shutil.rmtree(box.top / "work")

    return setup


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"x", link: str = ""):
    def extra(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = link
        info.size = len(data) if kind == tarfile.REGTYPE else 0
        tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

    return extra


def tree_manifest_change(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(tree: Path) -> None:
        manifest = json.loads((tree / "manifest.json").read_text())
        change(manifest)
        (tree / "manifest.json").write_text(json.dumps(manifest))

    return apply


def two_streams(box: Sandbox) -> None:
    data = tar_bytes(box.root)
    half = len(data) // 2
    for path in box.parts.iterdir():
        path.unlink()
    write_parts(box.parts, lzma.compress(data[:half]) + lzma.compress(data[half:]))


def cases() -> list[Case]:
    found: list[Case] = []

    def tree(id_: str, setup: Callable[[Sandbox], None], expect: dict[str, int] | int = 2):
        for command in TREE_COMMANDS:
            code = expect if isinstance(expect, int) else expect.get(command, 2)
            found.append(Case(f"{id_}-{command}", setup, command, code))

    # controls: the bundle as made works, each command
    found.append(Case("control-unpack", lambda box: None, "unpack", 0))
    for command in ("check", "state", "swap:official", "swap:first1", "swap:patched", "env"):
        found.append(Case(f"control-{command}", lambda box: None, command, 0))

    # escaping paths: state paths
    escapes: dict[str, Callable[[Sandbox], str]] = {
        "dotdot": lambda box: "../../victim.txt",
        "dotdot-deep": lambda box: "vllm/../../../victim.txt",
        "absolute": lambda box: str(box.top / "dest" / "victim.txt"),
        "absolute-outside": lambda box: str(box.top / "outside" / "secret.txt"),
    }
    for name, rel_of in escapes.items():
        tree(f"state-path-{name}", escaping_state_path(rel_of))
    odd_paths = {
        "nul": "vllm/config/spec\0ulative.py",
        "newline": "vllm/config/spec\nulative.py",
        "escape-seq": "vllm/\x1b[31mred.py",
        "empty": "",
        "dot": "vllm/./config/speculative.py",
        "double-slash": "vllm//config/speculative.py",
        "trailing-slash": "vllm/config/",
        "dot-only": ".",
    }
    for name, rel in odd_paths.items():
        tree(f"state-path-{name}", edit_manifest(rename_state_path(rel)))
    # escaping paths: labels (a label is a folder under states/)
    for name, label in {
        "dotdot": "../../..",
        "slash": "a/b",
        "absolute": "/tmp",
        "nul": "first\x001",
        "newline": "first\n1",
        "empty": "",
        "dot": ".",
    }.items():
        tree(f"label-{name}", edit_manifest(rename_label(label)))
    tree(
        "label-duplicate", edit_manifest(lambda m: m["states"]["order"][1].update(label="official"))
    )
    tree(
        "label-unknown-in-files",
        edit_manifest(lambda m: m["states"]["files"][SPEC]["states"].pop("first1")),
    )
    tree("order-empty", set_manifest(("states", "order"), []))
    # escaping paths: the files the manifest lists
    for name, rel in {
        "dotdot": "../victim.txt",
        "absolute": "/etc/hostname",
        "nul": "site/a\0b",
        "newline": "site/a\nb",
        "dot": "./install.py",
        "manifest-itself": "manifest.json",
    }.items():
        tree(f"listed-{name}", edit_manifest(rename_listed(rel)))
    # links: out of the tree, into it, on the way to a patched file
    out_copy = lambda sub: lambda box: box.top / "outside" / sub  # noqa: E731
    linked = {"check": 1}
    tree("link-site", link_in_tree("site", out_copy("site"), keep=True), linked)
    tree("link-states", link_in_tree("states", out_copy("states"), keep=True), linked)
    tree(
        "link-state-label", link_in_tree("states/official", out_copy("official"), keep=True), linked
    )
    tree(
        "link-patched-file",
        link_in_tree(f"site/{SPEC}", out_copy("speculative.py"), keep=True),
        linked,
    )
    tree(
        "link-patched-folder",
        link_in_tree("site/vllm/config", out_copy("config"), keep=True),
        linked,
    )
    tree("link-manifest", link_in_tree("manifest.json", out_copy("manifest.json"), keep=True))

    def cache_link(box: Sandbox) -> None:
        outside = box.top / "outside" / "cache"
        outside.mkdir()
        (outside / "speculative.cpython-311.pyc").write_bytes(b"someone else's")
        (box.root / "site" / "vllm" / "config" / "__pycache__").symlink_to(outside)

    tree("link-pycache-out", cache_link, {"check": 1})

    def swap_tmp_link(box: Sandbox) -> None:
        (box.root / "site" / "vllm" / "config" / ".speculative.py.swap").symlink_to(
            box.top / "victim.txt"
        )

    # the link is not the manifest's: check reports it; a swap must not write through it
    tree(
        "link-swap-temp",
        swap_tmp_link,
        {"check": 1, "state": 0, "swap:official": 0, "swap:patched": 0, "env": 0},
    )

    # smuggled files: check must name them (exit 1)
    smuggled = {
        "pyc-spec": ("site/vllm/config/__pycache__/speculative.cpython-311.pyc", pyc()),
        "pyc-init": ("site/vllm/__pycache__/__init__.cpython-311.pyc", pyc()),
        "pyc-opt": ("site/vllm/__pycache__/__init__.cpython-311.opt-1.pyc", pyc()),
        "pycache-py": ("site/vllm/__pycache__/evil.py", b"x = 1\n"),
        "manifest-site": ("site/manifest.json", b"{}"),
        "manifest-nested": ("site/vllm/manifest.json", b"{}"),
        "manifest-states": ("states/official/manifest.json", b"{}"),
        "pth": ("site/evil.pth", b"import os\n"),
        "sitecustomize": ("site/sitecustomize.py", b"import os\n"),
        "hidden": ("site/vllm/.hidden.py", b"x = 1\n"),
        "newline-name": ("site/vllm/a\nb.py", b"x = 1\n"),
        "escape-name": ("site/vllm/\x1b[2Jclear.py", b"x = 1\n"),
        "state-file": ("states/official/vllm/extra.py", b"x = 1\n"),
    }
    for name, (rel, data) in smuggled.items():
        found.append(Case(f"smuggled-{name}-check", smuggle(rel, data), "check", 1))
    found.append(
        Case(
            "changed-same-size-check",
            smuggle("site/vllm/_C.abi3.so", os.urandom(3 * PART_SIZE)),
            "check",
            1,
        )
    )

    def fifo(box: Sandbox) -> None:
        os.mkfifo(box.root / "site" / "vllm" / "fifo.py")

    found.append(Case("smuggled-fifo-check", fifo, "check", 1))
    found.append(
        Case(
            "smuggled-link-out-check",
            link_in_tree("site/vllm/hostname.py", lambda box: Path("/etc/hostname")),
            "check",
            1,
        )
    )

    # wrong types: every field install.py reads, the tree's commands
    for where, kind in MANIFEST_FIELDS:
        for number, value in enumerate(WRONG[kind]):
            label = "-".join(str(part) for part in where) or "whole"
            tree(f"manifest-type-{label}-{number}", set_manifest(where, value))
    for name, raw in {"not-json": b"{", "not-utf8": b'{"files": "\xff"}', "empty": b""}.items():
        tree(f"manifest-{name}", lambda box, raw=raw: (box.root / "manifest.json").write_bytes(raw))
    tree("forces-newline", set_manifest(("forces",), {"attention_backend": "X\nrm -rf ~"}))

    def size_off_by_one(manifest: dict[str, Any]) -> None:  # the bytes right, the size not
        manifest["files"]["install.py"][1] += 1

    # check (every file as listed) says the tree is not as listed; the rest read states only
    ok = {"check": 1, "state": 0, "env": 0, "swap:official": 0, "swap:patched": 0}
    tree("manifest-size-wrong", edit_manifest(size_off_by_one), ok)
    tree("forces-key-space", set_manifest(("forces",), {"a b; touch INJECTED": "X"}))

    # parts.json: wrong types and escaping names (unpack)
    for where, kind in INDEX_FIELDS:
        for number, value in enumerate(WRONG[kind]):
            label = "-".join(str(part) for part in where) or "whole"
            found.append(Case(f"index-type-{label}-{number}", set_index(where, value), "unpack", 2))
    for name, raw in {"not-json": b"[", "not-utf8": b'{"bundle": "\xff"}', "empty": b""}.items():
        found.append(
            Case(
                f"index-{name}",
                lambda box, raw=raw: (box.parts / "parts.json").write_bytes(raw),
                "unpack",
                2,
            )
        )

    def part_named(new: str, place: Callable[[Sandbox], Path] | None = None):
        def setup(box: Sandbox) -> None:
            index = box.index()
            old = box.parts / index["parts"][0]["name"]
            if place is not None:
                goal = place(box)
                goal.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(old, goal)
            index["parts"][0]["name"] = new
            box.write_index(index)

        return setup

    for name, new in {
        "dotdot": "../victim.txt",
        "absolute": "/etc/hostname",
        "nul": "part\0.000",
        "dot": ".",
        "empty": "",
    }.items():
        found.append(Case(f"part-name-{name}", part_named(new), "unpack", 2))
    found.append(
        Case(
            "part-name-outside-copy",
            part_named("../outside/p.000", lambda box: box.top / "outside" / "p.000"),
            "unpack",
            2,
        )
    )
    found.append(
        Case(
            "part-name-newline",
            part_named("p\n.000", lambda box: box.parts / "p\n.000"),
            "unpack",
            2,
        )
    )

    def part_link(box: Sandbox) -> None:
        first = box.parts / box.index()["parts"][0]["name"]
        shutil.move(first, box.top / "outside" / "p.000")
        first.symlink_to(box.top / "outside" / "p.000")

    found.append(Case("part-name-parts-json", part_named("parts.json"), "unpack", 1))
    found.append(Case("part-is-a-link", part_link, "unpack", 2))
    found.append(
        Case(
            "part-listed-twice",
            edit_index(lambda i: i["parts"].append(dict(i["parts"][0]))),
            "unpack",
            2,
        )
    )

    def index_link(box: Sandbox) -> None:
        shutil.move(box.parts / "parts.json", box.top / "outside" / "parts.json")
        (box.parts / "parts.json").symlink_to(box.top / "outside" / "parts.json")

    found.append(Case("index-is-a-link", index_link, "unpack", 2))
    for name, value in {
        "dotdot": "../escape",
        "absolute": "/tmp/escape",
        "dotdot-only": "..",
        "dot": ".",
        "slash": "a/b",
        "nul": "vllm\0x",
        "newline": "vllm\nx",
        "escape-seq": "\x1b]0;title\x07",
    }.items():
        found.append(Case(f"bundle-name-{name}", set_index(("bundle",), value), "unpack", 2))
    found.append(Case("bundle-name-other", set_index(("bundle",), "another"), "unpack", 2))
    found.append(Case("manifest-sha256-type", set_index(("manifest_sha256",), 7), "unpack", 2))
    found.append(
        Case("manifest-sha256-wrong", set_index(("manifest_sha256",), "0" * 64), "unpack", 1)
    )
    found.append(Case("part-hash-wrong", set_index(("parts", 0, "sha256"), "0" * 64), "unpack", 1))
    found.append(
        Case(
            "part-missing",
            lambda box: (box.parts / box.index()["parts"][-1]["name"]).unlink(),
            "unpack",
            1,
        )
    )

    # the xz stream: truncated, padded, followed by junk; the parts as xz reads them
    xz = shutil.which("xz")
    for name, change, expect in [
        ("truncated-half", lambda data: data[: len(data) // 2], 2),
        ("truncated-1", lambda data: data[:-1], 2),
        ("truncated-12", lambda data: data[:-12], 2),
        ("padding-4", lambda data: data + b"\0" * 4, 0),
        ("padding-8", lambda data: data + b"\0" * 8, 0),
        ("padding-4096", lambda data: data + b"\0" * 4096, 0),
        ("padding-3", lambda data: data + b"\0" * 3, 2),
        ("padding-5", lambda data: data + b"\0" * 5, 2),
        ("junk-after", lambda data: data + b"JUNK", 2),
        ("padding-then-junk", lambda data: data + b"\0" * 4 + b"JUNK", 2),
        ("second-stream-empty-tar", lambda data: data + lzma.compress(b"\0" * 1024), 0),
    ]:
        found.append(
            Case(
                f"xz-{name}",
                lambda box, change=change: box.last_part(change),
                "unpack",
                expect,
                extra={"xz": xz},
            )
        )
    found.append(Case("xz-two-streams", two_streams, "unpack", 0, extra={"xz": xz}))

    def not_xz(box: Sandbox) -> None:
        import gzip

        for path in box.parts.iterdir():
            path.unlink()
        write_parts(box.parts, gzip.compress(tar_bytes(box.root)))

    found.append(Case("xz-gzip-instead", not_xz, "unpack", 2))

    def lzma_alone(box: Sandbox) -> None:
        for path in box.parts.iterdir():
            path.unlink()
        write_parts(box.parts, lzma.compress(tar_bytes(box.root), format=lzma.FORMAT_ALONE))

    found.append(Case("xz-lzma-alone", lzma_alone, "unpack", 2))

    # the tar inside: members out of the bundle's folder, links, devices, smuggled files
    for name, extra in {
        "dotdot": member(f"{NAME}/../escaped.txt"),
        "dotdot-top": member("../escaped.txt"),
        "absolute": member("/tmp/escaped-by-bundle.txt"),
        "sibling": member("another/file.txt"),
        "newline": member(f"{NAME}/site/a\nb.py"),
        "symlink": member(f"{NAME}/site/link", tarfile.SYMTYPE, link="/etc/hostname"),
        "symlink-dir": member(f"{NAME}/site/out", tarfile.SYMTYPE, link="../../.."),
        "hardlink": member(f"{NAME}/site/hard", tarfile.LNKTYPE, link=f"{NAME}/install.py"),
        "fifo": member(f"{NAME}/site/fifo", tarfile.FIFOTYPE),
        "chardev": member(f"{NAME}/site/dev", tarfile.CHRTYPE),
    }.items():
        found.append(Case(f"tar-{name}", repacked(extra=extra), "unpack", 2))
    for name, (rel, data) in {
        "pyc": ("site/vllm/config/__pycache__/speculative.cpython-311.pyc", pyc()),
        "manifest-nested": ("site/vllm/manifest.json", b"{}"),
        "pth": ("site/evil.pth", b"import os\n"),
    }.items():
        found.append(
            Case(
                f"tar-smuggled-{name}",
                repacked(extra=member(f"{NAME}/{rel}", data=data)),
                "unpack",
                1,
            )
        )
    found.append(
        Case(
            "tar-manifest-state-escape",
            repacked(tree_manifest_change(rename_state_path("../../victim.txt"))),
            "unpack",
            2,
        )
    )
    found.append(
        Case(
            "tar-manifest-forces-type",
            repacked(tree_manifest_change(lambda m: m.update(forces=[1]))),
            "unpack",
            2,
        )
    )
    return found


CASES = cases()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("hostile") / "base"
    make_sandbox(top)
    return top


def one_line(text: str) -> bool:
    return "Traceback" not in text and text.count("\n") <= 1


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_hostile_bundle_is_refused_in_one_line(case: Case, base: Path, tmp_path: Path):
    box = Sandbox(tmp_path / "box")
    shutil.copytree(base, box.top, symlinks=True)
    case.setup(box)
    before = snapshot(box.top)
    done = run_install(box, *argv(box, case.command))
    said = f"exit {done.returncode}: {done.stderr!r} {done.stdout[:300]!r}"
    assert done.returncode == case.expect, said
    assert one_line(done.stderr), said
    if case.expect == 0:
        assert done.stderr == "", said
    else:
        assert done.stderr.startswith("error: "), said
    # nothing outside the bundle's folder; nothing at all where the script refused
    inside = box.top / "out" if case.command == "unpack" else box.root  # DEST is named
    after = snapshot(box.top, skip=inside if case.expect == 0 else None)
    assert after == snapshot_without(before, inside if case.expect == 0 else None), said
    assert not list(box.top.rglob("PWNED")) and not list(box.top.rglob("INJECTED"))
    if case.extra.get("xz"):  # padding and streams: the script agrees with xz itself
        joined = b"".join((box.parts / p["name"]).read_bytes() for p in box.index()["parts"])
        tested = subprocess.run([case.extra["xz"], "-t"], input=joined, capture_output=True)
        assert (tested.returncode == 0) == (done.returncode == 0), tested.stderr
    if case.command == "unpack" and case.expect == 0:
        root = Path(done.stdout.strip())
        assert root == (box.top / "out" / NAME)
        assert run_install(box, "check", str(root)).returncode == 0


def snapshot_without(seen: dict[str, tuple[Any, ...]], skip: Path | None) -> dict[str, tuple]:
    if skip is None:
        return seen
    return {
        path: value
        for path, value in seen.items()
        if not (Path(path) == skip or skip in Path(path).parents)
    }


# ---- states with the same bytes, and swap from every state to every state ----------------------

EQUAL_CHAIN: dict[str, dict[str, bytes]] = {
    "official": {SPEC: b"SUPPORTED = ['llama']\n", EAGLE: b"class Eagle: pass\n"},
    "first1": {SPEC: b"SUPPORTED = ['llama', 'kimi']\n", EAGLE: b"class Eagle: pass\n"},
    "first2": {SPEC: b"SUPPORTED = ['llama', 'kimi']\n", EAGLE: b"class Eagle: aux = 1\n"},
    "patched": {SPEC: b"SUPPORTED = ['llama', 'kimi']\n", EAGLE: b"class Eagle: aux = 1\n"},
}
"""The shape of kimi-k2.5-eagle3 on vLLM 0.16.0: its last patch is not-needed, so ``first2``
(the chain up to it) and ``patched`` hold the same bytes."""


def equal_labels(chain: dict[str, dict[str, bytes]], label: str) -> list[str]:
    return [other for other in chain if chain[other] == chain[label]]


@pytest.mark.parametrize("chain", [CHAIN, EQUAL_CHAIN], ids=["distinct", "equal-bytes"])
def test_swap_reaches_every_state_from_every_state(chain, tmp_path):
    box = make_sandbox(tmp_path / "box", chain)
    outside = snapshot(box.top, skip=box.root)
    said = run_install(box, "state", str(box.root))
    assert said.returncode == 0 and said.stdout.split()[0] == "patched", said.stderr
    assert all(label in said.stdout for label in equal_labels(chain, "patched"))
    swapped = run_install(box, "swap", str(box.root), "patched")  # the kimi-k2.5 report
    assert swapped.returncode == 0 and swapped.stderr == "", swapped.stderr
    for start in chain:
        for goal in chain:
            assert run_install(box, "swap", str(box.root), start).returncode == 0
            done = run_install(box, "swap", str(box.root), goal)
            assert done.returncode == 0 and done.stderr == "", (start, goal, done.stderr)
            for rel, data in chain[goal].items():
                assert (box.root / "site" / rel).read_bytes() == data
            state = run_install(box, "state", str(box.root)).stdout
            equal = equal_labels(chain, goal)
            assert state.split()[0] == equal[-1], (goal, state)  # the longest prefix named
            assert all(label in state for label in equal), (goal, state)
            assert run_install(box, "check", str(box.root)).returncode == 0
    assert snapshot(box.top, skip=box.root) == outside


def test_a_mixed_tree_is_in_no_state_and_a_swap_says_so(tmp_path):
    box = make_sandbox(tmp_path / "box")
    (box.root / "site" / SPEC).write_bytes(CHAIN["official"][SPEC])  # EAGLE stays patched
    for args in (("state", str(box.root)), ("swap", str(box.root), "official")):
        done = run_install(box, *args)
        assert done.returncode == 1 and one_line(done.stderr), done.stderr
    assert (box.root / "site" / EAGLE).read_bytes() == CHAIN["patched"][EAGLE]  # nothing written


# ---- env: lines a shell can eval, absolute ------------------------------------------------------


@pytest.mark.parametrize(
    "folder", ["plain", "with space", "$(touch INJECTED)", "it's `touch INJECTED`", "a;b&c|d"]
)
def test_env_lines_are_quoted_and_absolute(folder, tmp_path):
    bash = shutil.which("bash")
    assert bash is not None
    box = make_sandbox(tmp_path / folder)
    relative = os.path.relpath(box.root, tmp_path)
    script = 'eval "$("$0" "$1" env "$2")" && printf %s "$PYTHONPATH"'
    for existing, joined in [(None, ""), ("/x y:/z", ":/x y:/z")]:
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if existing is not None:
            environment["PYTHONPATH"] = existing
        done = subprocess.run(
            [bash, "-c", script, PYTHON, str(box.parts / "install.py"), relative],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert done.stdout == f"{box.root}/site{joined}"
    assert not list(tmp_path.rglob("INJECTED"))
    lines = subprocess.run(
        [PYTHON, str(box.parts / "install.py"), "env", relative],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    ).stdout.splitlines()  # fmt: skip
    assert lines[1:] == ["# left out of this bundle, so set: attention_backend=TRITON_ATTN"]


def test_env_refuses_a_folder_pythonpath_cannot_hold(tmp_path):
    box = make_sandbox(tmp_path / "a:b")
    done = run_install(box, "env", str(box.root))
    assert done.returncode == 2 and one_line(done.stderr) and "PYTHONPATH" in done.stderr


def test_the_script_is_python_3_8_syntax():
    import ast

    ast.parse(INSTALL.read_text(encoding="utf-8"), feature_version=(3, 8))


@pytest.mark.network
def test_the_real_kimi_chain_on_0_16_0_swaps_every_way(index, tmp_path):
    """The issue's report: kimi-k2.5-eagle3 on vLLM 0.16.0, whose last patch is not-needed, so
    ``first3`` and ``patched`` hold the same bytes. The states are the real chain's (the engine
    over the official wheel, as ``patcher bundle`` makes them); the tree around them is small."""
    from patcher import patchset as patchsets
    from patcher.bundling import chain_states
    from patcher.index import machine_platform
    from patcher.official import IndexedWheel, downloaded

    release = index.release("0.16.0")
    entry = release.wheel_for(machine_platform())
    assert entry is not None
    path, sha256 = downloaded(IndexedWheel(index, release, entry))
    states = chain_states(patchsets.load("kimi-k2.5-eagle3"), path, sha256)
    chain = {state.label: state.files for state in states}
    assert equal_labels(chain, "patched") == ["first3", "patched"]
    box = make_sandbox(tmp_path / "box", chain)
    said = run_install(box, "state", str(box.root)).stdout
    assert said.split()[0] == "patched" and "first3" in said
    for start in chain:
        for goal in chain:
            assert run_install(box, "swap", str(box.root), start).returncode == 0
            done = run_install(box, "swap", str(box.root), goal)
            assert done.returncode == 0 and done.stderr == "", (start, goal, done.stderr)
            assert (
                run_install(box, "state", str(box.root)).stdout.split()[0]
                == equal_labels(chain, goal)[-1]
            )


def oldest_python() -> str | None:
    for found in [
        shutil.which("python3.8"),
        *Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"),
    ]:
        if (
            found
            and subprocess.run([str(found), "-c", "pass"], capture_output=True).returncode == 0
        ):
            return str(found)
    return None


def test_the_script_runs_under_python_3_8(tmp_path):
    """The whole generator runs under it with PATCHER_INSTALL_PYTHON; here a few of its cases."""
    python = oldest_python()
    if python is None:
        pytest.skip("no Python 3.8 on this machine")
    box = make_sandbox(tmp_path / "box", EQUAL_CHAIN)
    script = str(box.parts / "install.py")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, script, *args], capture_output=True, text=True, check=False)

    done = run("unpack", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    root = Path(done.stdout.strip())
    assert run("check", str(root)).returncode == 0
    assert run("state", str(root)).stdout.startswith("patched (the same bytes as first2)")
    assert run("swap", str(root), "official").returncode == 0
    assert run("swap", str(root), "patched").returncode == 0
    assert run("env", str(root)).stdout.startswith("export PYTHONPATH=")
    box.last_part(lambda data: data[:-1])
    done = run("unpack", str(tmp_path / "again"))
    assert done.returncode == 2 and one_line(done.stderr), done.stderr
