"""eagle-mla-detect on literal before/after snippets of is_deepseek_mla."""

from __future__ import annotations

from codemod_helpers import UNCHANGED, assert_codemod

from patcher.codemods.base import Status
from patcher.codemods.eagle_mla_detect import EagleMlaDetect

PATH = "vllm/transformers_utils/model_arch_config_convertor.py"

CONVERTOR = """
class ModelArchConfigConvertorBase:
    def is_deepseek_mla(self) -> bool:
        if not hasattr(self.hf_text_config, "model_type"):
            return False
        elif self.hf_text_config.model_type in ("deepseek_v3", "kimi_k2"):
            return self.hf_text_config.kv_lora_rank is not None
        elif self.hf_text_config.model_type == "eagle":
            # if the model is an EAGLE module, check for the underlying architecture
            return (
                self.hf_text_config.model.model_type
                in (
                    "deepseek_v2",
                    "deepseek_v3",
                )
                and self.hf_text_config.kv_lora_rank is not None
            )
        return False
"""

CONVERTOR_PATCHED = """
class ModelArchConfigConvertorBase:
    def is_deepseek_mla(self) -> bool:
        if not hasattr(self.hf_text_config, "model_type"):
            return False
        elif self.hf_text_config.model_type in ("deepseek_v3", "kimi_k2"):
            return self.hf_text_config.kv_lora_rank is not None
        elif self.hf_text_config.model_type == "eagle":
            # if the model is an EAGLE module, check for the underlying architecture
            return (
                self.hf_text_config.model.model_type
                in (
                    "deepseek_v2",
                    "deepseek_v3",
                    "kimi_k2",
                )
                and self.hf_text_config.kv_lora_rank is not None
            )
        return False
"""


def test_inner_model_types_gain_kimi_k2_and_the_target_branch_is_untouched():
    assert_codemod(EagleMlaDetect, {PATH: CONVERTOR}, {PATH: CONVERTOR_PATCHED}, Status.APPLIED)


def test_reapplying_is_a_no_op():
    assert_codemod(EagleMlaDetect, {PATH: CONVERTOR_PATCHED}, UNCHANGED, Status.PRESENT)


def test_delegating_method_without_an_eagle_branch_is_not_needed():
    before = """
    class ModelConfig:
        def is_deepseek_mla(self):
            return self.model_arch_config.is_deepseek_mla
    """
    path = "vllm/config/model.py"
    assert_codemod(EagleMlaDetect, {path: before}, UNCHANGED, Status.NOT_NEEDED)


def test_eagle_branch_without_a_tuple_fails_with_the_candidate():
    before = """
    class ModelArchConfigConvertorBase:
        def is_deepseek_mla(self) -> bool:
            if not hasattr(self.hf_text_config, "model_type"):
                return False
            elif self.hf_text_config.model_type in ("deepseek_v3", "kimi_k2"):
                return self.hf_text_config.kv_lora_rank is not None
            elif self.hf_text_config.model_type == "eagle":
                # if the model is an EAGLE module, check for the underlying architecture
                return (
                    self.hf_text_config.model.model_type
                    in SUPPORTED_INNER_TYPES
                    and self.hf_text_config.kv_lora_rank is not None
                )
            return False
    """
    outcome = assert_codemod(EagleMlaDetect, {PATH: before}, UNCHANGED, Status.FAILED)
    assert f"{PATH}:7" in outcome.detail and "nearest candidate" in outcome.detail
