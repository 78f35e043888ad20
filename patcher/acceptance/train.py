"""The in-venv trainer of the acceptance proof, run by a serving venv's Python (torch and
transformers); patcher itself depends on neither.

Run as ``<venv>/bin/python -I train.py TARGET DRAFTER CONTROL --recipe FILE --out FILE`` on a
replica whose target and drafter hold seeded weights (``patcher.replica.seeded``):

1. the target is pre-trained on a synthetic corpus it can learn: random "phrases" of ordinary
   characters, concatenated in random order; a drafter can only predict a target that predicts;
2. transformers generates greedy continuations of corpus prompts, then runs the whole
   sequences once more for the states a drafter is fed: ``hidden_states[k]`` for the served
   aux ids (what vLLM hands the drafter, proven by ``aux-states-reference``) and the target's
   argmax at each position (what vLLM accepts a draft against);
3. the one-layer drafter, in vLLM's Llama EAGLE-3 layout, is trained on them with a train-time
   unroll: step 1 reads the fused aux states, steps 2.. read the drafter's own pre-norm output,
   as vLLM's proposer feeds it; a query of step s at origin j attends to step 1's keys up to j
   and to steps 2..s of its own origin, which is the KV cache vLLM's proposer holds;
4. DRAFTER gets the trained weights, CONTROL the same with ``fc`` (the aux-state input) zeroed.

The result (JSON) holds the losses, the held-out top-1 per unroll step, the seconds of each
part and the served prompts. On a refusal it prints one line ``error: ...`` on stderr and exits
2. Only the standard library is imported at top level, like ``seeded.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_REFUSED = 2
ALPHABET = [chr(code) for code in range(33, 127)]
"""The corpus' characters: the replica tokenizer has one id for each printable one."""
TIMED_STEPS = 8
"""Steps timed before a part's whole run is extrapolated against the budget."""
REPORT_EVERY = 100
"""Steps between progress lines on stdout (the training log)."""
DRAFTER_SEED_OFFSET = 7


class Refused(Exception):
    """A run this venv cannot train as asked; the message is the one line printed."""


class Budget:
    """The seconds a whole run may take; each part extrapolates its first steps against it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def check(self, part: str, done: int, total: int, since: float) -> None:
        per_step = (time.monotonic() - since) / done
        needed = per_step * (total - done)
        if needed > self.left():
            raise Refused(
                f"{part} needs about {needed + self.seconds - self.left():.0f} s here "
                f"({per_step:.2f} s a step, {total} steps), over the {self.seconds:.0f} s allowed"
            )


def corpus_ids(tokenizer: Any) -> list[int]:
    ids = tokenizer.convert_tokens_to_ids(ALPHABET)
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        raise Refused("the replica tokenizer has no id for every printable character")
    return list(ids)


def make_phrases(rng: random.Random, alphabet: list[int], recipe: dict) -> list[list[int]]:
    low, high = recipe["phrase_tokens"]
    return [
        [rng.choice(alphabet) for _ in range(rng.randint(low, high))]
        for _ in range(recipe["phrases"])
    ]


def corpus_text(rng: random.Random, phrases: list[list[int]], length: int) -> list[int]:
    """``length`` ids of phrases in random order, starting at a phrase's start."""
    ids: list[int] = []
    while len(ids) < length:
        ids += rng.choice(phrases)
    return ids[:length]


def pretrain(model: Any, phrases: list[list[int]], recipe: dict, budget: Budget) -> dict:
    import torch

    part = recipe["pretrain"]
    rng = random.Random(recipe["seed"])

    def loss_at(step: int) -> Any:
        batch = torch.tensor(
            [corpus_text(rng, phrases, part["length"]) for _ in range(part["batch"])]
        )
        return model(input_ids=batch, labels=batch).loss

    model.train()
    summary = descend(list(model.parameters()), part, loss_at, "pretraining the target", budget)
    model.eval()
    return summary


