"""mm-image-token on before/after snippets of the proposer's multimodal branch."""
# ruff: noqa: E501 - the snippets are vLLM-shaped code, long lines included

from __future__ import annotations

import textwrap

from conftest import rerun, run

from patcher.codemods.base import Status
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

KIMI_BRANCH = """            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":
                self.model.config.image_token_index = (
                    target_model.config.media_placeholder_token_id
                )
"""


def test_branch_goes_ahead_of_the_fallback_else():
    outcome, after = run(MmImageToken, {PATH: CHAIN})
    assert outcome.status is Status.APPLIED
    expected = (
        textwrap.dedent(CHAIN)
        .lstrip("\n")
        .replace("            else:\n", KIMI_BRANCH + "            else:\n")
    )
    assert after[PATH] == expected


def test_if_else_chain_without_elif():
    source = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            if self.get_model_name(target_model) == "A":
                self.model.config.image_token_index = target_model.config.image_token_id
            else:
                self.model.config.image_token_index = target_model.config.image_token_index
    """
    outcome, after = run(MmImageToken, {"vllm/v1/spec_decode/llm_base_proposer.py": source})
    assert outcome.status is Status.APPLIED
    text = after["vllm/v1/spec_decode/llm_base_proposer.py"]
    assert text.index('== "KimiK25ForConditionalGeneration"') < text.index("else:")
    compile(text, "p.py", "exec")


def test_reapplying_is_a_no_op():
    _, first = run(MmImageToken, {PATH: CHAIN})
    outcome, second = rerun(MmImageToken, {PATH: CHAIN})
    assert outcome.status is Status.PRESENT
    assert first == second


def test_architecture_listed_in_a_tuple_is_present():
    source = CHAIN.replace(
        '"Qwen2_5_VLForConditionalGeneration",',
        '"Qwen2_5_VLForConditionalGeneration", "KimiK25ForConditionalGeneration",',
    )
    outcome, _ = run(MmImageToken, {PATH: source})
    assert outcome.status is Status.PRESENT


def test_no_fallback_is_not_needed():
    source = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            self.model.config.image_token_index = getattr(target_model.config, "x", None)
    """
    outcome, _ = run(MmImageToken, {PATH: source})
    assert outcome.status is Status.NOT_NEEDED


def test_unconditional_fallback_fails_with_the_candidate():
    source = """
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            self.model.config.image_token_index = (
                target_model.config.image_token_index)
    """
    outcome, after = run(MmImageToken, {PATH: source})
    assert outcome.status is Status.FAILED
    assert f"{PATH}:2 `if supports_multimodal(target_model):`" in outcome.detail
    assert after[PATH] == textwrap.dedent(source).lstrip("\n")


def test_patchset_without_an_image_token_attribute_fails():
    from patcher.codemods.base import Model

    outcome, _ = run(MmImageToken, {PATH: CHAIN}, model=Model(types=("kimi_k2",)))
    assert outcome.status is Status.FAILED
