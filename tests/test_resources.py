"""Zip files are context managers: a wheel read or repacked is closed when the work is done,
also when it fails (the traceback of a refusal no longer keeps the official wheel open)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_build_wheel import small_wheel

from patcher import patchset as patchsets
from patcher.cache import sha256_of
from patcher.errors import PatcherError
from patcher.outputs.wheel import PROVENANCE, WheelPlan, build_wheel
from patcher.result import PatchResult
from patcher.sources.wheel import WheelSource


def held_open(path: Path) -> int:
    """How many of this process's file descriptors are ``path``."""
    found = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            found += os.readlink(fd) == str(path.resolve())
        except OSError:  # the descriptor listing the folder itself is gone by now
            continue
    return found


def test_a_wheel_source_closes_its_zip(tmp_path):
    wheel = small_wheel(tmp_path)
    with WheelSource(wheel) as source:
        assert source.read("vllm/__init__.py") == b""
        assert held_open(wheel) == 1
    assert held_open(wheel) == 0


def test_a_refused_repack_leaves_the_official_wheel_closed(tmp_path):
    wheel = small_wheel(tmp_path, {f"vllm-0.16.0.dist-info/{PROVENANCE}": "{}"})
    result = PatchResult("0.16.0", patchsets.load(), {})
    plan = WheelPlan.labelled(wheel, sha256_of(wheel), result, "kimi.eagle3")
    with pytest.raises(PatcherError, match="already patched") as refused:
        build_wheel(plan, tmp_path / "dist")
    assert refused.value.__traceback__ is not None  # the failed frames are still alive
    assert held_open(wheel) == 0
