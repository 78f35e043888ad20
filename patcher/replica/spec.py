"""One architecture's replica recipe, read from its TOML file and checked as a whole."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from patcher.defaults import DRAFTER_KINDS
from patcher.errors import PatcherError

REFERENCE = "$"
"""A string value ``$name`` stands for the target text config's value of ``name``."""


@dataclass(frozen=True)
class TokenizerSpec:
    vocab_size: int
    special: tuple[str, ...]
    bos: str
    eos: str
    unk: str
    pad: str
    ids: dict[str, str]
    """config.json attribute -> the special token whose id it holds."""
    words: tuple[str, ...] = ()
    """Ordinary tokens of more than one character, looked up by a model's vLLM code in the
    vocabulary (Gemma 3's processor reads ``vocab["\\n\\n"]``); the encoder never makes them."""
    named: dict[str, str] = field(default_factory=dict)
    """Tokenizer attribute -> special token (``extra_special_tokens``): what a processor reads
    from the tokenizer, as Gemma 3's reads ``tokenizer.boi_token``."""


@dataclass(frozen=True)
class ReplicaSpec:
    """How to write a tiny replica of ``architecture`` and its EAGLE-3 drafters."""

    architecture: str
    text_config: str
    """The key of the text model's config inside config.json; empty for a text-only model."""
    vision_config: str
    default_drafter: str
    serve_args: tuple[str, ...]
    chat_template: str
    tokenizer: TokenizerSpec
    target: dict[str, Any]
    preprocessor: dict[str, Any]
    """``file`` and ``content``; empty when the architecture needs none."""
    shrink_text: dict[str, Any]
    shrink_vision: dict[str, Any]
    drafters: dict[str, dict[str, Any]]
    drafter_env: dict[str, dict[str, str]]
    drafter_needs: dict[str, str] = field(default_factory=dict)
    """Drafter kind -> the module a release must have to load it."""
    remote_processor: dict[str, Any] = field(default_factory=dict)
    """Remote code for releases without the file ``unless_release_has``: ``code`` (a file of
    ``patcher/replica/remote_code``), its ``auto_map`` and the ``config`` keys it goes with."""
    images: bool = False
    """Its server takes an image a request (``serve_args`` allow one): a serving run sends one."""
    torchvision: bool = False
    """Its vLLM module imports transformers' torchvision-backed image processor, so the serving
    venv gets torchvision's Python half (``patcher.serving.venv``)."""
    serve_when: tuple[dict[str, Any], ...] = ()
    """More ``serve_args`` and ``--speculative-config`` keys (``speculative``) for a release that
    has the file ``release_has``."""
    backbone: dict[str, str] = field(default_factory=dict)
    """The text model alone, for an ``architecture`` transformers lacks (remote code): its
    ``architecture`` and ``model_type`` as transformers names them, and the ``drafter`` kind
    served beside it. What needs transformers' class (the acceptance proof) replicates this."""
    acceptance: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The acceptance proof's recipe for this replica where it is not the default: a table per
    part of ``patcher.acceptance.recipe.Recipe`` (``pretrain``, ``data``, ...), checked there."""

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> ReplicaSpec:
        """Every problem in the file at once, in one message."""
        problems = []
        for key in ("architecture", "target", "tokenizer", "drafter"):
            if key not in data:
                problems.append(f"missing [{key}]" if key != "architecture" else f"no {key}")
        drafters = data.get("drafter", {})
        unknown = sorted(set(drafters) - set(DRAFTER_KINDS))
        if unknown:
            problems.append(f"unknown drafter kinds {unknown} (known: {', '.join(DRAFTER_KINDS)})")
        default = data.get("default_drafter", "llama")
        if default not in drafters:
            problems.append(f"default_drafter {default!r} has no [drafter.{default}]")
        tok = data.get("tokenizer", {})
        named = set(tok.get("special", ()))
        for role in ("bos", "eos", "unk", "pad"):
            if tok.get(role) not in named:
                problems.append(f"tokenizer.{role} is not one of tokenizer.special")
        for table in ("ids", "named"):
            for attribute, token in tok.get(table, {}).items():
                if token not in named:
                    problems.append(
                        f"tokenizer.{table}.{attribute} names {token!r}, not a special token"
                    )
        for number, when in enumerate(data.get("serve_when", ()), 1):
            if not isinstance(when, dict) or not isinstance(when.get("release_has"), str):
                problems.append(f"serve_when #{number} names no release_has file")
        problems += backbone_problems(data.get("backbone"), data, drafters)
        problems += acceptance_problems(data.get("acceptance"))
        if problems:
            raise PatcherError(f"{where}: {'; '.join(problems)}")
        shrink = data.get("shrink", {})
        return cls(
            architecture=data["architecture"],
            text_config=data.get("text_config", ""),
            vision_config=data.get("vision_config", ""),
            default_drafter=default,
            serve_args=tuple(data.get("serve_args", ())),
            chat_template=data.get("chat_template", ""),
            tokenizer=TokenizerSpec(
                vocab_size=int(tok.get("vocab_size", 1024)),
                special=tuple(tok["special"]),
                bos=tok["bos"],
                eos=tok["eos"],
                unk=tok["unk"],
                pad=tok["pad"],
                ids=dict(tok.get("ids", {})),
                named=dict(tok.get("named", {})),
                words=tuple(tok.get("words", ())),
            ),
            target=data["target"],
            preprocessor=data.get("preprocessor", {}),
            shrink_text=shrink.get("text", {}),
            shrink_vision=shrink.get("vision", {}),
            drafters=drafters,
            drafter_env=data.get("drafter_env", {}),
            drafter_needs=data.get("drafter_needs", {}),
            remote_processor=data.get("remote_processor", {}),
            serve_when=tuple(data.get("serve_when", ())),
            images=bool(data.get("images", False)),
            torchvision=bool(data.get("torchvision", False)),
            backbone=dict(data.get("backbone", {})),
            acceptance={part: dict(table) for part, table in data.get("acceptance", {}).items()},
        )


BACKBONE_KEYS = ("architecture", "model_type", "drafter")


def backbone_problems(backbone: Any, data: dict[str, Any], drafters: dict[str, Any]) -> list[str]:
    """What a ``[backbone]`` table lacks: its three names, a text config to take, its drafter."""
    if backbone is None:
        return []
    if not isinstance(backbone, dict):
        return ["backbone is not a table"]
    problems = [
        f"backbone.{key} is not a name"
        for key in BACKBONE_KEYS
        if not isinstance(backbone.get(key), str) or not backbone.get(key)
    ]
    if not data.get("text_config"):
        problems.append("backbone needs text_config: the backbone is the text model")
    if isinstance(backbone.get("drafter"), str) and backbone["drafter"] not in drafters:
        problems.append(f"backbone.drafter {backbone['drafter']!r} has no [drafter.*]")
    return problems


def acceptance_problems(acceptance: Any) -> list[str]:
    """What an ``[acceptance]`` table gets wrong in shape: each part a table of positive
    numbers (which parts and keys exist is the recipe's to say)."""
    if acceptance is None:
        return []
    if not isinstance(acceptance, dict):
        return ["acceptance is not a table"]
    problems = []
    for part, table in acceptance.items():
        if not isinstance(table, dict):
            problems.append(f"acceptance.{part} is not a table")
            continue
        problems += [
            f"acceptance.{part}.{key} is not a positive number"
            for key, value in table.items()
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
        ]
    return problems


def _files() -> Iterator[tuple[str, bytes]]:
    folder = resources.files("patcher.replica") / "architectures"
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            yield entry.name, entry.read_bytes()


def known() -> dict[str, ReplicaSpec]:
    """Every built-in recipe, by the architecture it replicates."""
    specs = {}
    for name, content in _files():
        spec = ReplicaSpec.parse(tomllib.loads(content.decode()), name)
        specs[spec.architecture] = spec
    return specs


def for_architecture(architecture: str | None) -> ReplicaSpec:
    """The recipe for ``architecture``; otherwise a one-line error listing the supported ones."""
    specs = known()
    if architecture not in specs:
        raise PatcherError(
            f"no replica for architecture {architecture!r}; supported: {', '.join(sorted(specs))}"
        )
    return specs[architecture]


def resolve(value: Any, text: dict[str, Any]) -> Any:
    """``value`` with each ``$name`` replaced by the text config's value, recursively."""
    if isinstance(value, str) and value.startswith(REFERENCE):
        name = value[len(REFERENCE) :]
        if name not in text:
            raise PatcherError(f"the text config has no {name!r} for {value!r}")
        return text[name]
    if isinstance(value, dict):
        return {key: resolve(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, text) for item in value]
    return value
