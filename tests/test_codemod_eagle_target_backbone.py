"""eagle-target-backbone on literal before/after snippets of EagleProposer.load_model."""
# ruff: noqa: E501 - an after snippet keeps the long lines the codemod writes

from __future__ import annotations

import pytest
from codemod_helpers import UNCHANGED, assert_codemod

from patcher.codemods.base import Status
from patcher.codemods.eagle_target_backbone import EagleTargetBackbone

PATH = "vllm/v1/spec_decode/eagle.py"

LOAD_MODEL_0_15 = """
class EagleProposer:
    def load_model(self, target_model):
        target_language_model = target_model.get_language_model()
        if get_pp_group().world_size == 1:
            if hasattr(target_language_model.model, "embed_tokens"):
                target_embed_tokens = target_language_model.model.embed_tokens
            self.model.model.embed_tokens = target_embed_tokens

    def other(self, target_language_model):
        return target_language_model.model
"""

LOAD_MODEL_0_15_PATCHED = """
class EagleProposer:
    def load_model(self, target_model):
        target_language_model = target_model.get_language_model()
        if get_pp_group().world_size == 1:
            if hasattr(getattr(target_language_model, "model", target_language_model), "embed_tokens"):
                target_embed_tokens = getattr(target_language_model, "model", target_language_model).embed_tokens
            self.model.model.embed_tokens = target_embed_tokens

    def other(self, target_language_model):
        return target_language_model.model
"""


def test_load_model_reads_the_backbone_with_a_fallback_and_nothing_else_changes():
    assert_codemod(
        EagleTargetBackbone,
        {PATH: LOAD_MODEL_0_15},
        {PATH: LOAD_MODEL_0_15_PATCHED},
        Status.APPLIED,
    )


def test_reapplying_is_a_no_op():
    assert_codemod(EagleTargetBackbone, {PATH: LOAD_MODEL_0_15_PATCHED}, UNCHANGED, Status.PRESENT)


@pytest.mark.parametrize(
    "before",
    [
        # vLLM 0.16.0 on: the inner model is read with getattr and a None default.
        """
        class EagleProposer:
            def load_model(self, target_model):
                self._maybe_share_embeddings(target_model.get_language_model())

            def _maybe_share_embeddings(self, target_language_model):
                inner_model = getattr(target_language_model, "model", None)
        """,
        """
        class EagleProposer:
            pass
        """,
    ],
)
def test_without_a_plain_read_in_load_model_it_is_not_needed(before):
    assert_codemod(EagleTargetBackbone, {PATH: before}, UNCHANGED, Status.NOT_NEEDED)
