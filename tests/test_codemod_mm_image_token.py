"""mm-image-token on literal before/after snippets of the proposer's multimodal branch."""

from __future__ import annotations

from codemod_helpers import UNCHANGED, assert_codemod

from patcher.codemods.base import Model, Status
from patcher.codemods.mm_image_token import MmImageToken

PATH = "vllm/v1/spec_decode/eagle.py"

CHAIN = """
class EagleProposer:
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            # handle multimodality
            if self.get_model_name(target_model) in [
                "Qwen2_5_VLForConditionalGeneration",
            ]:
                self.model.config.image_token_index = target_model.config.image_token_id
            elif self.get_model_name(target_model) == "PixtralForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.vision_config.image_token_id
                )
            else:
                self.model.config.image_token_index = (
                    target_model.config.image_token_index
                )
            target_language_model = target_model.get_language_model()
"""

CHAIN_PATCHED = """
class EagleProposer:
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            # handle multimodality
            if self.get_model_name(target_model) in [
                "Qwen2_5_VLForConditionalGeneration",
            ]:
                self.model.config.image_token_index = target_model.config.image_token_id
            elif self.get_model_name(target_model) == "PixtralForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.vision_config.image_token_id
                )
            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.media_placeholder_token_id
                )
            else:
                self.model.config.image_token_index = (
                    target_model.config.image_token_index
                )
            target_language_model = target_model.get_language_model()
"""


def test_branch_goes_ahead_of_the_fallback_else():
    assert_codemod(MmImageToken, {PATH: CHAIN}, {PATH: CHAIN_PATCHED}, Status.APPLIED)


def test_if_else_chain_without_elif():
    before = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            if self.get_model_name(target_model) == "A":
                self.model.config.image_token_index = target_model.config.image_token_id
            else:
                self.model.config.image_token_index = target_model.config.image_token_index
    """
    after = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            if self.get_model_name(target_model) == "A":
                self.model.config.image_token_index = target_model.config.image_token_id
            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.media_placeholder_token_id
                )
            else:
                self.model.config.image_token_index = target_model.config.image_token_index
    """
    path = "vllm/v1/spec_decode/llm_base_proposer.py"
    assert_codemod(MmImageToken, {path: before}, {path: after}, Status.APPLIED)


def test_reapplying_is_a_no_op():
    assert_codemod(MmImageToken, {PATH: CHAIN_PATCHED}, UNCHANGED, Status.PRESENT)


def test_architecture_listed_in_a_tuple_is_present():
    before = """
    class EagleProposer:
        def load_model(self, target_model):
            if supports_multimodal(target_model):
                if self.get_model_name(target_model) in [
                    "Qwen2_5_VLForConditionalGeneration", "KimiK25ForConditionalGeneration",
                ]:
                    self.model.config.image_token_index = target_model.config.image_token_id
                else:
                    self.model.config.image_token_index = (
                        target_model.config.image_token_index
                    )
    """
    assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.PRESENT)


def test_no_fallback_is_not_needed():
    before = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            self.model.config.image_token_index = getattr(target_model.config, "x", None)
    """
    assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.NOT_NEEDED)


def test_unconditional_fallback_is_unsupported_with_the_candidate():
    before = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            self.model.config.image_token_index = (
                target_model.config.image_token_index)
    """
    outcome = assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.UNSUPPORTED)
    assert f"{PATH}:2 `if supports_multimodal(target_model):`" in outcome.detail


def test_patchset_without_an_image_token_attribute_fails():
    kimi_k2 = Model(types=("kimi_k2",))
    assert_codemod(MmImageToken, {PATH: CHAIN}, UNCHANGED, Status.FAILED, model=kimi_k2)
