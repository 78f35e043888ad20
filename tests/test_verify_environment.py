"""Verify venvs: keyed by the wheel's sha256, renamed into place whole, reused, rebuilt."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from verify_helpers import fake_wheel

from patcher.errors import PatcherError
from patcher.verify import environment
from patcher.verify.environment import MARKER, venv_for, wheel_sha256


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """Every build in order; ``_build`` writes only the marker, the way the real one ends."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    done: list[Path] = []

    def build(path: Path, wheel: Path, sha: str, plan, log: Path) -> None:
        done.append(path)
        marker = {"sha256": sha, "plan": plan.fingerprint()}
        (path / MARKER).write_text(json.dumps(marker))

    monkeypatch.setattr(environment, "_build", build)
    return done


def test_a_venv_is_built_once_under_the_wheel_hash_and_then_reused(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    first = venv_for(wheel)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert first.created and first.sha256 == sha
    assert first.path == tmp_path / "cache" / "venvs" / sha[:16]
    assert first.python == first.path / "bin" / "python"
    assert builds[0].parent == first.path.parent and builds[0].name.startswith(f".{sha[:16]}.")
    again = venv_for(wheel)
    assert not again.created and again.path == first.path
    assert len(builds) == 1
    assert sorted(p.name for p in first.path.parent.iterdir()) == [sha[:16], f"{sha[:16]}.lock"]


def test_a_venv_built_by_another_plan_is_rebuilt(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    first = venv_for(wheel)
    marker = first.path / MARKER
    stale = json.loads(marker.read_text())
    stale["plan"]["install"] = ["something-else"]
    marker.write_text(json.dumps(stale))
    assert venv_for(wheel).created
    assert len(builds) == 2 and json.loads(marker.read_text())["plan"] == first.plan.fingerprint()
    assert not [p for p in first.path.parent.iterdir() if "stale" in p.name]


def test_a_build_that_died_is_cleared_away(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    key = wheel_sha256(wheel)[:16]
    dead = tmp_path / "cache" / "venvs" / f".{key}.k1ll3d"
    (dead / "lib").mkdir(parents=True)
    venv_for(wheel)
    assert not dead.exists()


def test_a_directory_without_a_marker_is_not_a_venv(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    sha = wheel_sha256(wheel)
    (tmp_path / "cache" / "venvs" / sha[:16] / "bin").mkdir(parents=True)
    assert venv_for(wheel).created


def test_a_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))

    def build(path: Path, wheel: Path, sha: str, plan, log: Path) -> None:
        (path / "half").write_text("")
        raise PatcherError("pip could not install the requirements into the verify venv")

    monkeypatch.setattr(environment, "_build", build)
    wheel = fake_wheel(tmp_path)
    with pytest.raises(PatcherError, match="pip could not install"):
        venv_for(wheel)
    left = [p.name for p in (tmp_path / "cache" / "venvs").iterdir()]
    assert left == [f"{wheel_sha256(wheel)[:16]}.lock"]


def test_pip_failure_names_the_step_and_the_log(tmp_path):
    log = tmp_path / "x.log"
    with log.open("w") as out, pytest.raises(PatcherError, match=r"install the CPU torch .*x\.log"):
        environment._pip(["false"], "the CPU torch", out, log)
    assert log.read_text() == "$ false\n"


def test_a_missing_wheel_is_a_patcher_error(tmp_path):
    with pytest.raises(PatcherError, match="no such wheel"):
        venv_for(tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl")
