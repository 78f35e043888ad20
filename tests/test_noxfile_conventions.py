"""The noxfile follows nox's own conventions (issue 16, item 6): it declares the nox it needs,
marks the sessions a bare ``nox`` skips with ``default=False`` instead of listing the others in
``nox.options.sessions``, and installs the test tools from pyproject's ``[dependency-groups]``
rather than a ``test`` extra users would see. Its release lists are not its own: each patchset's
``[sessions]`` table declares the sessions that prove it, and the noxfile makes them."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import patchset as patchsets
from patcher.codemods.base import Verdict

ROOT = Path(__file__).parent.parent
NOXFILE = ROOT / "noxfile.py"


def assigned_names(tree: ast.Module) -> set[str]:
    return {
        ast.unparse(target)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
    }


def test_the_noxfile_declares_its_nox_and_marks_defaults_on_the_sessions():
    names = assigned_names(ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8")))
    assert "nox.needs_version" in names
    assert "nox.options.sessions" not in names


def test_test_tools_are_a_dependency_group_not_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "test" not in project["project"].get("optional-dependencies", {})
    assert any(tool.startswith("pytest>=") for tool in project["dependency-groups"]["test"])


def test_the_noxfile_lists_its_sessions_without_patcher():
    """``nox -l`` on a fresh clone: the noxfile imports nothing of patcher to make its sessions."""
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
        )
    }
    assert not {name for name in imported if name.split(".")[0] == "patcher"}


def sessions_made_from_the_data() -> set[str]:
    """The ``[sessions]`` keys the noxfile reads (the string argument of each call that does)."""
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"declared", "one_patchset_a_release"}
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def test_the_sessions_patcher_accepts_are_the_ones_the_noxfile_makes():
    accepted = {f.metadata["key"] for f in dataclasses.fields(patchsets.NoxSessions)}
    assert accepted == sessions_made_from_the_data()


UPSTREAM_REFERENCE = {"verify", "gpu-bench"}
"""The sessions that also prove a release the patchset expects upstream: its official wheel."""


def test_each_declared_release_has_the_verdict_its_session_needs():
    """A session proves a patch: each release it runs is needs-patch by the patchset's own
    ``[[expect]]`` (or upstream, as the reference, where the session takes one)."""
    found = 0
    for name in patchsets.available():
        patchset = patchsets.load(name)  # patcher's reading: a wrong [sessions] is refused here
        data = tomllib.loads((ROOT / "patchsets" / f"{name}.toml").read_text(encoding="utf-8"))
        for session, releases in data.get("sessions", {}).items():
            allowed = {Verdict.NEEDS_PATCH}
            if session in UPSTREAM_REFERENCE:
                allowed.add(Verdict.UPSTREAM)
            for release in releases:
                assert patchset.expected(Version(release)) in allowed, (name, session, release)
                found += 1
    assert found > 0


def nox_sessions(root: Path) -> subprocess.CompletedProcess[str]:
    """``nox -l`` on a copy of the noxfile and the patchsets: the sessions it would make."""
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-l"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    (root / "patchsets").mkdir(parents=True)
    shutil.copy(NOXFILE, root / "noxfile.py")
    for path in (ROOT / "patchsets").glob("*.toml"):
        shutil.copy(path, root / "patchsets" / path.name)
    return root


NEW_BACKBONE = """name = "new-eagle3"

[model]
types = ["new_moe"]

[[patches]]
codemod = "eagle3-whitelist"

[[expect]]
versions = ">=0.10.1"
verdict = "needs-patch"

[sessions]
verify-models = ["0.17.1", "0.33.0"]
serve-cpu = ["0.32.0"]
"""


def test_a_patchset_added_to_the_data_shows_up_as_its_sessions(tmp_path):
    root = copy_of_the_tree(tmp_path)
    before = nox_sessions(root)
    assert before.returncode == 0, before.stderr
    assert "new-eagle3" not in before.stdout
    (root / "patchsets" / "new-eagle3.toml").write_text(NEW_BACKBONE, encoding="utf-8")
    after = nox_sessions(root)
    assert after.returncode == 0, after.stderr
    for session in (
        "verify-models(vllm='0.17.1', patchset='new-eagle3')",
        "verify-models(vllm='0.33.0', patchset='new-eagle3')",
        "serve-cpu(vllm='0.32.0', patchset='new-eagle3')",
    ):
        assert f"- {session} ->" in after.stdout
    assert "serve-cpu(vllm='0.16.0', patchset='kimi-k2.5-eagle3')" in after.stdout  # CI's


@pytest.mark.parametrize(
    ("session", "release"),
    [
        ("verify", "0.16.0"),
        ("verify-mla", "0.34.0"),
        ("barrier-chain", "0.16.0"),
        ("gpu-bench", "0.33.0"),
    ],
)
def test_two_patchsets_declaring_one_release_of_a_session_named_by_release_fail_to_list(
    tmp_path, session, release
):
    """Those sessions are named by the release alone: a second patchset there would be lost."""
    root = copy_of_the_tree(tmp_path)
    twice = NEW_BACKBONE.replace("[sessions]\n", f'[sessions]\n{session} = ["{release}"]\n')
    (root / "patchsets" / "new-eagle3.toml").write_text(twice, encoding="utf-8")
    listed = nox_sessions(root)
    assert listed.returncode != 0
    assert f"and new-eagle3 both declare {session} {release} (" in listed.stderr
