"""The in-venv probe: runs checks against the vLLM installed beside it.

Run as ``<venv>/bin/python probe.py CHECK [CHECK ...] --workdir DIR``; prints one JSON line
``{"check", "status", "detail", "seconds"}`` per check on stdout, in order. The checks share
one process, so vLLM is imported once; every module attribute a check replaces is put back
before the next one starts (``replace``). The venv has no patcher, so this
file imports only the standard library at top level; vLLM and torch are imported by the
checks themselves. Each check drives vLLM's own code and replaces only what needs a GPU,
a process group or weights, naming every replacement in its detail.

Statuses: ``pass``; ``fail`` when the barrier shows (``barrier: ...``) or the check could
not run (``error: ...``); ``skip`` when the check does not apply to this release.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

MEDIA_PLACEHOLDER_TOKEN_ID = 163605
KIMI_ARCH = "KimiK25ForConditionalGeneration"
MLA_DRAFTER_ARCH = "Eagle3DeepseekV3ForCausalLM"
TARGET_LAYERS = 61
"""Kimi-K2's decoder depth; the default aux layers for it are (2, 30, 58)."""

_MODELS = "vllm.model_executor.models"
EAGLE_PROPOSER_MODULE = "vllm.v1.spec_decode.eagle"
"""The V1 runner's EAGLE proposer, whose multimodal branch reads ``image_token_index``; vLLM
0.34.0 has no V1 GPU runner, and so neither the module nor the barrier."""


ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "speculative-config": (
        "vllm.config",
        f"{_MODELS}.registry",
        f"{_MODELS}.kimi_k25",
        f"{_MODELS}.llama_eagle3",
    ),
    "eagle3-interface": (
        f"{_MODELS}.interfaces",
        f"{_MODELS}.kimi_k25",
        f"{_MODELS}.deepseek_v2",
        f"{_MODELS}.registry",
    ),
    "mm-image-token": (
        "vllm.config",
        EAGLE_PROPOSER_MODULE,
        f"{_MODELS}.kimi_k25",
        f"{_MODELS}.registry",
        f"{_MODELS}.llama_eagle3",
    ),
    "aux-hidden-states": (f"{_MODELS}.deepseek_v2",),
    "mla-drafter": ("vllm.config", f"{_MODELS}.registry", f"{_MODELS}.deepseek_eagle3"),
    "eagle3-backbone": (
        f"{_MODELS}.interfaces",
        f"{_MODELS}.glm4_moe",
        f"{_MODELS}.gemma3",
        f"{_MODELS}.gemma3_mm",
        f"{_MODELS}.ernie45_moe",
        f"{_MODELS}.step3_text",
    ),
    "eagle3-model-type": ("vllm.config", f"{_MODELS}.registry", f"{_MODELS}.llama_eagle3"),
    "v2-nested-aux-ids": ("vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils",),
    "pp-aux-relay": (
        "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils",
        f"{_MODELS}.deepseek_v2",
        f"{_MODELS}.kimi_k25",
        f"{_MODELS}.registry",
    ),
}
"""The vLLM modules each check loads (directly or through the model registry).

The venv builder reads this to decide which optional packages a release needs.
"""

CHECKS = tuple(ENTRY_MODULES)

MODEL_CHECKS = frozenset({"eagle3-backbone", "eagle3-model-type"})
"""Checks about the patchset's own model, named with ``--model MODULE:CAUSAL_LM:BACKBONE:ATTR``
(e.g. ``vllm.model_executor.models.glm4_moe:Glm4MoeForCausalLM:Glm4MoeModel:model``), with
``:WRAPPER_MODULE:WRAPPER`` after it for a multimodal wrapper holding the causal LM."""

BACKBONE_LAYERS = 8
"""Decoder-layer stand-ins for ``eagle3-backbone``: default aux layers (2, 4, 5)."""


_REPLACED: list[tuple[Any, str, Any]] = []
_MISSING = object()


def replace(owner: Any, name: str, value: Any) -> None:
    """Set ``owner.name`` for the current check only; ``run`` restores it afterwards."""
    _REPLACED.append((owner, name, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def _restore() -> None:
    while _REPLACED:
        owner, name, old = _REPLACED.pop()
        if old is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, old)


class Barrier(Exception):
    """The failure a check exists to show, e.g. vLLM's own whitelist error."""


class Skip(Exception):
    """The check does not apply to this release."""


class ProbeError(Exception):
    """The check could not be set up; its result says nothing about the barrier."""


# Checkpoint configs: small, no weights, shaped like Kimi-K2.5 and its drafters.

_TEXT_CONFIG: dict[str, Any] = {
    "model_type": "kimi_k2",
    "architectures": ["DeepseekV3ForCausalLM"],
    "vocab_size": 163840,
    "hidden_size": 128,
    "intermediate_size": 384,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": 48,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}

KIMI_K25_CONFIG: dict[str, Any] = {
    "architectures": [KIMI_ARCH],
    "model_type": "kimi_k25",
    "media_placeholder_token_id": MEDIA_PLACEHOLDER_TOKEN_ID,
    "torch_dtype": "bfloat16",
    "text_config": _TEXT_CONFIG,
    "vision_config": {
        "hidden_size": 32,
        "intermediate_size": 96,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "patch_size": 14,
    },
}

EAGLE3_DRAFTER_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "vocab_size": 163840,
    "draft_vocab_size": 16384,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

MLA_DRAFTER_CONFIG: dict[str, Any] = {
    **{k: v for k, v in _TEXT_CONFIG.items() if k not in ("architectures", "n_routed_experts")},
    "architectures": [MLA_DRAFTER_ARCH],
    "num_hidden_layers": 1,
    "first_k_dense_replace": 1,
    "draft_vocab_size": 16384,
    "tie_word_embeddings": False,
}


def write_checkpoint(workdir: Path, name: str, config: dict[str, Any]) -> str:
    """A checkpoint directory holding only ``config.json``: vLLM's config code needs no more."""
    path = workdir / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=1))
    return str(path)


