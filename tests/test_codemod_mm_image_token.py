"""mm-image-token on literal before/after snippets of the proposer's multimodal branch."""

from __future__ import annotations

import pytest
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


PIXTRAL = (
    '            elif self.get_model_name(target_model) == "PixtralForConditionalGeneration":\n'
)

KIMI_TAKES = {
    "its own branch": (
        'elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":'
    ),
    "a list with Qwen": (
        "elif self.get_model_name(target_model) in [\n"
        '                "Qwen2_5_VLForConditionalGeneration", "KimiK25ForConditionalGeneration",\n'
        "            ]:"
    ),
    "a tuple, negated twice": (
        "elif not self.get_model_name(target_model) not in (\n"
        '                "KimiK25ForConditionalGeneration",\n'
        "            ):"
    ),
}
"""Branches that Kimi takes, each placed ahead of Pixtral's in CHAIN."""

KIMI_READS = {
    "its own attribute": ("target_model.config.media_placeholder_token_id", Status.PRESENT),
    "its own attribute, wrapped": (
        "(\n                    target_model.config.media_placeholder_token_id\n                )",
        Status.PRESENT,
    ),
    "Qwen's attribute": ("target_model.config.image_token_id", Status.FAILED),
    "Pixtral's attribute": ("target_model.config.vision_config.image_token_id", Status.FAILED),
    "the fallback's attribute": ("target_model.config.image_token_index", Status.FAILED),
    "a prefix of its attribute": ("target_model.config.media_placeholder_token", Status.FAILED),
}
"""What the branch Kimi takes sets the drafter's image_token_index from, and the status."""


@pytest.mark.parametrize("reads", KIMI_READS, ids=str)
@pytest.mark.parametrize("takes", KIMI_TAKES, ids=str)
def test_an_architecture_mapped_to_another_attribute_is_failed_not_present(takes, reads):
    """issue 28: Kimi added to Qwen's list, which reads image_token_id (Kimi's config has
    media_placeholder_token_id), was reported ``present``; Kimi would then stop at an
    AttributeError in load_model. ``present`` only where the branch Kimi takes reads the
    patchset's attribute; else failed at that branch, with nothing written."""
    value, status = KIMI_READS[reads]
    branch = (
        f"            {KIMI_TAKES[takes]}\n"
        f"                self.model.config.image_token_index = {value}\n"
    )
    before = CHAIN.replace(PIXTRAL, branch + PIXTRAL)
    assert before != CHAIN
    outcome = assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, status)
    if status is Status.FAILED:
        assert "KimiK25ForConditionalGeneration takes the branch" in outcome.detail
        assert "not from config.media_placeholder_token_id" in outcome.detail
        assert f"{PATH}:" in outcome.detail


def test_a_kimi_branch_that_sets_something_else_is_failed():
    kimi = (
        '            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":\n'
        "                self.image_token = target_model.config.media_placeholder_token_id\n"
    )
    before = CHAIN.replace(PIXTRAL, kimi + PIXTRAL)
    outcome = assert_codemod(MmImageToken, {PATH: before}, UNCHANGED, Status.FAILED)
    assert "does not set self.model.config.image_token_index" in outcome.detail


MEDUSA = "vllm/v1/spec_decode/medusa.py"


def test_a_second_chain_in_another_proposer_is_ambiguous_and_nothing_is_written():
    """issue 28: a copy of the chain in medusa.py was patched with the first and reported
    ``applied``; which one runs is not in the code. Both are named; neither is patched."""
    second = CHAIN.replace("class EagleProposer", "class MedusaProposer")
    outcome = assert_codemod(
        MmImageToken, {PATH: CHAIN, MEDUSA: second}, UNCHANGED, Status.AMBIGUOUS
    )
    assert f"{MEDUSA}:5" in outcome.detail and f"{PATH}:5" in outcome.detail


def test_a_second_chain_in_the_same_file_is_ambiguous():
    twice = CHAIN + CHAIN.replace("class EagleProposer", "class DraftProposer")
    assert_codemod(MmImageToken, {PATH: twice}, UNCHANGED, Status.AMBIGUOUS)


OTHER_READS = {
    "attribute": "        self.index = target.config.image_token_index\n",
    "getattr": '        self.index = getattr(target.config, "image_token_index")\n',
}


