"""The README's install block, pasted as it is into a fresh venv (issue 41): it installs the
``patcher`` command and builds patcher's wheel. A real venv, real pip and real bash, on a copy of
the checkout's tracked files (pip and build write into the tree they are run in)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def install_block() -> str:
    """The first ``bash`` block under the README's ``## Install`` heading."""
    section = ROOT.joinpath("README.md").read_text().split("\n## Install\n", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match, "the README's Install section has no bash block"
    return match.group(1)


def test_the_block_is_what_this_test_pastes():
    block = install_block()
    assert "pip install ." in block and "build --wheel" in block


def tracked_copy(into: Path) -> Path:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the checkout's git to list it")
def test_the_install_block_works_pasted_into_a_fresh_venv(tmp_path):
    checkout = tracked_copy(tmp_path / "checkout")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(env_dir),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", install_block()],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shown = subprocess.run(
        [str(bin_dir / "patcher"), "--version"], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0 and shown.stdout.startswith("patcher "), shown
    assert list((checkout / "dist").glob("vllm_patcher-*-py3-none-any.whl"))