def _vllm_version() -> str:
    import vllm

    return getattr(vllm, "__version__", "?")


def _target_model_config(workdir: Path) -> Any:
    """A real ``ModelConfig`` for the Kimi-shaped checkpoint, as ``vllm serve`` builds one."""
    from vllm.config import ModelConfig

    config = ModelConfig(
        model=write_checkpoint(workdir, "kimi-k25", KIMI_K25_CONFIG), skip_tokenizer_init=True
    )
    # Releases on transformers 5 read text_config through DeepseekV3Config, which keeps
    # its own model type; either is the Kimi-K2 text model.
    text_type = config.hf_text_config.model_type
    if config.architectures[0] != KIMI_ARCH or text_type not in ("kimi_k2", "deepseek_v3"):
        raise ProbeError(f"target resolved to {config.architectures[0]} / {text_type!r}")
    return config


def _speculative_config(target: Any, drafter_dir: str) -> Any:
    """A real ``SpeculativeConfig(method="eagle3")`` for ``target``; the gate raises here."""
    from vllm.config import ParallelConfig, SpeculativeConfig

    try:
        return SpeculativeConfig(
            method="eagle3",
            model=drafter_dir,
            num_speculative_tokens=3,
            target_model_config=target,
            target_parallel_config=ParallelConfig(),
        )
    except Exception as exc:
        line = _matching_line(str(exc), "only supported for")
        if line is None:
            raise
        raise Barrier(line) from exc


def _matching_line(text: str, needle: str) -> str | None:
    """The line of ``text`` holding ``needle``, without pydantic's wrapping around it."""
    for line in text.splitlines():
        if needle in line.lower():
            return line.strip().removeprefix("Value error, ").partition(" [type=")[0]
    return None


def check_speculative_config(workdir: Path) -> str:
    target = _target_model_config(workdir)
    drafter = write_checkpoint(workdir, "eagle3-drafter", EAGLE3_DRAFTER_CONFIG)
    spec = _speculative_config(target, drafter)
    draft = spec.draft_model_config
    return (
        f"SpeculativeConfig accepted eagle3 for target {target.architectures[0]} "
        f"(text model type {target.hf_text_config.model_type}); "
        f"drafter {draft.architectures[0]}, {spec.num_speculative_tokens} tokens"
    )


