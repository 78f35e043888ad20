"""The suite runs against patcher as installed from its wheel, not against this source tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from commandline import PATCHER

import patcher
from patcher import patchset as patchsets

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    os.environ.get("PATCHER_EXPECT_INSTALLED") != "1", reason="only under nox, which installs it"
)
def test_patcher_is_imported_from_the_installed_wheel_not_the_tree():
    assert Path(patcher.__file__).resolve().parent != REPO / "patcher"


def test_every_builtin_patchset_loads_from_the_installed_package():
    names = patchsets.available()
    assert {"kimi-k2.5-eagle3", "kimi-k2.5-eagle3-mla", "kimi-k2-eagle3"} <= set(names)
    for name in names:
        assert patchsets.load(name).name == name


def test_the_console_script_finds_the_default_patchset(tmp_path):
    """`patcher` run from an unrelated folder reports the built-in patchsets by name."""
    result = subprocess.run(
        [PATCHER, "diff", "--vllm", "0.16.0", "--patchset", "nope"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert (
        "built-in ones: deepseek-pp-eagle3, eagle3-aux-ids-v2, ernie4.5-moe-eagle3, gemma3-eagle3, "
        "gemma3-mm-eagle3, glm4-moe-eagle3, glm4-moe-lite-eagle3, glm4v-moe-eagle3, kimi-k2-eagle3"
        in result.stderr
    )
