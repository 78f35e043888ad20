"""``apply --installed`` on an installation patched before compares what the patchset would
write with what is installed, not the patchset's name (issue 22, defect 5).

A synthetic 0.16.0 installation (the release's real modules, from the index by range) is patched
with the default patchset, then applied again with a patchset of the same name that accepts one
more model type: only the whitelist's module would differ. Through the installed console script.
"""

from __future__ import annotations

import subprocess

import pytest
from commandline import PATCHER
from test_apply_installed import state, synthetic
from test_cli import write_patchset

from patcher import __version__

pytestmark = pytest.mark.network


def apply(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PATCHER, "apply", "--installed", "--python", python, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_changed_patchset_of_the_same_name_is_named_not_called_already_patched(tmp_path, release):
    python = str(synthetic(tmp_path, release, "0.16.0"))
    first = apply(python)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "patched 4 file(s)" in first.stdout
    patched = state(tmp_path / "site")

    same = apply(python)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "is already patched with kimi-k2.5-eagle3" in same.stdout
    assert "nothing changed" in same.stdout

    changed = write_patchset(
        tmp_path / "changed.toml",
        ('types = ["kimi_k2", "deepseek_v3"]', 'types = ["kimi_k2", "deepseek_v3", "kimi_k3"]'),
    )
    done = apply(python, "--patchset", str(changed))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "already patched" not in done.stdout + done.stderr
    error = done.stderr.strip()
    assert error.startswith("patcher: error: vllm 0.16.0 (distribution vllm in "), error
    assert "\n" not in error
    assert error.endswith(
        f"is patched with kimi-k2.5-eagle3 (patcher {__version__}), but the patchset now writes "
        "otherwise: vllm/config/speculative.py differ; run patcher revert --installed first"
    ), error
    assert state(tmp_path / "site") == patched