def check_eagle3_interface(workdir: Path) -> str:
    from vllm.model_executor.models import deepseek_v2, kimi_k25
    from vllm.model_executor.models.interfaces import supports_eagle3

    kimi_cls = kimi_k25.KimiK25ForConditionalGeneration
    deepseek_cls = deepseek_v2.DeepseekV3ForCausalLM
    missing = [c.__name__ for c in (kimi_cls, deepseek_cls) if not supports_eagle3(c)]
    if missing:
        raise Barrier(f"supports_eagle3() is False for {', '.join(missing)}")

    # Models built without __init__ (that would allocate the weights); the real
    # get_eagle3_aux_hidden_state_layers reads only the backbone's ``layers``.
    deepseek = _bare(deepseek_cls)
    deepseek.model = _backbone(TARGET_LAYERS)
    kimi = _bare(kimi_cls)
    kimi.language_model, backbone = _language_model(kimi_cls, TARGET_LAYERS)
    expected = (2, TARGET_LAYERS // 2, TARGET_LAYERS - 3)
    for cls, model in ((deepseek_cls, deepseek), (kimi_cls, kimi)):
        got = tuple(cls.get_eagle3_aux_hidden_state_layers(model))
        if got != expected:
            raise Barrier(f"{cls.__name__} default aux layers {got}, expected {expected}")
    kimi_cls.set_aux_hidden_state_layers(kimi, (1, 2))
    routed = getattr(backbone, "aux_hidden_state_layers", None)
    if tuple(routed or ()) != (1, 2):
        raise Barrier(f"{kimi_cls.__name__}.set_aux_hidden_state_layers did not reach the model")
    held = type(kimi.language_model).__name__
    return (
        f"supports_eagle3 True for {kimi_cls.__name__} and {deepseek_cls.__name__}; "
        f"default aux layers {expected} for {TARGET_LAYERS} layers, delegated by Kimi to the "
        f"{held} it holds in this release (replaced: models built with object.__new__, "
        f"layers = {TARGET_LAYERS} nn.Identity stand-ins)"
    )


def _bare(cls: type) -> Any:
    """An instance of an ``nn.Module`` subclass with only ``nn.Module``'s own state."""
    import torch.nn as nn

    instance: Any = object.__new__(cls)
    nn.Module.__init__(instance)
    return instance


STAND_IN_WIDTH, STAND_IN_VOCAB = 8, 16


def _backbone(num_layers: int) -> Any:
    """A bare ``DeepseekV2Model`` with ``num_layers`` identity layers and an embedding."""
    import torch.nn as nn
    from vllm.model_executor.models import deepseek_v2

    backbone = _bare(deepseek_v2.DeepseekV2Model)
    backbone.layers = nn.ModuleList(nn.Identity() for _ in range(num_layers))
    backbone.embed_tokens = nn.Embedding(STAND_IN_VOCAB, STAND_IN_WIDTH)
    return backbone


def _language_model(wrapper: type, num_layers: int) -> tuple[Any, Any]:
    """(language model, its backbone), of the class this release's ``wrapper`` holds.

    Kimi-K2.5 held the bare ``DeepseekV2Model`` in vLLM 0.15.x and a causal-LM class from
    the registry since 0.16.0; the stand-in follows the release's own ``__init__``.
    """
    import torch.nn as nn
    from vllm.model_executor.models import deepseek_v2

    held = _assigned_class(wrapper, "language_model")
    backbone = _backbone(num_layers)
    if issubclass(held, deepseek_v2.DeepseekV2Model):
        return backbone, backbone
    model = _bare(held)
    model.model = backbone
    model.lm_head = nn.Linear(STAND_IN_WIDTH, STAND_IN_VOCAB, bias=False)
    return model, backbone


def _assigned_class(cls: type, attribute: str) -> type:
    """The class that ``cls.__init__`` assigns to ``self.<attribute>``, read from its source.

    ``init_vllm_registered_model(..., architectures=[NAME])`` resolves NAME through the
    release's model registry, as vLLM does.
    """
    import ast
    import inspect
    import textwrap

    init = vars(cls).get("__init__")
    if init is None:
        raise ProbeError(f"{cls.__name__} defines no __init__ of its own")
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    namespace = vars(sys.modules[cls.__module__])
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if not any(
            isinstance(t, ast.Attribute)
            and t.attr == attribute
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for t in node.targets
        ):
            continue
        func = node.value.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "init_vllm_registered_model":
            archs = next((k.value for k in node.value.keywords if k.arg == "architectures"), None)
            arch = _TEXT_CONFIG["architectures"][0] if archs is None else ast.literal_eval(archs)[0]
            return _registered_class(arch)
        found = namespace.get(name)
        if isinstance(found, type):
            return found
    raise ProbeError(f"cannot tell what {cls.__name__}.__init__ assigns to self.{attribute}")


def _registered_class(arch: str) -> type:
    from vllm.model_executor.models import ModelRegistry

    found = ModelRegistry._try_load_model_cls(arch)
    if found is None:
        raise ProbeError(f"{arch} is not in this release's model registry")
    return found


def _single_rank() -> Any:
    """Pipeline-parallel state without a process group: one rank holds everything."""
    return SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1, rank_in_group=0)


def _single_rank_for(cls: type) -> list[str]:
    """Replace ``get_pp_group`` in the module of every class in ``cls``'s MRO that imports it.

    A method looks the name up in the module that defines it, and releases move methods
    between classes: ``EagleProposer.load_model`` is in ``eagle`` up to 0.18.0 and in
    ``llm_base_proposer`` (``SpecDecodeBaseProposer``) by 0.33.0. Returns the modules replaced.
    """
    replaced: list[str] = []
    for klass in cls.__mro__:
        module = sys.modules.get(klass.__module__)
        if module is None or module.__name__ in replaced or not hasattr(module, "get_pp_group"):
            continue
        replace(module, "get_pp_group", _single_rank)
        replaced.append(module.__name__)
    if not replaced:
        raise ProbeError(f"no module of {cls.__name__}'s classes imports get_pp_group")
    return replaced


