"""eagle3-whitelist on literal before/after snippets, one per shape the check has had."""
# ruff: noqa: E501 - an after snippet keeps the long line the codemod writes

from __future__ import annotations

from codemod_helpers import UNCHANGED, assert_codemod

from patcher.codemods.base import Status
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist

PATH = "vllm/config/speculative.py"

LIST_SHAPE = """
class SpeculativeConfig:
    def _verify_args(self):
        eagle3_target_supported = [
            "llama",
            "qwen",  # keep this comment
        ]
        if (
            self.method == "eagle3"
            and self.target_model_config
            and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in eagle3_target_supported
            )
        ):
            raise ValueError("Eagle3 is only supported for ...")
        return self
"""

LIST_SHAPE_PATCHED = """
class SpeculativeConfig:
    def _verify_args(self):
        eagle3_target_supported = [
            "llama",
            "qwen",  # keep this comment
            "kimi_k2",
            "deepseek_v3",
        ]
        if (
            self.method == "eagle3"
            and self.target_model_config
            and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in eagle3_target_supported
            )
        ):
            raise ValueError("Eagle3 is only supported for ...")
        return self
"""


def test_list_shape_gains_the_model_types_in_its_own_layout():
    assert_codemod(Eagle3Whitelist, {PATH: LIST_SHAPE}, {PATH: LIST_SHAPE_PATCHED}, Status.APPLIED)


def test_a_patchsets_files_option_replaces_the_candidate_files():
    """Not looked for there, the check is still found by its signature: failed, not absent."""
    moved = "vllm/engine/speculative_config.py"
    outcome = assert_codemod(Eagle3Whitelist, {moved: LIST_SHAPE}, UNCHANGED, Status.FAILED)
    assert outcome.detail.startswith(f"{moved}:")
    assert_codemod(
        Eagle3Whitelist,
        {moved: LIST_SHAPE},
        {moved: LIST_SHAPE_PATCHED},
        Status.APPLIED,
        options={"files": ("vllm/engine/*.py",)},
    )


def test_renamed_list_in_a_method_tuple_is_found_by_what_the_check_does():
    before = """
    class SpeculativeConfig:
        def verify(self):
            aux_hidden_states_supported = ["llama", "qwen"]
            if self.method in ("eagle3", "extract_hidden_states") and not any(
                m in self.target_model_config.hf_text_config.model_type
                for m in aux_hidden_states_supported
            ):
                raise ValueError("nope")
    """
    after = """
    class SpeculativeConfig:
        def verify(self):
            aux_hidden_states_supported = ["llama", "qwen", "kimi_k2", "deepseek_v3"]
            if self.method in ("eagle3", "extract_hidden_states") and not any(
                m in self.target_model_config.hf_text_config.model_type
                for m in aux_hidden_states_supported
            ):
                raise ValueError("nope")
    """
    assert_codemod(Eagle3Whitelist, {PATH: before}, {PATH: after}, Status.APPLIED)


def test_inline_literal_is_extended():
    before = """
    def check(self):
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama",)
        ):
            raise ValueError("nope")
    """
    after = """
    def check(self):
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama", "kimi_k2", "deepseek_v3",)
        ):
            raise ValueError("nope")
    """
    path = "vllm/config.py"
    assert_codemod(Eagle3Whitelist, {path: before}, {path: after}, Status.APPLIED)


def test_oldest_single_string_shape_becomes_a_list():
    before = """
    def check(self):
        if self.method == "eagle3" and self.target_model_config and \\
            "llama" not in self.target_model_config.hf_text_config.model_type:
            raise ValueError("Eagle3 is only supported for Llama models.")
    """
    after = """
    def check(self):
        if self.method == "eagle3" and self.target_model_config and \\
            not any(supported in self.target_model_config.hf_text_config.model_type for supported in ("llama", "kimi_k2", "deepseek_v3")):
            raise ValueError("Eagle3 is only supported for Llama models.")
    """
    path = "vllm/config.py"
    assert_codemod(Eagle3Whitelist, {path: before}, {path: after}, Status.APPLIED)


def test_of_two_gates_only_the_one_missing_the_types_is_extended():
    """A file with a gate that already accepts the types and one that does not."""
    before = """
    def check(self):
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama", "kimi_k2", "deepseek_v3")
        ):
            raise ValueError("nope")
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama",)
        ):
            raise ValueError("nope")
    """
    after = """
    def check(self):
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama", "kimi_k2", "deepseek_v3")
        ):
            raise ValueError("nope")
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama", "kimi_k2", "deepseek_v3",)
        ):
            raise ValueError("nope")
    """
    path = "vllm/config.py"
    assert_codemod(Eagle3Whitelist, {path: before}, {path: after}, Status.APPLIED)


def test_reapplying_is_a_no_op_byte_for_byte():
    assert_codemod(Eagle3Whitelist, {PATH: LIST_SHAPE_PATCHED}, UNCHANGED, Status.PRESENT)


def test_substring_semantics_decide_present():
    """``"kimi"`` is a substring of ``kimi_k2``, and the check tests substrings."""
    before = """
    class SpeculativeConfig:
        def _verify_args(self):
            eagle3_target_supported = ["llama", "kimi", "deepseek"]
            if self.method == "eagle3" and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in eagle3_target_supported
            ):
                raise ValueError("Eagle3 is only supported for ...")
    """
    assert_codemod(Eagle3Whitelist, {PATH: before}, UNCHANGED, Status.PRESENT)


def test_no_check_is_not_needed():
    before = """
    class SpeculativeConfig:
        method = "eagle3"
    """
    assert_codemod(Eagle3Whitelist, {PATH: before}, UNCHANGED, Status.NOT_NEEDED)


def test_unknown_shape_fails_naming_file_and_candidate():
    before = """
    def check(self):
        if self.method == "eagle3" and self.target.model_type not in SUPPORTED:
            raise ValueError("nope")
    """
    outcome = assert_codemod(Eagle3Whitelist, {PATH: before}, UNCHANGED, Status.FAILED)
    assert PATH in outcome.detail and "nearest candidate" in outcome.detail
    assert ':2 `if self.method == "eagle3"' in outcome.detail


def test_unrelated_raise_on_model_type_is_left_alone():
    before = """
    def check(self):
        if self.method == "ngram" and "llama" not in self.target.model_type:
            raise ValueError("nope")
    """
    assert_codemod(Eagle3Whitelist, {PATH: before}, UNCHANGED, Status.NOT_NEEDED)
