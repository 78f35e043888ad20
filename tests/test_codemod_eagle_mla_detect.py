"""eagle-mla-detect on before/after snippets of is_deepseek_mla."""

from __future__ import annotations

import textwrap

from conftest import rerun, run

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


def test_inner_model_types_gain_kimi_k2_and_the_target_branch_is_untouched():
    outcome, after = run(EagleMlaDetect, {PATH: CONVERTOR})
    assert outcome.status is Status.APPLIED
    expected = (
        textwrap.dedent(CONVERTOR)
        .lstrip("\n")
        .replace(
            '                    "deepseek_v3",\n                )',
            '                    "deepseek_v3",\n                    "kimi_k2",\n                )',
        )
    )
    assert after[PATH] == expected


def test_reapplying_is_a_no_op():
    _, first = run(EagleMlaDetect, {PATH: CONVERTOR})
    outcome, second = rerun(EagleMlaDetect, {PATH: CONVERTOR})
    assert outcome.status is Status.PRESENT
    assert first == second


def test_delegating_method_without_an_eagle_branch_is_not_needed():
    source = """
    class ModelConfig:
        def is_deepseek_mla(self):
            return self.model_arch_config.is_deepseek_mla
    """
    outcome, _ = run(EagleMlaDetect, {"vllm/config/model.py": source})
    assert outcome.status is Status.NOT_NEEDED


def test_eagle_branch_without_a_tuple_fails_with_the_candidate():
    source = CONVERTOR.replace(
        """in (
                    "deepseek_v2",
                    "deepseek_v3",
                )""",
        "in SUPPORTED_INNER_TYPES",
    )
    outcome, after = run(EagleMlaDetect, {PATH: source})
    assert outcome.status is Status.FAILED
    assert f"{PATH}:7" in outcome.detail and "nearest candidate" in outcome.detail
    assert after[PATH] == textwrap.dedent(source).lstrip("\n")