def _release_module(module: str, what: str) -> Any:
    """``module`` imported, or ``Skip`` if this release does not have it; a module that is
    there but fails on something it imports is an error, not a skip."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise
        raise Skip(f"vLLM {_vllm_version()} has no {module} ({what})") from exc


def check_mm_image_token(workdir: Path) -> str:
    import torch.nn as nn
    from transformers import AutoConfig
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

    eagle = _release_module(EAGLE_PROPOSER_MODULE, "its V1 EAGLE proposer")
    target_config = _target_model_config(workdir).hf_config
    if hasattr(target_config, "image_token_index"):
        raise ProbeError("the Kimi-shaped target config already has image_token_index")
    target = _bare(KimiK25ForConditionalGeneration)
    target.config = target_config
    target.language_model, backbone = _language_model(KimiK25ForConditionalGeneration, 4)

    # The real drafter class, bare: a config, an inner model with an embedding, an lm_head.
    drafter = _bare(_registered_class(EAGLE3_DRAFTER_CONFIG["architectures"][0]))
    drafter.config = AutoConfig.from_pretrained(
        write_checkpoint(workdir, "eagle3-drafter", EAGLE3_DRAFTER_CONFIG)
    )
    drafter.model = nn.Module()
    drafter.model.embed_tokens = nn.Embedding(STAND_IN_VOCAB, STAND_IN_WIDTH)
    drafter.lm_head = nn.Linear(STAND_IN_WIDTH, 2 * STAND_IN_VOCAB, bias=False)
    drafter.has_own_embed_tokens, drafter.has_own_lm_head = False, True

    proposer = object.__new__(eagle.EagleProposer)
    proposer.__dict__.update(
        vllm_config=SimpleNamespace(
            compilation_config=SimpleNamespace(static_forward_context={}),
            speculative_config=SimpleNamespace(
                draft_model_config=SimpleNamespace(hf_config=drafter.config)
            ),
        ),
        supports_mm_inputs=False,
        parallel_drafting=False,
        pass_hidden_states_to_model=True,
        use_local_argmax_reduction=False,  # read by 0.18.0 on; SpeculativeConfig's default
    )
    single_rank = ", ".join(f"{m}.get_pp_group" for m in _single_rank_for(eagle.EagleProposer))
    if hasattr(eagle.EagleProposer, "_get_model"):  # 0.16.0 and later
        proposer._get_model = lambda: drafter
        loader = "EagleProposer._get_model"
    else:
        replace(eagle, "get_model", lambda **_: drafter)
        loader = "eagle.get_model"
    try:
        proposer.load_model(target)
    except AttributeError as exc:
        if "SimpleNamespace" in str(exc) or "'EagleProposer' object" in str(exc):
            raise ProbeError(f"a stand-in lacks what load_model reads: {exc}") from exc
        raise Barrier(f"AttributeError: {exc}") from exc
    got = getattr(drafter.config, "image_token_index", None)
    if got != MEDIA_PLACEHOLDER_TOKEN_ID:
        raise Barrier(f"drafter image_token_index is {got}, expected {MEDIA_PLACEHOLDER_TOKEN_ID}")
    if drafter.model.embed_tokens is not backbone.embed_tokens:
        raise Barrier("load_model did not share the target's embedding with the drafter")
    held = type(target.language_model).__name__
    return (
        f"EagleProposer.load_model set the drafter's image_token_index to {got} from "
        f"{KIMI_ARCH}.config.media_placeholder_token_id and shared the embedding of the {held} "
        f"Kimi holds in this release (replaced: {loader} returns a bare "
        f"{type(drafter).__name__} with a config, a stand-in embedding and lm_head; "
        f"{single_rank} single-rank; vllm_config holds only an empty static_forward_context "
        "and the drafter's config; proposer and models built with object.__new__, "
        "use_local_argmax_reduction=False)"
    )


def check_aux_hidden_states(workdir: Path) -> str:
    import torch
    from vllm.model_executor.models import deepseek_v2

    num_layers, wanted = 4, (1, 2)
    model, seen, _ = _stand_in_backbone(deepseek_v2.DeepseekV2Model, num_layers)
    how = _request_aux_layers(deepseek_v2, model, wanted)
    out = _forward_on_one_rank(deepseek_v2, deepseek_v2.DeepseekV2Model, model)
    if isinstance(out, torch.Tensor):
        raise Barrier(
            f"DeepseekV2Model.forward returned one Tensor; no aux hidden states for layers {wanted}"
        )
    _, aux = out
    if len(aux) != len(wanted) or not all(
        torch.equal(state, seen[i]) for state, i in zip(aux, wanted, strict=False)
    ):
        raise Barrier(f"aux hidden states are not the inputs of layers {wanted}")
    return (
        f"DeepseekV2Model.forward returned (hidden_states, {len(aux)} aux states) equal to "
        f"hidden_states + residual at the input of layers {wanted} of {num_layers}; aux layers "
        f"{how} (replaced: {num_layers} decoder layers and the final norm by CPU stand-ins, "
        "get_pp_group by a single-rank stand-in, model built with object.__new__)"
    )


def _stand_in_backbone(
    backbone_cls: type, layers: int
) -> tuple[Any, dict[int, Any], dict[int, Any]]:
    """``backbone_cls`` built bare around ``layers`` decoder-layer stand-ins and a final norm,
    with what each layer records: its input as EAGLE-3 reads it (``hidden_states + residual``)
    and its output. Every layer returns states no other does, so an aux state taken from the
    wrong layer cannot pass."""
    import torch.nn as nn

    inputs: dict[int, Any] = {}
    outputs: dict[int, Any] = {}

    class Layer(nn.Module):
        use_sequence_parallel_moe = False

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

        def forward(self, positions: Any, hidden_states: Any, residual: Any, *_: Any, **__: Any):
            inputs[self.index] = hidden_states if residual is None else hidden_states + residual
            residual = hidden_states if residual is None else residual + 1
            hidden_states = hidden_states * 2 + self.index
            outputs[self.index] = hidden_states + residual
            return hidden_states, residual

    class Norm(nn.Module):
        def forward(self, hidden_states: Any, residual: Any) -> Any:
            return hidden_states + residual, residual

    backbone = _bare(backbone_cls)
    backbone.config = SimpleNamespace()
    backbone.layers = nn.ModuleList(Layer(i) for i in range(layers))
    backbone.start_layer, backbone.end_layer = 0, layers
    backbone.hidden_size = 8
    backbone.norm = Norm()
    return backbone, inputs, outputs


def _forward_on_one_rank(module: Any, backbone_cls: Any, backbone: Any) -> Any:
    """The release's own ``backbone_cls.forward`` on three positions of 8-wide embeddings."""
    import torch

    # Pipeline-parallel state needs an initialised process group; one rank is all of it.
    replace(module, "get_pp_group", _single_rank)
    embeds = torch.arange(3 * 8, dtype=torch.float32).reshape(3, 8)
    return backbone_cls.forward(
        backbone,
        input_ids=None,
        positions=torch.arange(3),
        intermediate_tensors=None,
        inputs_embeds=embeds,
    )


