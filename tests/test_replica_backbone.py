"""A multimodal recipe's text backbone: what the acceptance proof trains where transformers has
no class for the whole architecture (Kimi-K2.5 is remote code; its DeepSeek-V3 text model is not).

Offline: the replica is generated from the recipe alone; the served proof is
``nox -s "acceptance(vllm='0.32.0', patchset='kimi-k2.5-eagle3-mla')"`` (docs/serving-cpu.md).
"""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import pytest

from patcher.acceptance.run import recipe_for, replica_to_train
from patcher.errors import PatcherError
from patcher.replica.build import generate, generate_backbone
from patcher.replica.spec import ReplicaSpec

KIMI = "KimiK25ForConditionalGeneration"
CPU_MLA = "vllm/v1/attention/backends/mla/cpu_mla.py"
RELEASE = frozenset({"vllm/model_executor/models/kimi_k25.py", CPU_MLA})


def config(files: dict[str, bytes]) -> dict:
    return json.loads(files["config.json"])


def test_kimis_backbone_is_its_text_config_under_the_class_and_type_transformers_has():
    whole = generate(KIMI, "llama", RELEASE)
    backbone = generate_backbone(KIMI, RELEASE)
    text = config(whole.target)["text_config"]
    target = config(backbone.target)
    assert target["architectures"] == ["DeepseekV3ForCausalLM"]
    assert target["model_type"] == "deepseek_v3" and text["model_type"] == "kimi_k2"
    same = {k: v for k, v in target.items() if k not in ("architectures", "model_type")}
    assert same == {k: v for k, v in text.items() if k not in ("architectures", "model_type")}
    assert (target["kv_lora_rank"], target["qk_rope_head_dim"]) == (512, 64)  # MLA kept
    assert backbone.architecture == "DeepseekV3ForCausalLM"
    assert "kimi_k2" in backbone.notes[0] and KIMI in backbone.notes[0]


def test_the_backbone_is_text_only_with_the_llama_drafter_and_its_serve_args():
    backbone = generate_backbone(KIMI, RELEASE)
    assert sorted(backbone.target) == ["config.json", "tokenizer.json", "tokenizer_config.json"]
    assert "--limit-mm-per-prompt" not in backbone.serve_args and not backbone.images
    assert backbone.serve_args == ("--attention-backend", "CPU_MLA")
    assert backbone.speculative == {"attention_backend": "CPU_MLA"}
    assert backbone.drafter_kind == "llama" and backbone.env == {"VLLM_MLA_DISABLE": "1"}
    drafter = config(backbone.drafter)
    assert drafter["architectures"] == ["LlamaForCausalLMEagle3"]
    assert drafter["hidden_size"] == config(backbone.target)["hidden_size"] == 128


def test_the_acceptance_proof_trains_the_backbone_where_the_recipe_names_one():
    replica = replica_to_train(KIMI, None, RELEASE)
    assert config(replica.target)["architectures"] == ["DeepseekV3ForCausalLM"]
    recipe = recipe_for(replica, 3, 60.0)
    assert recipe.aux_ids == (2, 4, 5)  # its 8 layers' default ids
    assert recipe.pretrain.lr == 1e-3  # the recipe's [acceptance.pretrain]: at 2e-3 it stalls
    glm = replica_to_train("Glm4MoeForCausalLM", None, RELEASE)
    assert glm.target == generate("Glm4MoeForCausalLM", None, RELEASE).target


def test_another_drafter_kind_for_the_backbone_is_one_line():
    with pytest.raises(PatcherError) as refusal:
        replica_to_train(KIMI, "mla", RELEASE)
    assert str(refusal.value) == (
        "--acceptance trains KimiK25ForConditionalGeneration's backbone DeepseekV3ForCausalLM "
        "with a llama drafter, not mla"
    )


def test_a_recipe_without_a_backbone_has_none_to_generate():
    with pytest.raises(PatcherError) as refusal:
        generate_backbone("Glm4MoeForCausalLM")
    assert str(refusal.value) == "the Glm4MoeForCausalLM recipe names no [backbone]"


def kimi_recipe() -> dict:
    path = resources.files("patcher.replica") / "architectures" / "kimi-k2.5.toml"
    return tomllib.loads(path.read_text())


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"backbone": {"architecture": "X", "drafter": "llama"}},
         "backbone.model_type is not a name"),
        ({"backbone": {"architecture": "X", "model_type": "x", "drafter": "medusa"}},
         "backbone.drafter 'medusa' has no [drafter.*]"),
        ({"text_config": ""}, "backbone needs text_config: the backbone is the text model"),
        ({"backbone": "DeepseekV3ForCausalLM"}, "backbone is not a table"),
    ],
)  # fmt: skip
def test_a_backbone_table_that_names_too_little_is_refused(change, problem):
    data = {**kimi_recipe(), **change}
    ReplicaSpec.parse(kimi_recipe(), "kimi-k2.5.toml")  # the recipe as it is parses
    with pytest.raises(PatcherError) as refusal:
        ReplicaSpec.parse(data, "kimi-k2.5.toml")
    assert str(refusal.value) == f"kimi-k2.5.toml: {problem}"
