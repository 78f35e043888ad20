"""A checkpoint folder's configs and safetensors headers, read without touching the weights.

A safetensors file starts with an 8-byte little-endian length and that many bytes of JSON naming
each tensor's dtype, shape and byte span. Only those bytes are read, the length bounded first,
and the JSON checked to be that shape, so a garbled file is a one-line error, not a guess.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.errors import PatcherError
from patcher.files import Missing, check_regular, read_json

CONFIG = "config.json"
MAX_CONFIG_BYTES = 16 << 20
MAX_HEADER_BYTES = 100 << 20
"""safetensors itself refuses headers above 100 MB; a real drafter's is a few kilobytes."""


def read_config(folder: Path, what: str) -> dict[str, Any]:
    """``folder/config.json`` as a JSON object, or a one-line error naming what is wrong."""
    if not folder.is_dir():
        raise PatcherError(f"{what} {folder}: no such folder")
    path = folder / CONFIG
    try:
        data = read_json(path, "config", MAX_CONFIG_BYTES)
    except Missing as error:
        raise PatcherError(f"{what} {folder} has no {CONFIG}") from error
    if not isinstance(data, dict):
        raise PatcherError(f"{path}: a JSON {type(data).__name__}, not an object")
    problems = config_problems(data)
    if problems:
        raise PatcherError(f"{path}: {'; '.join(problems)}")
    return data


SIZES = (
    "num_hidden_layers",
    "hidden_size",
    "vocab_size",
    "target_hidden_size",
    "draft_vocab_size",
)
"""Keys read as sizes: a positive integer each where present (``"4096"``, 4096.0, NaN, null or
-1 is refused, never read as absent)."""

SUB_CONFIGS = ("text_config", "transformer_layer_config", "eagle_config")
"""Keys holding a config of their own: an object (or null, as transformers writes an unset one)."""


def config_problems(config: dict[str, Any], prefix: str = "") -> list[str]:
    """Every value of a key patcher reads that has the wrong type, nested configs included, so
    one error names them all."""
    problems = []
    for key in SIZES:
        if key in config and not positive_integer(config[key]):
            problems.append(f"{prefix}{key} is {shown(config[key])}, not a positive integer")
    names = config.get("architectures")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) and n for n in names)
    ):
        problems.append(f"{prefix}architectures is {shown(names)}, not a list of class names")
    for key in SUB_CONFIGS:
        inner = config.get(key)
        if isinstance(inner, dict):
            problems += config_problems(inner, f"{prefix}{key}.")
        elif inner is not None:
            problems.append(f"{prefix}{key} is {shown(inner)}, not an object")
    return problems


def positive_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def shown(value: object) -> str:
    """A JSON value as the file spells it, cut short: ``"4096"``, ``null``, ``NaN``."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True, kw_only=True)
class Tensor:
    """One tensor as a safetensors header declares it; three of its fields are strings, so it
    is built by name."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str


def read_header(path: Path) -> dict[str, Tensor]:
    """The tensors a safetensors file declares, from its header alone."""
    check_regular(path, "safetensors file")  # a FIFO would block the open
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise PatcherError(
                    f"{path}: not a safetensors file (shorter than its 8-byte length)"
                )
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES or length < 2:
                raise PatcherError(f"{path}: not a safetensors file (a header of {length} bytes)")
            raw = handle.read(length)
    except OSError as error:
        raise PatcherError(f"cannot read {path}: {error.strerror or error}") from error
    if len(raw) < length:
        raise PatcherError(f"{path}: truncated safetensors header ({len(raw)} of {length} bytes)")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise PatcherError(f"{path}: unreadable safetensors header ({error})") from error
    if not isinstance(header, dict):
        raise PatcherError(f"{path}: unreadable safetensors header (not a JSON object)")
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("dtype"), str)
            and isinstance(entry.get("shape"), list)
            and all(isinstance(d, int) and d >= 0 for d in entry["shape"])
            and isinstance(entry.get("data_offsets"), list)
            and len(entry["data_offsets"]) == 2
        ):
            raise PatcherError(f"{path}: unreadable safetensors header (tensor {name!r})")
        tensors[name] = Tensor(
            name=name, dtype=entry["dtype"], shape=tuple(entry["shape"]), file=path.name
        )
    return tensors


def checkpoint_tensors(folder: Path) -> dict[str, Tensor]:
    """Every tensor the folder's ``*.safetensors`` files declare (none if it has none)."""
    tensors: dict[str, Tensor] = {}
    for path in sorted(folder.glob("*.safetensors")):
        tensors.update(read_header(path))
    return tensors


def weight_files(folder: Path) -> list[Path]:
    """The files of a checkpoint folder other than its config: weights, index, tokenizer."""
    return sorted(p for p in folder.iterdir() if p.name != CONFIG and p.is_file())
