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


def test_a_read_bound_only_in_the_else_is_not_copied_into_a_new_branch():
    """``target_config`` is bound in the ``else`` alone: an ``elif`` reading it would raise
    UnboundLocalError for Kimi (issue 28). Failed, at the fallback, and nothing written."""
    before = CHAIN.replace(
        """            else:
                self.model.config.image_token_index = (
                    target_model.config.image_token_index
                )""",
        """            else:
                target_config = target_model.config
                self.model.config.image_token_index = target_config.image_token_index""",
    )
    outcome = assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.FAILED)
    assert "target_config is not bound ahead of the chain" in outcome.detail
    assert f"{PATH}:" in outcome.detail


def test_a_dict_lookup_falling_back_to_image_token_index_is_not_not_needed():
    before = """
    class EagleProposer:
        def load_model(self, target_model):
            if supports_multimodal(target_model):
                name = self.get_model_name(target_model)
                attribute = TOKEN_ATTRIBUTES.get(name, "image_token_index")
                self.model.config.image_token_index = getattr(target_model.config, attribute)
    """
    outcome = assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.FAILED)
    assert f"{PATH}:5:" in outcome.detail


def test_an_architecture_named_in_a_dead_branch_is_not_mapped():
    before = CHAIN.replace(
        '== "PixtralForConditionalGeneration":',
        '== "KimiK25ForConditionalGeneration" and False:',
    )
    after = before.replace(
        """            else:
                self.model.config.image_token_index = (""",
        """            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.media_placeholder_token_id
                )
            else:
                self.model.config.image_token_index = (""",
    )
    assert_codemod(MmImageToken, {PATH: before}, {PATH: after}, Status.APPLIED)