@pytest.mark.parametrize("read", OTHER_READS, ids=str)
def test_a_read_outside_the_chain_in_another_file_it_reads_is_ambiguous(read):
    """Every file it reads used to count as decided: a second read of image_token_index in
    medusa.py, outside any chain, was not looked at, and the patch was ``applied``."""
    other = "class MedusaProposer:\n    def load(self, target):\n" + OTHER_READS[read]
    outcome = assert_codemod(
        MmImageToken, {PATH: CHAIN, MEDUSA: other}, UNCHANGED, Status.AMBIGUOUS
    )
    assert f"{MEDUSA}:3" in outcome.detail


MOVED = """
class EagleProposer:
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            self.model.config.image_token_index = image_token_of(target_model)
"""

HELPERS = {
    "attribute": (
        "def image_token_of(target_model):\n    return target_model.config.image_token_index\n"
    ),
    "getattr": (
        'def image_token_of(model):\n    return getattr(model.config, "image_token_index")\n'
    ),
    "a lookup": (
        'def image_token_of(model):\n    return {"P": 1}.get(model.name, "image_token_index")\n'
    ),
}

PACKAGES = [
    "vllm/v1/spec_decode/utils.py",
    "vllm/spec_decode/util.py",
    "vllm/v1/worker/gpu/spec_decode/helpers.py",
]


@pytest.mark.parametrize("helper", HELPERS, ids=str)
@pytest.mark.parametrize("where", PACKAGES)
def test_the_read_moved_into_a_helper_of_the_proposers_package_is_failed_not_not_needed(
    helper, where
):
    """issue 28: the read moved into vllm/v1/spec_decode/utils.py, a module with no proposer
    class, and mm-image-token said ``not-needed``, while Kimi still reads image_token_index."""
    outcome = assert_codemod(
        MmImageToken, {PATH: MOVED, where: HELPERS[helper]}, UNCHANGED, Status.FAILED
    )
    assert f"{where}:2: the proposer's read of image_token_index is here" in outcome.detail


def test_a_model_reading_image_token_index_outside_the_proposers_packages_is_no_barrier():
    """The control: a model's own read (Llava's) is not the proposer's barrier."""
    model = "class Llava:\n    def f(self):\n        return self.config.image_token_index\n"
    files = {
        PATH: MOVED.replace("image_token_of(target_model)", "7"),
        "vllm/model_executor/models/llava.py": model,
    }
    assert_codemod(MmImageToken, files, UNCHANGED, Status.NOT_NEEDED)


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


# A second hostile pass: Kimi in a module constant the first branch tests (the new elif would
# never be reached), and a mapping overwritten by a later store outside the chain.
CONSTANT_CHAIN = """
_IMAGE_TOKEN_ID_MODELS = ["Qwen2_5_VLForConditionalGeneration", "KimiK25ForConditionalGeneration"]


class EagleProposer:
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            if self.get_model_name(target_model) in _IMAGE_TOKEN_ID_MODELS:
                self.model.config.image_token_index = target_model.config.image_token_id
            else:
                self.model.config.image_token_index = target_model.config.image_token_index
"""
OVERWRITTEN = """
class EagleProposer:
    def load_model(self, target_model):
        if supports_multimodal(target_model):
            name = self.get_model_name(target_model)
            if name == "KimiK25ForConditionalGeneration":
                self.model.config.image_token_index = target_model.config.media_placeholder_token_id
            else:
                self.model.config.image_token_index = target_model.config.image_token_index
            if name.startswith("Kimi"):
                self.model.config.image_token_index = target_model.config.image_token_index
"""


def test_kimi_in_a_module_constant_of_an_earlier_branch_is_not_given_an_unreachable_branch():
    outcome = assert_codemod(MmImageToken, {PATH: CONSTANT_CHAIN}, UNCHANGED, Status.FAILED)
    assert "image_token_id" in outcome.detail, outcome.detail
    mapped = CONSTANT_CHAIN.replace(
        "target_model.config.image_token_id", "target_model.config.media_placeholder_token_id"
    )
    assert_codemod(MmImageToken, {PATH: mapped}, UNCHANGED, Status.PRESENT)
    changed = mapped + "\n_IMAGE_TOKEN_ID_MODELS.remove('KimiK25ForConditionalGeneration')\n"
    assert_codemod(MmImageToken, {PATH: changed}, UNCHANGED, Status.FAILED)


def test_a_store_after_the_chain_that_overwrites_its_value_is_ambiguous():
    outcome = assert_codemod(MmImageToken, {PATH: OVERWRITTEN}, UNCHANGED, Status.AMBIGUOUS)
    assert f"{PATH}:10" in outcome.detail, outcome.detail
