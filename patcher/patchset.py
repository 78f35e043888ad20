"""Patchsets: which patches apply to which model, and what each vLLM release should come out as.

A patchset is a TOML file in ``patchsets/`` (shipped inside the package as ``patcher.patchsets``).
It is data: supporting another model whose image token sits under another attribute, or another
DeepSeek-derived text model, takes a new file, not new code.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from patcher.codemods import CODEMODS
from patcher.codemods.base import Codemod, Model
from patcher.codemods.options import OPTIONS
from patcher.errors import PatcherError
from patcher.verify.probe import CHECKS

DEFAULT_PATCHSET = "kimi-k2.5-eagle3"
VERDICTS = ("needs-patch", "upstream", "unsupported", "broken")


@dataclass(frozen=True)
class Requirement:
    """A class the tree must define for the patchset to mean anything there."""

    module: str
    class_name: str


@dataclass(frozen=True)
class Expectation:
    versions: SpecifierSet
    verdict: str


@dataclass(frozen=True)
class PatchSpec:
    codemod: str
    options: dict[str, Any]


@dataclass(frozen=True)
class Patchset:
    name: str
    description: str
    local_label: str
    model: Model
    requires: tuple[Requirement, ...]
    patches: tuple[PatchSpec, ...]
    expectations: tuple[Expectation, ...]
    verify: tuple[str, ...]  # the CPU checks that prove this patchset's wheel
    digest: str  # of the file's content, to key cached results

    @property
    def patch_names(self) -> list[str]:
        return [p.codemod for p in self.patches]

    def codemods(self) -> list[Codemod]:
        return [CODEMODS[p.codemod](self.model, p.options) for p in self.patches]

    def expected(self, version: Version) -> str | None:
        """The declared verdict for ``version``: the first range that contains it."""
        for expectation in self.expectations:
            if expectation.versions.contains(version, prereleases=True):
                return expectation.verdict
        return None


def builtin_dir() -> Traversable:
    """The shipped ``patcher.patchsets`` data, whatever the install kind.

    It is a namespace package, so ``files()`` may return a ``MultiplexedPath``: use it only
    through the ``Traversable`` protocol (``str()`` of one is its repr, not a path).
    """
    return resources.files("patcher.patchsets")


def available() -> list[str]:
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in builtin_dir().iterdir()
        if entry.name.endswith(".toml")
    )


def load(name_or_path: str | None = None) -> Patchset:
    """A patchset by built-in name or by file path; the default is ``kimi-k2.5-eagle3``."""
    name_or_path = name_or_path or DEFAULT_PATCHSET
    path = Path(name_or_path)
    if path.suffix != ".toml" or not path.exists():
        if name_or_path not in available():
            raise PatcherError(
                f"no patchset {name_or_path!r}; built-in ones: {', '.join(available())}"
            )
        builtin = builtin_dir() / f"{name_or_path}.toml"
        return parse(builtin.read_bytes(), f"{name_or_path}.toml")
    return parse(path.read_bytes(), str(path))


def parse(content: bytes, where: str) -> Patchset:
    try:
        data = tomllib.loads(content.decode("utf-8"))
        model = data["model"]
        patches = tuple(
            PatchSpec(entry["codemod"], {k: v for k, v in entry.items() if k != "codemod"})
            for entry in data["patches"]
        )
        for patch in patches:
            if patch.codemod not in CODEMODS:
                raise ValueError(
                    f"unknown codemod {patch.codemod!r} (known: {', '.join(CODEMODS)})"
                )
        expectations = tuple(
            Expectation(SpecifierSet(e["versions"]), e["verdict"]) for e in data.get("expect", [])
        )
        for expectation in expectations:
            if expectation.verdict not in VERDICTS:
                raise ValueError(f"unknown verdict {expectation.verdict!r}")
        model_data = Model(
            types=tuple(model["types"]),
            architecture=model.get("architecture"),
            image_token_attribute=model.get("image_token_attribute"),
        )
        for patch in patches:  # a codemod with typed options rejects bad ones here
            if patch.codemod in OPTIONS:
                OPTIONS[patch.codemod].parse(patch.options)
        unknown = set(data.get("verify", ())) - set(CHECKS)
        if unknown:
            raise ValueError(
                f"unknown verify checks {sorted(unknown)} (known: {', '.join(CHECKS)})"
            )
        return Patchset(
            name=data["name"],
            description=data.get("description", ""),
            local_label=data.get("local_label", data["name"].replace("-", ".")),
            model=model_data,
            requires=tuple(Requirement(r["module"], r["class"]) for r in data.get("requires", [])),
            patches=patches,
            expectations=expectations,
            verify=tuple(data.get("verify", ())),
            digest=hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest(),
        )
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise PatcherError(f"{where}: not a TOML patchset ({error})") from error
    except KeyError as error:
        raise PatcherError(f"{where}: missing field {error}") from error
    except (ValueError, InvalidSpecifier) as error:
        raise PatcherError(f"{where}: {error}") from error
