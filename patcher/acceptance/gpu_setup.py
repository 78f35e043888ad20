"""What the GPU proof (``gpu_proof.py``) is handed, written on this machine before it goes:

- ``tiny/``: the CPU acceptance proof's trained target and drafter (weights and all, a few MB),
  and the prompts that proof serves;
- ``big/``: a target of at least 1B parameters in the same architecture and its Llama EAGLE-3
  drafter, as configs and a tokenizer only (the GPU pre-trains both: ``train_gpu.py``), with the
  recipe the GPU trainer reads.
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from patcher.acceptance.recipe import Data, DrafterTraining, Pretrain, Recipe, Serve
from patcher.errors import PatcherError
from patcher.replica.build import dump, generate, text_of
from patcher.replica.spec import for_architecture, resolve
from patcher.replica.write import read_manifest

BIG_SHAPE = {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1024,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}
"""GLM-4 MoE at 1.1B parameters (8 routed experts, top 2, and a shared one; the first layer
dense): the shape the hand-run on an H200 pre-trained to loss 1.08 in 100 steps."""

BIG_RECIPE = Recipe(
    aux_ids=(2, 8, 13),  # vLLM's default for 16 layers: (2, n // 2, n - 3)
    budget_seconds=240.0,
    pretrain=Pretrain(steps=150, batch=32, length=256, lr=6e-4),
    data=Data(continuations=1000, batch=100),
    drafter=DrafterTraining(steps=400),
    serve=Serve(prompts=4, max_tokens=128),
)


def parameters(config: dict[str, Any]) -> int:
    """The MoE decoder's weight count from its config (attention, dense and expert MLPs,
    embeddings and head): enough to say it is at least 1B."""
    hidden = config["hidden_size"]
    heads, kv, head_dim = (
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["head_dim"],
    )
    attention = hidden * head_dim * (2 * heads + 2 * kv)
    dense = 3 * hidden * config["intermediate_size"]
    experts = config["n_routed_experts"] + config.get("n_shared_experts", 0)
    moe = (
        3 * hidden * config["moe_intermediate_size"] * experts + hidden * config["n_routed_experts"]
    )
    layers = config["num_hidden_layers"]
    first_dense = config.get("first_k_dense_replace", 0)
    total = layers * attention + first_dense * dense + (layers - first_dense) * moe
    return int(total + 2 * config["vocab_size"] * hidden)


def write_big(folder: Path, architecture: str) -> dict[str, Any]:
    """The big target's and drafter's configs and tokenizer, and the GPU recipe."""
    spec = for_architecture(architecture)
    small = generate(architecture)
    config = json.loads(small.target["config.json"])
    text = text_of(config, spec)
    text.update(BIG_SHAPE)
    count = parameters(text)
    if count < 1_000_000_000:
        raise PatcherError(f"the big {architecture} has {count} parameters, under 1B")
    drafter = dict(resolve(copy.deepcopy(spec.drafters[small.drafter_kind]), text))
    drafter["torch_dtype"] = "float32"
    (folder / "target").mkdir(parents=True)
    (folder / "drafter").mkdir()
    for name, data in small.target.items():
        (folder / "target" / name).write_bytes(dump(config) if name == "config.json" else data)
    (folder / "drafter" / "config.json").write_bytes(dump(drafter))
    layers = text["num_hidden_layers"]
    recipe = replace(BIG_RECIPE, aux_ids=(2, layers // 2, layers - 3))
    (folder / "recipe.json").write_text(json.dumps(recipe.to_json(), indent=1) + "\n")
    return {"parameters": count, "layers": layers}


def write_tiny(folder: Path, trained: Path) -> None:
    """The trained replica of the acceptance cache, with the prompts its proof served."""
    manifest = read_manifest(trained)
    result = json.loads((trained / "training.json").read_text())
    shutil.copytree(trained / manifest["target"], folder / "target")
    shutil.copytree(trained / manifest["drafter"], folder / "drafter")
    (folder / "prompts.json").write_text(json.dumps(result["prompts"]) + "\n")


def write_inputs(folder: Path, trained: Path, architecture: str) -> dict[str, Any]:
    if folder.exists():
        raise PatcherError(f"{folder} exists: the GPU proof's inputs go into a new folder")
    write_tiny(folder / "tiny", trained)
    return write_big(folder / "big", architecture)
