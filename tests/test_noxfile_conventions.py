"""The noxfile follows nox's own conventions (issue 16, item 6): it declares the nox it needs,
marks the sessions a bare ``nox`` skips with ``default=False`` instead of listing the others in
``nox.options.sessions``, and installs the test tools from pyproject's ``[dependency-groups]``
rather than a ``test`` extra users would see."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


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
