"""On drift, ``apply`` writes nothing and exits 1, unless ``--allow-drift`` (issue 22, defect 10).

The patchset is the default one declaring 0.16.0 ``upstream``, so the real 0.16.0 modules (from
the index, cached), which need the patch, drift. Run through the installed console script.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from commandline import PATCHER
from conftest import copy_tree
from test_apply_installed import state, synthetic
from test_cli import DECLARED_UPSTREAM_SINCE_0_16, write_patchset

pytestmark = pytest.mark.network

REFUSED = "; nothing written (--allow-drift writes it anyway)\n"
DRIFT = (
    "vllm 0.16.0 came out needs-patch (eagle3-whitelist applied, mm-image-token applied, "
    "eagle3-interface applied), but kimi-k2.5-eagle3 declares upstream for it"
)


def patcher(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PATCHER, *args], capture_output=True, text=True, timeout=600)


def tree_state(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_source_drift_writes_nothing_unless_allowed(tree_0_16, tmp_path):
    patchset = str(write_patchset(tmp_path / "drift.toml", *DECLARED_UPSTREAM_SINCE_0_16))
    tree = copy_tree(tree_0_16, tmp_path / "tree")
    before = tree_state(tree)
    done = patcher("apply", "-q", "--source", str(tree), "--patchset", patchset)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"patcher: error: {DRIFT}{REFUSED}"
    assert "patched" not in done.stdout
    assert tree_state(tree) == before

    done = patcher("apply", "-q", "--source", str(tree), "--patchset", patchset, "--allow-drift")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == f"patcher: drift allowed: {DRIFT}\n"
    assert "patched 4 file(s)" in done.stdout
    assert tree_state(tree) != before


def test_installed_drift_writes_nothing_unless_allowed(tmp_path, release):
    patchset = str(write_patchset(tmp_path / "drift.toml", *DECLARED_UPSTREAM_SINCE_0_16))
    python = str(synthetic(tmp_path, release, "0.16.0"))
    before = state(tmp_path / "site")
    done = patcher("apply", "-q", "--installed", "--python", python, "--patchset", patchset)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"patcher: error: {DRIFT}{REFUSED}"
    assert "patched" not in done.stdout
    assert state(tmp_path / "site") == before

    allowed = patcher(
        "apply", "-q", "--installed", "--python", python, "--patchset", patchset, "--allow-drift"
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert allowed.stderr == f"patcher: drift allowed: {DRIFT}\n"
    assert "patched 4 file(s) of vllm 0.16.0" in allowed.stdout
    assert state(tmp_path / "site") != before


def test_diff_drift_prints_nothing_unless_allowed(tree_0_16, tmp_path):
    """issue 41: ``diff`` printed the patch with exit 0 through drift, and ``-q`` hid the note."""
    patchset = str(write_patchset(tmp_path / "drift.toml", *DECLARED_UPSTREAM_SINCE_0_16))
    done = patcher("diff", "-q", "--source", str(tree_0_16), "--patchset", patchset)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"patcher: error: {DRIFT}{REFUSED}"
    assert done.stdout == ""

    allowed = patcher(
        "diff", "-q", "--source", str(tree_0_16), "--patchset", patchset, "--allow-drift"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr == f"patcher: drift allowed: {DRIFT}\n"
    assert allowed.stdout.startswith("--- ")


@pytest.mark.parametrize(
    "command", [["build-wheel"], ["bundle", "--target-python", "3.12", "--out", "bundle"]]
)
def test_wheel_outputs_refuse_drift_before_the_download(tmp_path, command):
    """issue 41: ``build-wheel`` built the wheel with exit 0 through drift, ``-q`` hiding even
    the table's "(drift: expected upstream)". The range reads decide it: nothing downloaded,
    nothing written, exit 1 and one line, ``-q`` or not."""
    patchset = str(write_patchset(tmp_path / "drift.toml", *DECLARED_UPSTREAM_SINCE_0_16))
    dist = tmp_path / "dist"
    args = [*command, "--vllm", "0.16.0", "--patchset", patchset]
    if command == ["build-wheel"]:
        args += ["--dist", str(dist)]
    done = subprocess.run(
        [PATCHER, "-q", *args], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"patcher: error: {DRIFT}{REFUSED}"
    assert done.stdout == ""
    assert not dist.exists() and not (tmp_path / "bundle").exists()
