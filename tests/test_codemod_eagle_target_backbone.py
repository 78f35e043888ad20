"""eagle-target-backbone on before/after snippets of EagleProposer.load_model."""

from __future__ import annotations

import textwrap

import pytest
from conftest import rerun, run

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

GUARD = 'getattr(target_language_model, "model", target_language_model)'


def after(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


def test_load_model_reads_the_backbone_with_a_fallback_and_nothing_else_changes():
    outcome, files = run(EagleTargetBackbone, {PATH: LOAD_MODEL_0_15})
    assert outcome.status is Status.APPLIED
    expected = (
        after(LOAD_MODEL_0_15)
        .replace("hasattr(target_language_model.model,", f"hasattr({GUARD},")
        .replace("= target_language_model.model.embed_tokens", f"= {GUARD}.embed_tokens")
    )
    assert files[PATH] == expected
    assert "        return target_language_model.model\n" in files[PATH]


def test_reapplying_is_a_no_op():
    _, first = run(EagleTargetBackbone, {PATH: LOAD_MODEL_0_15})
    outcome, second = rerun(EagleTargetBackbone, {PATH: LOAD_MODEL_0_15})
    assert outcome.status is Status.PRESENT
    assert first == second


@pytest.mark.parametrize(
    "source",
    [
        # vLLM 0.16.0 on: the inner model is read with getattr and a None default.
        """
        class EagleProposer:
            def load_model(self, target_model):
                self._maybe_share_embeddings(target_model.get_language_model())

            def _maybe_share_embeddings(self, target_language_model):
                inner_model = getattr(target_language_model, "model", None)
        """,
        "class EagleProposer:\n    pass\n",
    ],
)
def test_without_a_plain_read_in_load_model_it_is_not_needed(source):
    outcome, files = run(EagleTargetBackbone, {PATH: source})
    assert outcome.status is Status.NOT_NEEDED
    assert files[PATH] == textwrap.dedent(source).lstrip("\n")