def descend(
    parameters: list[Any], part: dict, loss_at: Callable[[int], Any], doing: str, budget: Budget
) -> dict:
    """``part["steps"]`` steps of AdamW (warmup, then cosine; gradients clipped to norm 1) on
    ``loss_at(step)``, for the target's pretraining and the drafter's training alike: the first
    steps timed against the budget, a progress line every ``REPORT_EVERY``."""
    import torch

    optimizer = torch.optim.AdamW(parameters, lr=part["lr"], weight_decay=0.0)
    schedule = warmup_cosine(optimizer, part["steps"])
    started = time.monotonic()
    losses = []
    for step in range(part["steps"]):
        loss = loss_at(step)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if step + 1 == TIMED_STEPS:
            budget.check(doing, step + 1, part["steps"], started)
        if (step + 1) % REPORT_EVERY == 0:
            print(f"{doing}: step {step + 1}, loss {losses[-1]:.3f}", flush=True)
    return {
        "steps": part["steps"],
        "first_loss": round(losses[0], 4),
        "last_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
        "seconds": round(time.monotonic() - started, 1),
    }


def warmup_cosine(optimizer: Any, steps: int) -> Any:
    import torch

    warmup = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def continuations(model: Any, phrases: list[list[int]], recipe: dict, pad: int) -> dict:
    """Greedy continuations of corpus prompts, their aux states and the target's argmax."""
    import torch

    part = recipe["data"]
    rng = random.Random(recipe["seed"] + 1)
    started = time.monotonic()
    tokens, states, labels = [], [], []
    with torch.no_grad():
        for first in range(0, part["continuations"], part["batch"]):
            count = min(part["batch"], part["continuations"] - first)
            prompts = torch.tensor(
                [corpus_text(rng, phrases, part["prompt_tokens"]) for _ in range(count)]
            )
            full = model.generate(
                prompts,
                attention_mask=torch.ones_like(prompts),
                max_new_tokens=part["new_tokens"],
                min_new_tokens=part["new_tokens"],
                do_sample=False,
                pad_token_id=pad,
            )
            out = model(input_ids=full, output_hidden_states=True)
            tokens.append(full)
            states.append(torch.cat([out.hidden_states[k] for k in recipe["aux_ids"]], dim=-1))
            labels.append(out.logits.argmax(-1))
    return {
        "tokens": torch.cat(tokens),
        "states": torch.cat(states),
        "labels": torch.cat(labels),
        "seconds": round(time.monotonic() - started, 1),
    }