def _request_aux_layers(deepseek_v2: Any, model: Any, wanted: tuple[int, ...]) -> str:
    """Ask for aux layers the way the EAGLE-3 runner does, through the causal-LM wrapper."""
    setter = getattr(deepseek_v2.DeepseekV2ForCausalLM, "set_aux_hidden_state_layers", None)
    if setter is None:
        model.aux_hidden_state_layers = wanted
        return "set directly (DeepseekV2ForCausalLM has no set_aux_hidden_state_layers)"
    wrapper = _bare(deepseek_v2.DeepseekV2ForCausalLM)
    wrapper.model = model
    setter(wrapper, wanted)
    return "requested with DeepseekV2ForCausalLM.set_aux_hidden_state_layers"


def check_mla_drafter(workdir: Path) -> str:
    from vllm.model_executor.models import ModelRegistry

    if MLA_DRAFTER_ARCH not in ModelRegistry.get_supported_archs():
        raise Skip(f"vLLM {_vllm_version()} has no MLA EAGLE-3 drafter class ({MLA_DRAFTER_ARCH})")
    target = _target_model_config(workdir)
    if not target.use_mla:
        raise ProbeError("the Kimi-shaped target does not use MLA")
    drafter = write_checkpoint(workdir, "eagle3-mla-drafter", MLA_DRAFTER_CONFIG)
    try:
        spec = _speculative_config(target, drafter)
    except Barrier as exc:
        raise ProbeError(f"SpeculativeConfig rejected the target: {exc}") from exc
    draft = spec.draft_model_config
    inner = getattr(getattr(draft.hf_config, "model", None), "model_type", None)
    shape = f"drafter model type {draft.hf_config.model_type}, inner {inner}"
    if not draft.use_mla:
        raise Barrier(f"drafter use_mla False ({shape}) while target use_mla True")
    return f"drafter use_mla True ({shape}), target use_mla True"


def _import_without_torchvision(name: str) -> tuple[Any, list[str]]:
    """Import model module ``name``; where that stops on torchvision, which the verify venv
    leaves out (pinned to the CUDA torch), with each transformers image processor that needs
    it replaced by the same release's PIL one (``image_processing_pil_X``, class ``...Pil``).

    Returns the module and the image-processor modules replaced."""
    import importlib
    import types

    replaced: list[str] = []
    while True:
        try:
            return importlib.import_module(name), replaced
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "torchvision":
                raise
            frames = traceback.extract_tb(exc.__traceback__)
            path = next(
                (
                    Path(f.filename)
                    for f in frames
                    if Path(f.filename).stem.startswith("image_processing_")
                    and "transformers" in Path(f.filename).parts
                ),
                None,
            )
            if path is None or len(replaced) > 8:
                raise
            package = "transformers.models." + path.parent.name
            torchvision_name = f"{package}.{path.stem}"
            pil = importlib.import_module(
                f"{package}.{path.stem.replace('image_processing_', 'image_processing_pil_')}"
            )
            twin = types.ModuleType(torchvision_name)
            twin.__dict__.update(vars(pil))
            for attr, value in vars(pil).items():
                if isinstance(value, type) and attr.endswith("Pil"):
                    setattr(twin, attr.removesuffix("Pil"), value)
            sys.modules[torchvision_name] = twin
            replaced.append(torchvision_name)


