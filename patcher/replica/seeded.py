"""The in-venv writer of a replica's seeded weights, run by a venv's Python that has torch and
transformers (a serving venv); patcher itself depends on neither.

Run as ``<venv>/bin/python -I seeded.py TARGET_DIR DRAFTER_DIR --seed N --init-std S``. The
target's tensors are transformers' own: its model class for the config's architecture, built
from the replica's config with a seeded init and saved with ``save_pretrained``, so names,
shapes and layout are the reference implementation's. The drafter's are vLLM's Llama EAGLE-3
checkpoint layout, which transformers has no class for: the Llama decoder layer transformers
builds from the drafter's config (``midlayer.*``), its attention widened to read the token
embedding and the fused hidden state side by side, plus the ``fc`` that fuses the target's three
aux states, ``hidden_norm``, ``norm`` and ``lm_head``; the embedding is the target's (vLLM shares
it when the drafter has none).

On a problem it prints one line ``error: ...`` on stderr and exits 2. This file imports only the
standard library at top level, like the verify probe.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_REFUSED = 2
AUX_STATES = 3
"""EAGLE-3 fuses three of the target's hidden states."""
WIDENED = ("q_proj.weight", "k_proj.weight", "v_proj.weight")
"""The drafter's attention reads the token embedding and the fused state concatenated."""


class Refused(Exception):
    """A replica this venv cannot give weights to; the message is the one line printed."""


def model_class(architecture: str) -> Any:
    import transformers

    found = getattr(transformers, architecture, None)
    if found is None:
        raise Refused(
            f"transformers {transformers.__version__} has no class {architecture}: "
            "no reference implementation to write its weights from"
        )
    return found


def write_target(folder: Path, seed: int, init_std: float) -> dict[str, Any]:
    import torch
    from transformers import AutoConfig

    architecture = (json.loads((folder / "config.json").read_text()).get("architectures") or [""])[
        0
    ]
    cls = model_class(architecture)  # before AutoConfig, which fails on a model type it lacks
    config = AutoConfig.from_pretrained(folder)
    for holder in (config, getattr(config, "text_config", None)):
        if holder is not None:
            holder.initializer_range = init_std
    torch.manual_seed(seed)
    model = cls._from_config(config)  # float32: torch's default dtype
    model.save_pretrained(folder, safe_serialization=True)
    return {"class": architecture, "tensors": saved_tensors(folder)}


def saved_tensors(folder: Path) -> int:
    """Tensors on disk: transformers may save more than it holds (one per MoE expert)."""
    from safetensors import safe_open

    count = 0
    for path in folder.glob("*.safetensors"):
        with safe_open(str(path), "pt") as weights:
            count += len(list(weights.keys()))
    return count


def write_drafter(folder: Path, target_hidden: int, seed: int, init_std: float) -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**json.loads((folder / "config.json").read_text()))
    config.initializer_range = init_std
    torch.manual_seed(seed + 1)
    llama = LlamaForCausalLM._from_config(config)
    weights: dict[str, torch.Tensor] = {}
    for name, tensor in llama.state_dict().items():
        if name.startswith("model.embed_tokens."):
            continue
        name = name.removeprefix("model.").replace("layers.0.", "midlayer.")
        if name.endswith(WIDENED):
            tensor = torch.cat([tensor, torch.randn_like(tensor) * init_std], dim=1)
        weights[name] = tensor.contiguous()
    weights["midlayer.hidden_norm.weight"] = torch.ones(config.hidden_size)
    weights["fc.weight"] = torch.randn(config.hidden_size, AUX_STATES * target_hidden) * init_std
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return {"class": "LlamaForCausalLMEagle3", "tensors": len(weights)}


def text_hidden_size(folder: Path) -> int:
    config = json.loads((folder / "config.json").read_text())
    text = config.get("text_config") or config
    return int(text["hidden_size"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target", type=Path)
    parser.add_argument("drafter", type=Path)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--init-std", type=float, required=True)
    args = parser.parse_args(argv)
    try:
        target = write_target(args.target, args.seed, args.init_std)
        hidden = text_hidden_size(args.target)
        drafter = write_drafter(args.drafter, hidden, args.seed, args.init_std)
    except Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    print(json.dumps({"target": target, "drafter": drafter}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
