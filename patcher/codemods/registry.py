"""Codemod classes by name, for patchsets: each codemod's module loads on first lookup.

A codemod's module (and libcst, which takes seconds to import) loads on first lookup; its
options type does not need it, so a patchset is read, and a cached matrix shown, without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from patcher.codemods.base import Codemod
from patcher.codemods.options import BackboneOptions, FileOptions, InterfaceOptions

WHERE: dict[str, tuple[str, type[Any]]] = {
    "eagle3-whitelist": ("eagle3_whitelist:Eagle3Whitelist", FileOptions),
    "mm-image-token": ("mm_image_token:MmImageToken", FileOptions),
    "eagle-target-backbone": ("eagle_target_backbone:EagleTargetBackbone", FileOptions),
    "eagle3-interface": ("eagle3_interface:Eagle3Interface", InterfaceOptions),
    "eagle-mla-detect": ("eagle_mla_detect:EagleMlaDetect", FileOptions),
    "eagle3-backbone": ("eagle3_backbone:Eagle3Backbone", BackboneOptions),
    "cpu-spec-decode": ("cpu_spec_decode:CpuSpecDecode", FileOptions),
    "cpu-model-device": ("cpu_model_device:CpuModelDevice", FileOptions),
}

OPTIONS: dict[str, type[Any]] = {name: options for name, (_, options) in WHERE.items()}
"""Each codemod's Options dataclass, without importing the codemod."""


class Registry(Mapping[str, type[Codemod[Any]]]):
    """Codemod classes by name, each module imported on first lookup."""

    def __getitem__(self, name: str) -> type[Codemod[Any]]:
        module, _, attribute = WHERE[name][0].partition(":")
        codemod: type[Codemod[Any]] = getattr(
            importlib.import_module(f"patcher.codemods.{module}"), attribute
        )
        return codemod

    def __contains__(self, name: object) -> bool:
        return name in WHERE  # Mapping's would import the codemod

    def __iter__(self) -> Iterator[str]:
        return iter(WHERE)

    def __len__(self) -> int:
        return len(WHERE)


CODEMODS = Registry()