def check_eagle3_backbone(workdir: Path, model: str) -> str:
    """The runner's EAGLE-3 setup on the patchset's causal-LM class, then the real backbone
    forward: the aux states must be ``hidden_states + residual`` at the input of each requested
    layer and, where the release's models use ``EagleModelMixin``, the last layer's output for
    the id equal to the layer count."""
    import importlib

    import torch
    from vllm.model_executor.models import interfaces

    module_name, causal_name, backbone_name, attribute, *wrapper_at = model.split(":")
    module: Any = importlib.import_module(module_name)
    causal_cls, backbone_cls = getattr(module, causal_name), getattr(module, backbone_name)
    # The class the runner is handed: a multimodal wrapper, where the patchset names one.
    served_cls, twins = causal_cls, list[str]()
    if wrapper_at:
        wrapper_module, twins = _import_without_torchvision(wrapper_at[0])
        served_cls = getattr(wrapper_module, wrapper_at[1])
    for cls in dict.fromkeys((causal_cls, served_cls)):
        if not interfaces.supports_eagle3(cls):
            raise Barrier(
                f"supports_eagle3() is False for {cls.__name__}: vLLM's runner raises 'Model "
                "does not support EAGLE3 interface but aux_hidden_state_outputs was requested'"
            )
    n = BACKBONE_LAYERS
    backbone, inputs, outputs = _stand_in_backbone(backbone_cls, n)
    causal = _bare(causal_cls)
    setattr(causal, attribute, backbone)
    served = causal
    if served_cls is not causal_cls:
        served = _bare(served_cls)
        served.language_model = causal

    # The name the release's runner calls: 0.18.0 on, the protocol's default; before, the model's.
    getter = getattr(served_cls, "get_eagle3_default_aux_hidden_state_layers", None)
    getter = getter or served_cls.get_eagle3_aux_hidden_state_layers
    default = tuple(getter(served))
    if default != (2, n // 2, n - 3):
        raise Barrier(f"{served_cls.__name__}.{getter.__name__}() is {default}, expected (2, 4, 5)")
    final = hasattr(interfaces, "EagleModelMixin")
    wanted = (*default, n) if final else default
    served_cls.set_aux_hidden_state_layers(served, wanted)

    out = _forward_on_one_rank(module, backbone_cls, backbone)
    if isinstance(out, torch.Tensor):
        raise Barrier(f"{backbone_name}.forward returned one Tensor, no aux states for {wanted}")
    _, aux = out
    expected = [inputs[i] if i < n else outputs[n - 1] for i in wanted]
    if len(aux) != len(expected) or not all(
        torch.equal(a, e) for a, e in zip(aux, expected, strict=False)
    ):
        raise Barrier(f"aux states are not hidden_states + residual at layers {wanted}")
    last = f"; id {n} is the last layer's output" if final else ""
    through = f", asked through {served_cls.__name__}" if served is not causal else ""
    return (
        f"supports_eagle3 True for {causal_name}{through}; default aux layers {default}; "
        f"{backbone_name}.forward returned {len(aux)} aux states equal to hidden_states + "
        f"residual at the input of layers {default} of {n}{last} (replaced: {n} decoder layers "
        "and the final norm by CPU stand-ins, get_pp_group by a single-rank stand-in, models "
        "built with object.__new__"
        + "".join(f"; {t} by its PIL twin, torchvision being left out" for t in twins)
        + ")"
    )


def check_eagle3_model_type(workdir: Path, model: str) -> str:
    """SpeculativeConfig(method="eagle3") for the patchset's model, built from a replica's
    configs (written into ``workdir/replica`` by the runner) as ``vllm serve`` builds it: the
    model-type gate of releases before 0.22.0 raises here."""
    from vllm.config import ModelConfig

    replica = workdir / "replica"
    target = ModelConfig(model=str(replica / "target"), skip_tokenizer_init=True)
    wanted = model.split(":")[1]
    if target.architectures[0] != wanted:
        raise ProbeError(f"the replica resolved to {target.architectures[0]}, not {wanted}")
    spec = _speculative_config(target, str(replica / "drafter"))
    return (
        f"SpeculativeConfig accepted eagle3 for target {wanted} (text model type "
        f"{target.hf_text_config.model_type}); drafter "
        f"{spec.draft_model_config.architectures[0]}, {spec.num_speculative_tokens} tokens"
    )


NESTED_AUX_IDS = [1, 29, 57]
"""Ids a drafter keeps only in its ``eagle_config`` (Kimi-K2.5's MLA drafters do)."""


def _v2_aux_ids(config: dict[str, Any]) -> Any:
    """What the V2 runner's own ``get_eagle3_aux_layers_from_config`` reads from a drafter
    whose config.json is ``config``: the hf_config is transformers' ``PretrainedConfig`` of it,
    as vLLM loads one; the speculative config around it is a stand-in holding only that
    (``SpeculativeConfig`` would load a target and a checkpoint, which the reader never reads)."""
    eagle3_utils = _release_module(ENTRY_MODULES["v2-nested-aux-ids"][0], "its V2 EAGLE-3 utils")
    reader = getattr(eagle3_utils, "get_eagle3_aux_layers_from_config", None)
    if reader is None:
        raise Skip(f"vLLM {_vllm_version()}'s V2 runner has no get_eagle3_aux_layers_from_config")
    from transformers import PretrainedConfig

    stand_in = SimpleNamespace(
        draft_model_config=SimpleNamespace(hf_config=PretrainedConfig(**config))
    )
    return reader(stand_in)


def check_v2_nested_aux_ids(workdir: Path) -> str:
    """The V2 runner's reader on a drafter whose ids sit only in ``eagle_config``, after a
    control whose ids are at the top level (which every release reads)."""
    control = _v2_aux_ids({"eagle_aux_hidden_state_layer_ids": NESTED_AUX_IDS})
    if control != tuple(NESTED_AUX_IDS):
        raise ProbeError(f"the top-level ids {NESTED_AUX_IDS} came back as {control!r}")
    nested = _v2_aux_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": NESTED_AUX_IDS}})
    if nested != tuple(NESTED_AUX_IDS):
        raise Barrier(
            f"get_eagle3_aux_layers_from_config returned {nested!r} for eagle_config's "
            f"eagle_aux_hidden_state_layer_ids {NESTED_AUX_IDS}: the target's default is used"
        )
    return (
        f"get_eagle3_aux_layers_from_config returned {nested!r} for eagle_config's ids, and "
        f"{control!r} for top-level ids (stand-in: the SpeculativeConfig around the "
        f"drafter's PretrainedConfig)"
    )


PP_LAYERS, PP_SPLIT, PP_AUX_IDS = 4, 2, (1, 2, 4)
"""The two-stage run of ``pp-aux-relay``: stage 0 owns layers [0, 2), stage 1 [2, 4); id 2 is
the state at the boundary, id 4 the last layer's output."""


def _pp_rank(first: bool, last: bool) -> Any:
    """Pipeline-parallel state of one of two stages, without a process group."""
    return SimpleNamespace(
        is_first_rank=first, is_last_rank=last, world_size=2, rank_in_group=0 if first else 1
    )


def _pp_stage(deepseek_v2: Any, stage: Any, start: int, end: int) -> tuple[Any, Any]:
    """(causal LM, backbone) of one stage: ``DeepseekV3ForCausalLM`` bare around a stand-in
    ``DeepseekV2Model`` owning layers [start, end), with aux layers requested as the runner
    requests them while ``get_pp_group`` says ``stage``."""
    from vllm.distributed import parallel_state
    from vllm.model_executor.models.utils import make_empty_intermediate_tensors_factory

    for owner in (deepseek_v2, parallel_state):
        replace(owner, "get_pp_group", lambda: stage)
    replace(parallel_state, "model_parallel_is_initialized", lambda: stage.world_size > 1)
    backbone, _, _ = _stand_in_backbone(deepseek_v2.DeepseekV2Model, PP_LAYERS)
    backbone.start_layer, backbone.end_layer = start, end
    backbone.config = SimpleNamespace(hidden_size=backbone.hidden_size)
    model = _bare(deepseek_v2.DeepseekV3ForCausalLM)
    model.model = backbone
    model.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
        ["hidden_states", "residual"], backbone.hidden_size
    )
    model.set_aux_hidden_state_layers(PP_AUX_IDS)
    return model, backbone


