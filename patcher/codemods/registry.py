"""Codemods by name, for patchsets: derived from the modules, each loaded on first lookup.

A codemod is one module of ``patcher.codemods``, and nothing else declares it: its name is the
module's with dashes (``eagle3_whitelist.py`` is ``eagle3-whitelist``), and its class is the one
concrete ``Codemod`` the module defines, which declares the rest as a libcst command does:
``DESCRIPTION``, and its options as the generic parameter (``Codemod[InterfaceOptions]``), which
``Codemod.options_type`` reads back. The names come from the package's folder, not from imports:
libcst takes about a second to import, so nothing loads a codemod's module before a patchset
names it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patcher.codemods.base import Codemod

MACHINERY = frozenset({"base", "options", "registry"})
"""The modules of ``patcher.codemods`` that are no codemod; so is any whose name starts with
``_`` (the helpers codemods share)."""

HERE = os.path.dirname(__file__)


def module_of(name: str) -> str:
    """The module of the codemod named ``name``: its name with underscores."""
    return name.replace("-", "_")


def name_of_module(module: str) -> str:
    """The name of the codemod in ``patcher.codemods.MODULE``: its name with dashes."""
    return module.rpartition(".")[2].replace("_", "-")


def codemod_modules(folder: str = HERE) -> list[str]:
    """The codemod modules in ``folder``, found by their file names, in sorted order."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            module, dot, suffix = entry.name.partition(".")
            codemod = not module.startswith("_") and module not in MACHINERY
            if dot and suffix == "py" and codemod and entry.is_file():
                found.append(module)
    return sorted(found)


def codemod_class(module: Any) -> type[Codemod[Any]]:
    """The one concrete ``Codemod`` subclass ``module`` itself defines."""
    from patcher.codemods.base import Codemod

    defined = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Codemod)
        and value.__module__ == module.__name__
        and not inspect.isabstract(value)
    ]
    if len(defined) != 1:
        names = ", ".join(c.__qualname__ for c in defined) or "none"
        raise TypeError(f"{module.__name__} must define one codemod class, not: {names}")
    return defined[0]


class Registry(Mapping[str, "type[Codemod[Any]]"]):
    """Codemod classes by name, each module imported on first lookup."""

    def __init__(self) -> None:
        self.names = [name_of_module(module) for module in codemod_modules()]

    def __getitem__(self, name: str) -> type[Codemod[Any]]:
        if name not in self.names:
            raise KeyError(name)
        return codemod_class(importlib.import_module(f"patcher.codemods.{module_of(name)}"))

    def options_type(self, name: str) -> type[Any]:
        """The options dataclass of the codemod ``name``, read from its module's source where
        the class says it plainly (``(FileCodemod)`` or ``(Codemod[XOptions])`` with XOptions
        from ``patcher.codemods.options``): a patchset is checked without importing libcst,
        about 0.4 s of a warm matrix's 1.3. Any other shape imports the module."""
        if name not in self.names:
            raise KeyError(name)
        declared = declared_options(os.path.join(HERE, f"{module_of(name)}.py"))
        if declared is not None:
            from patcher.codemods import options

            found = getattr(options, declared, None)
            if isinstance(found, type):
                return found
        return self[name].options_type()

    def __contains__(self, name: object) -> bool:
        return name in self.names  # Mapping's would import the codemod

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@functools.cache
def declared_options(path: str) -> str | None:
    """The options class named where the module's one codemod class declares its base:
    ``FileOptions`` for ``(FileCodemod)``, ``X`` for ``(Codemod[X])``; None for any other
    shape, or for a module with more than one such class."""
    with open(path, encoding="utf-8") as file:
        module = ast.parse(file.read())
    found = []
    for node in module.body:
        if not isinstance(node, ast.ClassDef) or len(node.bases) != 1:
            continue
        (base,) = node.bases
        if isinstance(base, ast.Name) and base.id == "FileCodemod":
            found.append("FileOptions")
        elif (
            isinstance(base, ast.Subscript)
            and isinstance(base.value, ast.Name)
            and base.value.id == "Codemod"
            and isinstance(base.slice, ast.Name)
        ):
            found.append(base.slice.id)
    return found[0] if len(found) == 1 else None


CODEMODS = Registry()
