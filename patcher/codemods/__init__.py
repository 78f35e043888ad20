"""What changes vLLM: one libcst codemod per module, registered by name for patchsets.

The registry imports a codemod's module (and libcst, which takes seconds) only when the codemod
is looked up, so a matrix answered from the cache never pays for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from patcher.codemods.base import Codemod

WHERE = {
    "eagle3-whitelist": "eagle3_whitelist:Eagle3Whitelist",
    "mm-image-token": "mm_image_token:MmImageToken",
    "eagle3-interface": "eagle3_interface:Eagle3Interface",
    "eagle-mla-detect": "eagle_mla_detect:EagleMlaDetect",
    "eagle3-backbone": "eagle3_backbone:Eagle3Backbone",
}


class Registry(Mapping[str, type[Codemod]]):
    """Codemod classes by name, each imported on first lookup."""

    def __getitem__(self, name: str) -> type[Codemod]:
        module, _, attribute = WHERE[name].partition(":")
        codemod: type[Codemod] = getattr(
            importlib.import_module(f"patcher.codemods.{module}"), attribute
        )
        return codemod

    def __iter__(self) -> Iterator[str]:
        return iter(WHERE)

    def __len__(self) -> int:
        return len(WHERE)


CODEMODS = Registry()

__all__ = ["CODEMODS", "Codemod"]
