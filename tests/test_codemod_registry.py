"""Each codemod is declared once, by its module (issue 29): its name is the module's, the rest
is on its class, and no table lists it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.codemods import registry
from patcher.codemods.base import Codemod, Model
from patcher.codemods.registry import CODEMODS, codemod_modules

NAMES = sorted(CODEMODS)
FOLDER = Path(registry.__file__).parent


@pytest.mark.parametrize("name", NAMES)
def test_a_codemod_s_name_and_options_are_declared_in_one_place_each(name: str) -> None:
    codemod = CODEMODS[name]
    assert not hasattr(codemod, "NAME") and not hasattr(codemod, "Options")
    options = codemod.options_type()
    assert dataclasses.is_dataclass(options)
    assert codemod.DESCRIPTION
    fields = {f.name: "vllm/x.py" for f in dataclasses.fields(options) if f.name != "files"}
    fields = {k: v if k.endswith("module") else "X" for k, v in fields.items()}
    instance = codemod(Model(types=("kimi_k2",)), options(**fields))
    assert instance.name == name


def concrete_codemods(module_name: str) -> list[str]:
    module = importlib.import_module(f"patcher.codemods.{module_name}")
    return [
        value.__qualname__
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Codemod)
        and value.__module__ == module.__name__
        and not inspect.isabstract(value)
    ]


def test_the_modules_the_registry_lists_are_the_ones_that_define_a_codemod() -> None:
    """Every module of the package imported: the file-name rule finds exactly the modules that
    define a codemod, one class each, and none of the shared helpers defines one."""
    every = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")
    defining = {m: found for m in every if (found := concrete_codemods(m))}
    assert sorted(defining) == codemod_modules()
    assert all(len(found) == 1 for found in defining.values()), defining


def test_a_new_codemod_is_one_file(tmp_path: Path) -> None:
    """A module dropped into the folder is a codemod by its file name alone; the helpers
    (``_name``), the machinery and what is not a module are not."""
    for name in ("new_gate.py", "_helper.py", "base.py", "registry.py", "notes.txt", "x.pyc"):
        (tmp_path / name).write_text("")
    (tmp_path / "folder.py").mkdir()
    assert codemod_modules(str(tmp_path)) == ["new_gate"]


def test_no_codemod_imports_another() -> None:
    """What two codemods share lives in a helper module (``_marks``, ``_signatures``)."""

    names = set(codemod_modules())

    def imported(module: str) -> list[str]:
        found = []
        for node in ast.walk(ast.parse((FOLDER / f"{module}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "patcher.codemods":
                found += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.append(node.module.removeprefix("patcher.codemods."))
            elif isinstance(node, ast.Import):
                found += [a.name.removeprefix("patcher.codemods.") for a in node.names]
        return sorted(name for name in found if name in names)

    imports = {module: imported(module) for module in names}
    assert {m: found for m, found in imports.items() if found} == {}


@pytest.mark.parametrize("name", NAMES)
def test_the_options_read_from_the_source_are_the_class_s_own(name: str) -> None:
    """The registry reads a codemod's options type from its source, so a patchset is checked
    without importing libcst; it must be the type the class declares."""
    assert registry.declared_options(str(FOLDER / f"{registry.module_of(name)}.py"))
    assert CODEMODS.options_type(name) is CODEMODS[name].options_type()


def test_a_shape_the_source_reading_does_not_know_falls_back_to_the_class(tmp_path: Path) -> None:
    two = tmp_path / "two.py"
    two.write_text("class A(FileCodemod): ...\nclass B(Codemod[X]): ...\n")
    inherited = tmp_path / "inherited.py"
    inherited.write_text("class C(Eagle3Whitelist): ...\n")
    assert registry.declared_options(str(two)) is None
    assert registry.declared_options(str(inherited)) is None


def test_every_patchset_loads_without_libcst() -> None:
    """A warm matrix needs no codemod run: loading the patchsets imported libcst (0.4 s of its
    1.3 s, measured with -X importtime at 8ecdc69)."""
    code = (
        "import sys\n"
        "from patcher import patchset\n"
        "for name in [*patchset.available(), *patchset.harnesses()]:\n"
        "    patchset.load(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('libcst')))\n"
    )
    # -I: not the checkout's own patcher/ from the current folder, which has no patchsets in it
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