def check_pp_aux_relay(workdir: Path) -> str:
    """vLLM's own ``verify_supports_aux_hidden_states_over_pp`` on DeepSeek-V3 and Kimi-K2.5,
    then the release's ``DeepseekV2Model.forward`` run as two pipeline stages in one process:
    stage 0's ``IntermediateTensors`` must fill the slots vLLM's
    ``reserve_aux_intermediate_tensor_slots`` reserves on stage 1, and stage 1's aux states
    must equal those of the same backbone on one stage."""
    import torch

    eagle3_utils = _release_module(ENTRY_MODULES["pp-aux-relay"][0], "its V2 EAGLE-3 utils")
    verify = getattr(eagle3_utils, "verify_supports_aux_hidden_states_over_pp", None)
    if verify is None:
        raise Skip(
            f"vLLM {_vllm_version()}'s V2 runner has no verify_supports_aux_hidden_states_over_pp"
            " (it refuses EAGLE-3 with pipeline parallelism for every model, or has no such runner)"
        )
    from vllm.model_executor.models import deepseek_v2, kimi_k25

    kimi_cls = kimi_k25.KimiK25ForConditionalGeneration
    deepseek = _bare(deepseek_v2.DeepseekV3ForCausalLM)
    deepseek.model = _backbone(PP_LAYERS)
    kimi = _bare(kimi_cls)
    kimi.language_model, _ = _language_model(kimi_cls, PP_LAYERS)
    for model in (deepseek, kimi):
        try:
            verify(model, "eagle3")
        except ValueError as exc:
            raise Barrier(str(exc)) from exc

    # One stage: the reference.
    reference, _ = _pp_stage(deepseek_v2, _single_rank(), 0, PP_LAYERS)
    expected = _forward_on_one_rank(deepseek_v2, deepseek_v2.DeepseekV2Model, reference.model)
    if isinstance(expected, torch.Tensor) or len(expected[1]) != len(PP_AUX_IDS):
        raise ProbeError(f"one stage did not return {len(PP_AUX_IDS)} aux states")
    # Two stages, the first's IntermediateTensors handed to the second.
    embeds = torch.arange(3 * 8, dtype=torch.float32).reshape(3, 8)
    _, first = _pp_stage(deepseek_v2, _pp_rank(True, False), 0, PP_SPLIT)
    sent = deepseek_v2.DeepseekV2Model.forward(
        first,
        input_ids=None,
        positions=torch.arange(3),
        intermediate_tensors=None,
        inputs_embeds=embeds,
    )
    last_model, last = _pp_stage(deepseek_v2, _pp_rank(False, True), PP_SPLIT, PP_LAYERS)
    eagle3_utils.reserve_aux_intermediate_tensor_slots(last_model)
    reserved = last_model.make_empty_intermediate_tensors(3, torch.float32, torch.device("cpu"))
    if set(sent.tensors) != set(reserved.tensors):
        raise Barrier(
            f"stage 0 sent {sorted(sent.tensors)}, stage 1 reserved {sorted(reserved.tensors)}"
        )
    got = deepseek_v2.DeepseekV2Model.forward(
        last,
        input_ids=None,
        positions=torch.arange(3),
        intermediate_tensors=sent,
        inputs_embeds=None,
    )
    if isinstance(got, torch.Tensor):
        raise Barrier("the last stage returned no aux states")
    if len(got[1]) != len(expected[1]) or not all(
        torch.equal(a, b) for a, b in zip(got[1], expected[1], strict=False)
    ):
        raise Barrier(
            f"the last stage returned {len(got[1])} aux states, not the {len(expected[1])} of "
            f"one stage for ids {PP_AUX_IDS}"
        )
    if not torch.equal(got[0], expected[0]):
        raise Barrier("the last stage's hidden states differ from one stage's")
    relayed = sorted(k for k in sent.tensors if k not in ("hidden_states", "residual"))
    return (
        f"verify_supports_aux_hidden_states_over_pp accepts DeepseekV3ForCausalLM and "
        f"{kimi_cls.__name__} for eagle3; DeepseekV2Model.forward as 2 stages (layers "
        f"[0, {PP_SPLIT}) and [{PP_SPLIT}, {PP_LAYERS})) relayed {relayed} into the slots "
        f"reserve_aux_intermediate_tensor_slots reserved, and the last stage returned the "
        f"{len(got[1])} aux states for ids {PP_AUX_IDS} (id {PP_SPLIT} at the boundary) equal "
        f"to one stage's (replaced: decoder layers and the final norm by CPU stand-ins, "
        f"get_pp_group and model_parallel_is_initialized by stage stand-ins, models built with "
        f"object.__new__)"
    )


