"""What changes vLLM: one libcst codemod per module, registered by name for patchsets."""

from typing import Any

from patcher.codemods.base import Codemod
from patcher.codemods.eagle3_interface import Eagle3Interface
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist
from patcher.codemods.eagle_mla_detect import EagleMlaDetect
from patcher.codemods.eagle_target_backbone import EagleTargetBackbone
from patcher.codemods.mm_image_token import MmImageToken

CODEMODS: dict[str, type[Codemod[Any]]] = {
    codemod.NAME: codemod
    for codemod in (
        Eagle3Whitelist,
        MmImageToken,
        EagleTargetBackbone,
        Eagle3Interface,
        EagleMlaDetect,
    )
}

__all__ = ["CODEMODS", "Codemod"]
