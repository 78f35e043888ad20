"""eagle3-whitelist on before/after snippets, one per shape the check has had."""

from __future__ import annotations

import textwrap

from conftest import rerun, run

from patcher.codemods.base import Status
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist

PATH = "vllm/config/speculative.py"


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


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


def test_list_shape_gains_the_model_types_in_its_own_layout():
    outcome, after = run(Eagle3Whitelist, {PATH: LIST_SHAPE})
    assert outcome.status is Status.APPLIED
    assert after[PATH] == dedent(LIST_SHAPE).replace(
        '"qwen",  # keep this comment\n',
        '"qwen",  # keep this comment\n            "kimi_k2",\n            "deepseek_v3",\n',
    )


def test_a_patchsets_files_option_replaces_the_candidate_files():
    moved = "vllm/engine/speculative_config.py"
    outcome, after = run(Eagle3Whitelist, {moved: LIST_SHAPE})
    assert outcome.status is Status.NOT_NEEDED and after[moved] == dedent(LIST_SHAPE)
    outcome, after = run(Eagle3Whitelist, {moved: LIST_SHAPE}, {"files": ("vllm/engine/*.py",)})
    assert outcome.status is Status.APPLIED
    assert after[moved] == dedent(LIST_SHAPE).replace(
        '"qwen",  # keep this comment\n',
        '"qwen",  # keep this comment\n            "kimi_k2",\n            "deepseek_v3",\n',
    )


def test_renamed_list_in_a_method_tuple_is_found_by_what_the_check_does():
    source = """
    class SpeculativeConfig:
        def verify(self):
            aux_hidden_states_supported = ["llama", "qwen"]
            if self.method in ("eagle3", "extract_hidden_states") and not any(
                m in self.target_model_config.hf_text_config.model_type
                for m in aux_hidden_states_supported
            ):
                raise ValueError("nope")
    """
    outcome, after = run(Eagle3Whitelist, {PATH: source})
    assert outcome.status is Status.APPLIED
    assert (
        'aux_hidden_states_supported = ["llama", "qwen", "kimi_k2", "deepseek_v3"]' in after[PATH]
    )


def test_inline_literal_is_extended():
    source = """
    def check(self):
        if self.method == "eagle3" and not any(
            s in self.target.model_type for s in ("llama",)
        ):
            raise ValueError("nope")
    """
    outcome, after = run(Eagle3Whitelist, {"vllm/config.py": source})
    assert outcome.status is Status.APPLIED
    assert 'for s in ("llama", "kimi_k2", "deepseek_v3",)' in after["vllm/config.py"]


def test_oldest_single_string_shape_becomes_a_list():
    source = """
    def check(self):
        if self.method == "eagle3" and self.target_model_config and \\
            "llama" not in self.target_model_config.hf_text_config.model_type:
            raise ValueError("Eagle3 is only supported for Llama models.")
    """
    outcome, after = run(Eagle3Whitelist, {"vllm/config.py": source})
    assert outcome.status is Status.APPLIED
    assert (
        "not any(supported in self.target_model_config.hf_text_config.model_type "
        'for supported in ("llama", "kimi_k2", "deepseek_v3"))'
    ) in after["vllm/config.py"]
    compile(after["vllm/config.py"], "config.py", "exec")


def test_reapplying_is_a_no_op_byte_for_byte():
    _, first = run(Eagle3Whitelist, {PATH: LIST_SHAPE})
    outcome, second = rerun(Eagle3Whitelist, {PATH: LIST_SHAPE})
    assert outcome.status is Status.PRESENT
    assert second == first


def test_substring_semantics_decide_present():
    source = LIST_SHAPE.replace('"qwen",', '"qwen", "kimi", "deepseek",')
    outcome, after = run(Eagle3Whitelist, {PATH: source})
    assert outcome.status is Status.PRESENT
    assert after[PATH] == dedent(source)


def test_no_check_is_not_needed():
    outcome, _ = run(Eagle3Whitelist, {PATH: "class SpeculativeConfig:\n    method = 'eagle3'\n"})
    assert outcome.status is Status.NOT_NEEDED


def test_unknown_shape_fails_naming_file_and_candidate():
    source = """
    def check(self):
        if self.method == "eagle3" and self.target.model_type not in SUPPORTED:
            raise ValueError("nope")
    """
    outcome, after = run(Eagle3Whitelist, {PATH: source})
    assert outcome.status is Status.FAILED
    assert PATH in outcome.detail and "nearest candidate" in outcome.detail
    assert ':2 `if self.method == "eagle3"' in outcome.detail
    assert after[PATH] == dedent(source)


def test_unrelated_raise_on_model_type_is_left_alone():
    source = """
    def check(self):
        if self.method == "ngram" and "llama" not in self.target.model_type:
            raise ValueError("nope")
    """
    outcome, after = run(Eagle3Whitelist, {PATH: source})
    assert outcome.status is Status.NOT_NEEDED
    assert after[PATH] == dedent(source)
