"""The acceptance proof's training on a GPU, for a target too big to train on CPU.

Run by the GPU proof as ``python3 train_gpu.py FOLDER --out FILE``, where ``FOLDER`` holds
``target/`` and ``drafter/`` configs (``gpu_setup.write_big``) and ``recipe.json``. The steps are
``train.py``'s own, run with CUDA as torch's default device: the target built from its config in
bfloat16 with a seeded init and pre-trained on the synthetic corpus, its greedy continuations and
aux states, the drafter (float32, vLLM's Llama EAGLE-3 layout, ``seeded.py``'s init) trained on
them with the same unroll. It writes the target's and drafter's weights into ``FOLDER`` and the
numbers as JSON. Standard library only at top level, like ``train.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train


def build_target(folder: Path, seed: int, device: str) -> Any:
    import torch
    import transformers
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    cls = getattr(transformers, config.architectures[0])
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls._from_config(config, dtype=torch.bfloat16)
    return model


def run(folder: Path, device: str = "cuda") -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    started = time.monotonic()
    recipe = json.loads((folder / "recipe.json").read_text())
    budget = train.Budget(recipe["budget_seconds"])
    torch.backends.cuda.matmul.allow_tf32 = True
    target_dir, drafter_dir = folder / "target", folder / "drafter"
    model = build_target(target_dir, recipe["seed"], device)
    built = time.monotonic() - started
    torch.set_default_device(device)  # train.py's tensors, made without a device, go there
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    phrases = train.make_phrases(random.Random(recipe["seed"]), train.corpus_ids(tokenizer), recipe)
    pretrained = train.pretrain(model, phrases, recipe, budget)
    model.save_pretrained(target_dir, safe_serialization=True)
    data = train.continuations(model, phrases, recipe, tokenizer.pad_token_id or 0)
    data["states"] = data["states"].float()
    hidden = model.get_input_embeddings().weight.shape[1]
    embed = model.get_input_embeddings()
    embed.requires_grad_(False)

    def embed_float(ids: Any) -> Any:
        return embed(ids).float()

    # seeded.py's drafter init, then train.py's Drafter reads it back
    import seeded

    seeded.write_drafter(drafter_dir, hidden, recipe["seed"], 0.02)
    head = model.get_output_embeddings()
    drafter = train.Drafter(drafter_dir, hidden, embed_float, head.weight.detach().float())
    trained = train.train_drafter(drafter, data, recipe, budget)
    save_file(drafter.weights(), str(drafter_dir / "model.safetensors"), metadata={"format": "pt"})
    count = sum(p.numel() for p in model.parameters())
    return {
        "target_parameters": count,
        "build_seconds": round(built, 1),
        "target": pretrained,
        "data": {"continuations": int(data["tokens"].shape[0]), "seconds": data["seconds"]},
        "drafter": trained,
        "prompts": train.served_prompts(phrases, recipe, tokenizer),
        "peak_gib": round(torch.cuda.max_memory_allocated() / (1 << 30), 1)
        if device == "cuda"
        else None,
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--device", default="cuda", help="cpu only to try the steps on a small model"
    )
    args = parser.parse_args(argv)
    try:
        result = run(args.folder, args.device)
    except train.Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return train.EXIT_REFUSED
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
