"""The codemods are written with libcst's tools and share code through ``_cst`` and
``_templates``: no node is found again by its ``id()``, and neither interface codemod reaches
into the other for its helpers."""

from __future__ import annotations

import ast
from pathlib import Path

import patcher.codemods

FOLDER = Path(patcher.codemods.__file__).parent


def tree_of(name: str) -> ast.Module:
    return ast.parse((FOLDER / f"{name}.py").read_text())


def test_no_codemod_finds_a_node_by_its_id():
    calls = {
        f"{path.name}:{node.lineno}"
        for path in sorted(FOLDER.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
    }
    assert calls == set()


def test_the_interface_codemods_import_nothing_of_each_other():
    pair = ("eagle3_interface", "eagle3_backbone")
    found = {
        f"{name} imports {node.module}"
        for name in pair
        for node in ast.walk(tree_of(name))
        if isinstance(node, ast.ImportFrom)
        and node.module in {f"patcher.codemods.{other}" for other in pair if other != name}
    }
    assert found == set()