class Drafter:
    """vLLM's one-layer Llama EAGLE-3 drafter (``llama_eagle3.py``), built from transformers'
    Llama modules, with the train-time unroll's attention written out."""

    def __init__(self, folder: Path, target_hidden: int, embed: Any, lm_head: Any) -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (
            LlamaDecoderLayer,
            LlamaRMSNorm,
            LlamaRotaryEmbedding,
        )

        config = LlamaConfig(**json.loads((folder / "config.json").read_text()))
        hidden = config.hidden_size
        self.config = config
        self.layer = LlamaDecoderLayer(config, 0)
        attention = self.layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj"):
            old = getattr(attention, name)
            setattr(attention, name, torch.nn.Linear(2 * hidden, old.out_features, bias=False))
        self.hidden_norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
        self.fc = torch.nn.Linear(len(AUX_NAMES) * target_hidden, hidden, bias=False)
        self.norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
        self.lm_head = torch.nn.Linear(hidden, config.vocab_size, bias=False)
        self.rotary = LlamaRotaryEmbedding(config)
        self.embed = embed  # the target's: vLLM shares it with a drafter that has none
        self.modules = torch.nn.ModuleDict(
            {
                "midlayer": self.layer,
                "hidden_norm": self.hidden_norm,
                "fc": self.fc,
                "norm": self.norm,
                "lm_head": self.lm_head,
            }
        )
        self.load(load_file(str(folder / "model.safetensors")))
        if lm_head is not None and lm_head.shape == self.lm_head.weight.shape:
            with torch.no_grad():
                self.lm_head.weight.copy_(lm_head)  # a head that starts as the target's

    def load(self, weights: dict[str, Any]) -> None:
        state = {}
        for name, tensor in weights.items():
            name = name.replace("midlayer.hidden_norm.", "hidden_norm.")
            state[name] = tensor
        self.modules.load_state_dict(state, strict=True)

    def weights(self) -> dict[str, Any]:
        """The state in vLLM's checkpoint names, as ``seeded.py`` writes them."""
        return {
            name.replace("hidden_norm.", "midlayer.hidden_norm.", 1)
            if name.startswith("hidden_norm.")
            else name: tensor.detach().contiguous()
            for name, tensor in self.modules.state_dict().items()
        }

    def unroll(self, tokens: Any, states: Any, steps: int) -> list[Any]:
        """Logits of each unroll step; step s at origin j predicts the target's argmax at
        position j + s, from the token at j + s and the previous step's pre-norm output."""
        import torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

        attention = self.layer.self_attn
        batch, length = tokens.shape
        heads = self.config.num_attention_heads
        groups = heads // self.config.num_key_value_heads
        head_dim = attention.head_dim
        hidden = self.fc(states)  # [B, T, H]: the fused aux states at each origin
        keys: list[Any] = []
        values: list[Any] = []
        logits = []
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        for step in range(steps):
            # the token read at origin j is the one at j + 1 + step; past the end, any id
            shifted = torch.roll(tokens, -(1 + step), dims=1)
            positions = (torch.arange(length) + step).expand(batch, length)
            embeds = self.layer.input_layernorm(self.embed(shifted))
            residual = hidden
            x = torch.cat([embeds, self.hidden_norm(hidden)], dim=-1)

            def split(projection: Any, count: int, x: Any = x) -> Any:
                return projection(x).view(batch, length, count, head_dim).transpose(1, 2)

            q = split(attention.q_proj, heads)
            k = split(attention.k_proj, heads // groups)
            v = split(attention.v_proj, heads // groups)
            cos, sin = self.rotary(v, positions)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
            keys.append(k)
            values.append(v)
            scale = head_dim**-0.5
            first = (q @ keys[0].transpose(-1, -2)) * scale
            first = first.masked_fill(~causal, float("-inf"))
            own = [(q * key).sum(-1, keepdim=True) * scale for key in keys[1:]]
            weights = torch.softmax(torch.cat([first, *own], dim=-1), dim=-1)
            out = weights[..., :length] @ values[0]
            for index, value in enumerate(values[1:]):
                out = out + weights[..., length + index : length + index + 1] * value
            out = out.transpose(1, 2).reshape(batch, length, heads * head_dim)
            residual = attention.o_proj(out) + residual
            mlp = self.layer.mlp(self.layer.post_attention_layernorm(residual))
            prenorm = mlp + residual
            logits.append(self.lm_head(self.norm(prenorm)))
            hidden = prenorm
        return logits


AUX_NAMES = ("low", "middle", "high")
"""EAGLE-3 fuses three of the target's hidden states."""


def step_masks(length: int, prompt: int, steps: int) -> list[Any]:
    """Where step s is scored: origins from the last prompt position on (where vLLM drafts
    from) whose label, at j + s, is inside the sequence."""
    import torch

    origins = torch.arange(length)
    return [(origins >= prompt - 1) & (origins + step + 1 <= length - 1) for step in range(steps)]


def train_drafter(drafter: Drafter, data: dict, recipe: dict, budget: Budget) -> dict:
    import torch
    import torch.nn.functional as functional

    part = recipe["drafter"]
    steps = part["unroll"]
    torch.manual_seed(recipe["seed"] + DRAFTER_SEED_OFFSET)
    count = data["tokens"].shape[0]
    held = max(1, int(count * part["held_out"]))
    order = torch.randperm(count)
    train, test = order[held:], order[:held]
    length = data["tokens"].shape[1]
    masks = step_masks(length, recipe["data"]["prompt_tokens"], steps)
    labels = [torch.roll(data["labels"], -(1 + step), dims=1) for step in range(steps)]

    def loss_at(_: int) -> Any:
        pick = train[torch.randint(len(train), (part["batch"],))]
        out = drafter.unroll(data["tokens"][pick], data["states"][pick], steps)
        return (
            sum(
                functional.cross_entropy(
                    logits[:, masks[s]].flatten(0, 1), labels[s][pick][:, masks[s]].flatten()
                )
                for s, logits in enumerate(out)
            )
            / steps
        )

    parameters = list(drafter.modules.parameters())
    summary = descend(parameters, part, loss_at, "training the drafter", budget)
    with torch.no_grad():
        out = drafter.unroll(data["tokens"][test], data["states"][test], steps)
        top1 = [
            float((logits.argmax(-1)[:, masks[s]] == labels[s][test][:, masks[s]]).float().mean())
            for s, logits in enumerate(out)
        ]
    return {
        **summary,
        "held_out_top1": [round(t, 4) for t in top1],
        "held_out_sequences": held,
    }


def served_prompts(phrases: list[list[int]], recipe: dict, tokenizer: Any) -> list[str]:
    """What the proof sends the server: corpus prompts the drafter's data did not hold."""
    rng = random.Random(recipe["seed"] + 2)
    part = recipe["serve"]
    texts = []
    for _ in range(part["prompts"]):
        ids = corpus_text(rng, phrases, part["prompt_tokens"])
        text = tokenizer.decode(ids)
        if tokenizer.encode(text, add_special_tokens=False) != ids:
            raise Refused("the replica tokenizer does not encode its own decoded corpus back")
        texts.append(text)
    return texts


def save_drafters(drafter: Drafter, folder: Path, control: Path) -> None:
    import torch
    from safetensors.torch import save_file

    weights = drafter.weights()
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    blind = {**weights, "fc.weight": torch.zeros_like(weights["fc.weight"])}
    save_file(blind, str(control / "model.safetensors"), metadata={"format": "pt"})


def check_fit(target: Any, drafter_config: dict) -> None:
    """A drafter that does not fit its target is refused before any training."""
    text = getattr(target.config, "text_config", None) or target.config
    for key in ("vocab_size", "hidden_size"):
        if drafter_config.get(key) != getattr(text, key):
            raise Refused(
                f"the drafter's {key} is {drafter_config.get(key)}, the target's "
                f"{getattr(text, key)}: it does not fit the target"
            )


def run(target_dir: Path, drafter_dir: Path, control_dir: Path, recipe: dict) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    budget = Budget(recipe["budget_seconds"])
    torch.manual_seed(recipe["seed"])
    torch.set_num_threads(recipe["threads"])
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    check_fit(model, json.loads((drafter_dir / "config.json").read_text()))
    layers = (getattr(model.config, "text_config", None) or model.config).num_hidden_layers
    if not all(0 < k <= layers for k in recipe["aux_ids"]) or len(recipe["aux_ids"]) != 3:
        raise Refused(f"aux ids {recipe['aux_ids']} are not three layers of 1..{layers}")
    phrases = make_phrases(random.Random(recipe["seed"]), corpus_ids(tokenizer), recipe)
    target = pretrain(model, phrases, recipe, budget)
    model.save_pretrained(target_dir, safe_serialization=True)
    data = continuations(model, phrases, recipe, tokenizer.pad_token_id or 0)
    embed = model.get_input_embeddings()
    embed.requires_grad_(False)
    head = model.get_output_embeddings()
    hidden = embed.weight.shape[1]
    drafter = Drafter(drafter_dir, hidden, embed, None if head is None else head.weight.detach())
    trained = train_drafter(drafter, data, recipe, budget)
    save_drafters(drafter, drafter_dir, control_dir)
    return {
        "target": target,
        "data": {
            "continuations": int(data["tokens"].shape[0]),
            "tokens_each": int(data["tokens"].shape[1]),
            "seconds": data["seconds"],
        },
        "drafter": trained,
        "prompts": served_prompts(phrases, recipe, tokenizer),
        "seconds": round(time.monotonic() - budget.started, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target", type=Path)
    parser.add_argument("drafter", type=Path)
    parser.add_argument("control", type=Path, help="a copy of DRAFTER's config; gets fc zeroed")
    parser.add_argument("--recipe", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    recipe = json.loads(args.recipe.read_text())
    try:
        result = run(args.target, args.drafter, args.control, recipe)
    except Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
