"""A deployment's model and drafter folders as a test writes them: configs only, shaped like the
real ones."""

from __future__ import annotations

import json
from pathlib import Path

from patcher.replica.published import (  # noqa: F401  (the tests' names for them)
    KIMI_AUTO_MAP,
    KIMI_PROCESSOR_CLASS,
    KIMI_PROCESSOR_MODULE,
    drafter_dir,
    kimi_k25_published_config,
    kimi_k25_published_dir,
    kimi_k25_published_preprocessor,
    kimi_k25_remote_code,
    llama_drafter_config,
)

KIMI = "KimiK25ForConditionalGeneration"


def kimi_k25_user_dir(folder: Path, tokenizer: bool = True) -> Path:
    """A deployment's folder shaped like Kimi-K2.5 INT4's: big config, quantized, no weights.

    ``tokenizer``: stand-in tiktoken files (not loadable), to see that they are copied.
    """
    folder.mkdir()
    quantization = {"quant_method": "compressed-tensors", "format": "pack-quantized"}
    text = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "n_routed_experts": 384,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 163840,
        "rms_norm_eps": 1e-5,
        "rope_theta": 50000.0,
        "max_position_embeddings": 262144,
        "quantization_config": quantization,
    }
    vision = {"hidden_size": 1152, "num_hidden_layers": 27, "patch_size": 14}
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": [KIMI],
                "model_type": "kimi_k25",
                "text_config": text,
                "vision_config": vision,
                "media_placeholder_token_id": 163605,
            }
        )
    )
    if tokenizer:
        (folder / "tiktoken.model").write_bytes(b"tokens")
        (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "TikTokenTokenizer"}')
    (folder / "model-00001-of-00064.safetensors").write_bytes(b"weights")
    return folder


def kimi_k25_mla_drafter_dir(
    folder: Path, draft_vocab_size: int, aux_layers: list[int] | None = None
) -> Path:
    """An EAGLE-3 drafter's folder shaped like an MLA drafter for Kimi-K2.5: its config only.

    ``aux_layers``: the target layers it reads, written as its ``eagle_config`` if given.
    """
    folder.mkdir()
    drafter = {
        "architectures": ["Eagle3DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "num_hidden_layers": 1,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "vocab_size": 163840,
        "draft_vocab_size": draft_vocab_size,
    }
    if aux_layers is not None:
        drafter["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": aux_layers}
    (folder / "config.json").write_text(json.dumps(drafter))
    return folder


def kimi_k25_llama_drafter_dir(folder: Path, draft_vocab_size: int = 163840) -> Path:
    """An EAGLE-3 drafter's folder shaped like the Llama-style ones published for Kimi-K2.5
    (the kind vLLM serves before its MLA drafter, 0.18.0): its config only."""
    folder.mkdir()
    drafter = {
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
        "draft_vocab_size": draft_vocab_size,
    }
    (folder / "config.json").write_text(json.dumps(drafter))
    return folder


def kimi_k25_published_drafter_dir(
    folder: Path, aux_layers: list[int] | None = None, **extra: object
) -> Path:
    """A Llama-style EAGLE-3 drafter for Kimi-K2.5 as such drafters are published, with the
    target layers it reads at the top level (``aux_layers``) and ``extra`` keys."""
    return drafter_dir(folder, {**llama_drafter_config(aux_layers), **extra})
