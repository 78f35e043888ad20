"""Each codemod's options: the frozen dataclasses ``patcher.schema`` reads a patchset into.

They live apart from the codemods, which import libcst (seconds to load), so that reading a
patchset, and a matrix answered from the cache, never loads a parser.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERFACES_MODULE = "vllm/model_executor/models/interfaces.py"


@dataclass(frozen=True)
class FileOptions:
    """The options of a codemod that looks for its code in a few candidate files."""

    files: tuple[str, ...] | None = None  # globs replacing the candidates, if a release moved them


@dataclass(frozen=True)
class InterfaceOptions:
    """Where the text model and its multimodal wrapper are, and which attribute holds what."""

    text_module: str
    text_class: str
    backbone_class: str
    backbone_attribute: str = "model"
    wrapper_module: str | None = None
    wrapper_class: str | None = None
    wrapper_attribute: str = "language_model"
    interfaces_module: str = INTERFACES_MODULE

    def __post_init__(self) -> None:
        if (self.wrapper_module is None) != (self.wrapper_class is None):
            raise ValueError("wrapper_module and wrapper_class go together: give both or neither")


@dataclass(frozen=True)
class BackboneOptions:
    """Where the model is: its module, causal-LM class, backbone class, and the attribute of the
    causal-LM class holding the backbone."""

    module: str
    causal_lm: str
    backbone: str
    attribute: str = "model"

    def __post_init__(self) -> None:
        if not self.module.endswith(".py"):
            raise ValueError(f"module must be a .py path in the tree, got {self.module!r}")
