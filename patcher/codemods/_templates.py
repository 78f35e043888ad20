"""``SupportsEagle3`` as the interface codemods write it: names, matchers and code templates.

Both ``eagle3-interface`` (one model and its multimodal wrapper) and ``eagle3-backbone`` (any
decoder, in the style of the release) make a backbone collect auxiliary hidden states and give
its causal-LM class the interface's setter and getter; the code they write comes from here.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import (
    code,
    edit_first,
    extend_separated,
    statement,
    with_bases,
    with_methods,
)
from patcher.codemods.base import ShapeError

INTERFACE = "SupportsEagle3"
AUX_FIELD = "aux_hidden_state_layers"
SETTER = "set_aux_hidden_state_layers"
GETTER = "get_eagle3_aux_hidden_state_layers"
AUX = "aux_hidden_states"

INTERFACES_IMPORT = m.ImportFrom(
    module=m.Name("interfaces") | m.Attribute(attr=m.Name("interfaces"))
)
SELF_LAYERS = m.Attribute(m.Name("self"), m.Name("layers"))
LAYER_CALL = m.Assign(
    targets=[
        m.AssignTarget(
            m.Tuple(
                elements=[
                    m.Element(m.SaveMatchedNode(m.Name(), "hidden")),
                    m.Element(m.SaveMatchedNode(m.Name(), "residual")),
                ]
            )
        )
    ],
    value=m.Call(),
)
"""``hidden_states, residual = layer(...)``, capturing the two names."""


def layer_calls(node: cst.CSTNode) -> list[tuple[str, str]]:
    """The names of the states each ``hidden_states, residual = layer(...)`` in ``node``
    assigns, ``node`` itself included."""
    pairs = []
    for found in m.extractall(node, LAYER_CALL):
        hidden, residual = (
            cst.ensure_type(found[k], cst.Name).value for k in ("hidden", "residual")
        )
        pairs.append((hidden, residual))
    return pairs


def aux_field_init() -> cst.BaseStatement:
    """The backbone's ``__init__`` line that starts it collecting no layers."""
    return statement(f"self.{AUX_FIELD}: tuple[int, ...] = ()")


def setter_code(attribute: str) -> str:
    """The interface's setter for a class holding the backbone as ``self.<attribute>``."""
    return (
        f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
        f"    self.{attribute}.{AUX_FIELD} = layers\n"
    )


def getter_code(attribute: str, name: str = GETTER) -> str:
    """The interface's getter, defaulting to ``(2, n // 2, n - 3)`` as vLLM's Llama does."""
    return (
        f"def {name}(self) -> tuple[int, ...]:\n"
        f"    num_layers = len(self.{attribute}.layers)\n"
        f"    return (2, num_layers // 2, num_layers - 3)\n"
    )


def capture(counter: str, hidden: str, residual: str) -> cst.BaseStatement:
    """The loop's line that keeps the states entering each requested layer."""
    return statement(
        f"if {counter} in self.{AUX_FIELD}:\n    {AUX}.append({hidden} + {residual})\n"
    )


def early_return(hidden: str) -> cst.BaseStatement:
    """The return of the final states with the auxiliary ones, ahead of the usual return."""
    return statement(f"if len({AUX}) > 0:\n    return {hidden}, {AUX}\n").with_changes(
        leading_lines=[cst.EmptyLine(indent=False)]
    )


def enumerated(loop: cst.For, counter: str) -> cst.For:
    """``loop`` counting its layers: ``for counter, target in enumerate(iter, start=...)``, the
    way vLLM's own EAGLE-3 backbones write it."""
    header = cst.ensure_type(
        statement(
            f"for {counter}, {code(loop.target)} in enumerate(\n"
            f"    {code(loop.iter)},\n"
            f"    start=self.start_layer,\n"
            f"):\n    pass\n"
        ),
        cst.For,
    )
    return loop.with_changes(
        target=header.target, iter=header.iter, whitespace_after_in=header.whitespace_after_in
    )


def with_imports(module: cst.Module, path: str, names: list[str]) -> tuple[cst.Module, list[str]]:
    """``module`` importing ``names`` in its first ``from .interfaces import ...``, and the
    names that were missing; nothing is missing where one imports ``*``."""
    imports = [
        cst.ensure_type(small, cst.ImportFrom)
        for line in module.body
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        if m.matches(small, INTERFACES_IMPORT)
    ]
    if not imports:
        raise ShapeError(f"{path}: no `from .interfaces import ...` to add {', '.join(names)} to")
    have: set[str] = set()
    for node in imports:
        if isinstance(node.names, cst.ImportStar):
            return module, []
        have.update(alias.evaluated_name for alias in node.names)
    missing = [name for name in names if name not in have]
    if missing:
        new = [cst.ImportAlias(cst.Name(name)) for name in missing]
        module = edit_first(
            module,
            INTERFACES_IMPORT,
            lambda node: node.with_changes(names=extend_separated(list(node.names), new)),
        )
    return module, missing


def implement(cls: cst.ClassDef, methods: Iterable[str]) -> cst.ClassDef:
    """``cls`` subclassing the interface (where it does not yet) with ``methods`` added."""
    return with_methods(with_bases(cls, [INTERFACE]), methods)
