"""Codemods by name, for patchsets: the one table of them, each module loaded on first lookup.

A codemod is declared once. Its name is its key here, and the value says where its class is
(``module:Class`` under ``patcher.codemods``); the class itself declares the rest, as a libcst
command does: ``DESCRIPTION``, and its options as the generic parameter
(``Codemod[InterfaceOptions]``), which ``Codemod.options_type`` reads back. libcst takes about a
second to import, so nothing loads a codemod's module before a patchset names it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patcher.codemods.base import Codemod

WHERE: dict[str, str] = {
    "eagle3-whitelist": "eagle3_whitelist:Eagle3Whitelist",
    "mm-image-token": "mm_image_token:MmImageToken",
    "eagle-target-backbone": "eagle_target_backbone:EagleTargetBackbone",
    "eagle3-interface": "eagle3_interface:Eagle3Interface",
    "eagle-mla-detect": "eagle_mla_detect:EagleMlaDetect",
    "eagle3-backbone": "eagle3_backbone:Eagle3Backbone",
    "cpu-spec-decode": "cpu_spec_decode:CpuSpecDecode",
    "cpu-model-device": "cpu_model_device:CpuModelDevice",
    "eagle3-v2-nested-ids": "eagle3_v2_nested_ids:Eagle3V2NestedIds",
}
"""Each codemod's name, and where its class is."""

NAMES: dict[str, str] = {where: name for name, where in WHERE.items()}


def name_of(cls: type) -> str:
    """The name ``WHERE`` gives the codemod class ``cls``."""
    return NAMES[f"{cls.__module__.removeprefix('patcher.codemods.')}:{cls.__qualname__}"]


class Registry(Mapping[str, "type[Codemod[Any]]"]):
    """Codemod classes by name, each module imported on first lookup."""

    def __getitem__(self, name: str) -> type[Codemod[Any]]:
        module, _, attribute = WHERE[name].partition(":")
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