RUNNERS: dict[str, Callable[..., str]] = {
    "speculative-config": check_speculative_config,
    "eagle3-interface": check_eagle3_interface,
    "mm-image-token": check_mm_image_token,
    "aux-hidden-states": check_aux_hidden_states,
    "mla-drafter": check_mla_drafter,
    "eagle3-backbone": check_eagle3_backbone,
    "eagle3-model-type": check_eagle3_model_type,
    "v2-nested-aux-ids": check_v2_nested_aux_ids,
    "pp-aux-relay": check_pp_aux_relay,
}


def run(check: str, workdir: Path, model: str | None = None) -> dict[str, Any]:
    """Run one check and turn its outcome into the result record."""
    start = time.monotonic()
    try:
        if check in MODEL_CHECKS and (model is None or model.count(":") not in (3, 5)):
            raise ProbeError(
                f"{check} needs --model "
                "MODULE:CAUSAL_LM:BACKBONE:ATTRIBUTE[:WRAPPER_MODULE:WRAPPER]"
            )
        args = (workdir, model) if check in MODEL_CHECKS else (workdir,)
        status, detail = "pass", RUNNERS[check](*args)
    except Skip as exc:
        status, detail = "skip", str(exc)
    except Barrier as exc:
        status, detail = "fail", f"barrier: {exc}"
    except Exception as exc:
        status, detail = "fail", f"error: {_describe(exc)}"
    finally:
        _restore()
    return {
        "check": check,
        "status": status,
        "detail": detail,
        "seconds": round(time.monotonic() - start, 2),
    }


def _describe(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" (at {Path(where[0].filename).name}:{where[0].lineno})" if where else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{at}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", choices=CHECKS, metavar="CHECK")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--model", help="for model checks: MODULE:CAUSAL_LM:BACKBONE:ATTR")
    args = parser.parse_args(argv)
    # vLLM logs to stdout; keep stdout for the result lines by sending the rest,
    # including output from native code, to stderr.
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with os.fdopen(result_fd, "w") as out:
        for check in dict.fromkeys(args.checks):
            workdir = args.workdir / check
            workdir.mkdir(parents=True, exist_ok=True)
            out.write(json.dumps(run(check, workdir, args.model)) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
