"""Configs shaped like the published Kimi-K2.5 deployment's, written field by field (no file is
copied): what preflight is measured on (``nox -s bench``'s ``preflight`` part) and tested on
(tests/replica_helpers.py). config.json (INT4, a DeepSeek-V3 text model of model type kimi_k2
behind a MoonViT tower, its remote code named by ``auto_map``), preprocessor_config.json (its own
processor class, a nested ``media_proc_cfg``) and EAGLE-3 drafters of the two kinds published for
it. Sizes are the real model's: preflight shrinks them.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

KIMI_K25 = "KimiK25ForConditionalGeneration"


KIMI_PROCESSOR_MODULE = "kimi_k25_vision_processing"
KIMI_PROCESSOR_CLASS = "KimiK25VisionProcessor"
KIMI_AUTO_MAP = {"AutoImageProcessor": f"{KIMI_PROCESSOR_MODULE}.{KIMI_PROCESSOR_CLASS}"}


def kimi_k25_published_config(layers: int = 61) -> dict:
    """config.json shaped like the published Kimi-K2.5's (INT4): a DeepSeek-V3 text model of
    model type kimi_k2 behind a MoonViT vision tower, with its remote code named by auto_map.
    Written field by field here, for the fields vLLM and patcher read."""
    quantization = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "group_size": 32, "symmetric": True},
            }
        },
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    }
    text = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "vocab_size": 163840,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": 0,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "n_shared_experts": 1,
        "n_routed_experts": 384,
        "routed_scaling_factor": 2.827,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "topk_method": "noaux_tc",
        "n_group": 1,
        "topk_group": 1,
        "num_experts_per_tok": 8,
        "moe_layer_freq": 1,
        "first_k_dense_replace": 1,
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "aux_loss_alpha": 0.001,
        "seq_aux": True,
        "hidden_act": "silu",
        "max_position_embeddings": 262144,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "use_cache": True,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 64.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 163584,
        "eos_token_id": 163585,
        "pad_token_id": 163839,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": quantization,
    }
    vision = {
        "patch_size": 14,
        "init_pos_emb_height": 64,
        "init_pos_emb_width": 64,
        "init_pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "merge_kernel_size": [2, 2],
        "video_attn_type": "spatial_temporal",
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": 1152,
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
        "text_hidden_size": 7168,
    }
    return {
        "architectures": [KIMI_K25],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "text_config": text,
        "vision_config": vision,
        "ignore_index": -100,
        "media_placeholder_token_id": 163605,
        "pad_token_id": 163839,
        "bos_token_id": 163584,
        "eos_token_id": 163585,
        "use_unified_vision_chunk": True,
        "video_placeholder": "<|kimi_k25_video_placeholder|>",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.56.2",
    }


def kimi_k25_published_preprocessor(auto_map: dict | None = None) -> dict:
    """preprocessor_config.json shaped like the published Kimi-K2.5's: its own processor class
    (no transformers class of that name), a nested media_proc_cfg, its auto_map if given."""
    content: dict = {
        "image_processor_type": KIMI_PROCESSOR_CLASS,
        "media_proc_cfg": {
            "in_patch_limit": 16384,
            "patch_size": 14,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "merge_kernel_size": 2,
            "fixed_output_tokens": None,
            "patch_limit_on_one_side": 512,
            "in_patch_limit_each_frame": 4096,
            "in_patch_limit_video": None,
            "sample_fps": 2.0,
            "max_num_frames_each_video": None,
            "temporal_merge_kernel_size": 4,
            "timestamp_mode": "hh:mm:ss.fff",
            "config_type": "image_and_video",
        },
    }
    if auto_map is not None:
        content["auto_map"] = auto_map
    return content


def kimi_k25_remote_code() -> dict[str, str]:
    """A deployment's remote image processor as files: KimiK25VisionProcessor in
    kimi_k25_vision_processing.py, importing a helper module beside it, as remote code does.
    The class is patcher's replica processor under the deployment's names (random-weight
    replicas need only the shapes right); not Moonshot's code."""

    code = resources.files("patcher.replica") / "remote_code" / "kimi_k25_media_processor.py"
    source = code.read_text().replace("ReplicaMediaProcessor", KIMI_PROCESSOR_CLASS)
    source = source.replace(
        "from transformers.image_processing_utils import BaseImageProcessor\n",
        "from transformers.image_processing_utils import BaseImageProcessor\n\n"
        "from .media_utils import REMOTE_CODE_MARK  # noqa: F401\n",
    )
    return {
        f"{KIMI_PROCESSOR_MODULE}.py": source,
        "media_utils.py": 'REMOTE_CODE_MARK = "the deployment\'s own remote code"\n',
    }


def kimi_k25_published_dir(
    folder: Path,
    *,
    auto_map: dict | None = KIMI_AUTO_MAP,
    remote_code: bool = False,
    layers: int = 61,
) -> Path:
    """A Kimi-K2.5 deployment's folder as published, without weights or tokenizer:
    config.json and preprocessor_config.json (with ``auto_map``), and with ``remote_code`` the
    processor's code that auto_map names."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(kimi_k25_published_config(layers), indent=2))
    preprocessor = kimi_k25_published_preprocessor(auto_map)
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    if remote_code:
        for name, text in kimi_k25_remote_code().items():
            (folder / name).write_text(text)
    return folder


def llama_drafter_config(aux_layers: list[int] | None = None) -> dict[str, Any]:
    """A Llama-style EAGLE-3 drafter for Kimi-K2.5 (the kind vLLM serves before its MLA drafter,
    0.18.0), with the target layers it reads at the top level (``aux_layers``)."""
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-5,
        "rope_theta": 50000.0,
        "max_position_embeddings": 262144,
        "vocab_size": 163840,
        "draft_vocab_size": 163840,
    }
    if aux_layers is not None:
        config["eagle_aux_hidden_state_layer_ids"] = aux_layers
    return config


def mla_drafter_config(aux_layers: list[int] | None = None) -> dict[str, Any]:
    """An MLA EAGLE-3 drafter for Kimi-K2.5 as vLLM's recipe names it (Eagle3DeepseekV3ForCausalLM
    of model type kimi_k2, 0.18.0 on), its ids in ``eagle_config`` (``aux_layers``)."""
    config: dict[str, Any] = {
        "architectures": ["Eagle3DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "num_hidden_layers": 1,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "vocab_size": 163840,
        "draft_vocab_size": 163840,
    }
    if aux_layers is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": aux_layers}
    return config


def drafter_dir(folder: Path, config: dict[str, Any]) -> Path:
    """A drafter's folder: its config only."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder
