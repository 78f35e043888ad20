"""Each codemod's options: the frozen dataclasses ``patcher.schema`` reads a patchset into.

They live apart from the codemods, which import libcst (seconds to load), so that reading a
patchset, and a matrix answered from the cache, never loads a parser.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

INTERFACES_MODULE = "vllm/model_executor/models/interfaces.py"
MODEL_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def python_name(text: str) -> str:
    """A class or attribute name; codemods write it into code, so nothing else may pass."""
    if not text.isidentifier() or keyword.iskeyword(text):
        raise ValueError(f"{text!r} is not a Python identifier")
    return text


def model_type(text: str) -> str:
    """A Hugging Face model type like ``kimi_k2``; codemods write it into a string literal."""
    if not MODEL_TYPE.fullmatch(text):
        raise ValueError(f"{text!r} is not a model type (letters, digits, '_', '.', '-')")
    return text


def module_path(text: str) -> str:
    """A ``.py`` file's path inside the vLLM tree: relative, ``/``-separated, no ``..``."""
    parts = text.split("/")
    if (
        text.startswith("/")
        or "\\" in text
        or not text.endswith(".py")
        or not {"", ".", ".."}.isdisjoint(parts)
    ):
        raise ValueError(f"{text!r} is not a .py path inside the tree like 'vllm/config/model.py'")
    return text


@dataclass(frozen=True)
class FileOptions:
    """The options of a codemod that looks for its code in a few candidate files."""

    files: tuple[str, ...] | None = None  # globs replacing the candidates, if a release moved them


@dataclass(frozen=True, kw_only=True)
class WrapperOptions:
    """The multimodal wrapper, if the served class is one: it holds the causal-LM class as
    ``self.<wrapper_attribute>`` and takes the interface too. Both interface codemods read it,
    so a wrapper is named the same way in every patchset."""

    wrapper_module: str | None = field(default=None, metadata={"parse": module_path})
    wrapper_class: str | None = field(default=None, metadata={"parse": python_name})
    wrapper_attribute: str = field(default="language_model", metadata={"parse": python_name})

    def __post_init__(self) -> None:
        if (self.wrapper_module is None) != (self.wrapper_class is None):
            raise ValueError("wrapper_module and wrapper_class go together: give both or neither")


@dataclass(frozen=True)
class InterfaceOptions(WrapperOptions):
    """Where the text model and its multimodal wrapper are, and which attribute holds what."""

    text_module: str = field(metadata={"parse": module_path})
    text_class: str = field(metadata={"parse": python_name})
    backbone_class: str = field(metadata={"parse": python_name})
    backbone_attribute: str = field(default="model", metadata={"parse": python_name})
    interfaces_module: str = field(default=INTERFACES_MODULE, metadata={"parse": module_path})


@dataclass(frozen=True)
class BackboneOptions(WrapperOptions):
    """Where the model is: its module, causal-LM class, backbone class, and the attribute of the
    causal-LM class holding the backbone; optionally the multimodal wrapper that holds the
    causal-LM class as ``self.<wrapper_attribute>``."""

    module: str = field(metadata={"parse": module_path})
    causal_lm: str = field(metadata={"parse": python_name})
    backbone: str = field(metadata={"parse": python_name})
    attribute: str = field(default="model", metadata={"parse": python_name})


RUNNER_EAGLE3_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"


@dataclass(frozen=True, kw_only=True)
class RelayOptions:
    """A backbone that should hand its aux hidden states on across pipeline stages: its module,
    causal-LM class, backbone class and the causal-LM class's attribute holding it; where the
    release keeps ``EagleModelMixin`` and the V2 runner's PP check."""

    module: str = field(metadata={"parse": module_path})
    causal_lm: str = field(metadata={"parse": python_name})
    backbone: str = field(metadata={"parse": python_name})
    attribute: str = field(default="model", metadata={"parse": python_name})
    interfaces_module: str = field(default=INTERFACES_MODULE, metadata={"parse": module_path})
    runner_module: str = field(default=RUNNER_EAGLE3_UTILS, metadata={"parse": module_path})
