"""eagle3-backbone: give a decoder's causal-LM class ``SupportsEagle3``, the way the release does.

The worker refuses EAGLE-3 unless the target implements ``SupportsEagle3``, and the drafter reads
``hidden_states + residual`` at the input of the requested layers. How a model provides them is
read from the release's own ``interfaces.py``, and written as its Llama is:

- a protocol without defaults (vLLM 0.10.1 to 0.17.1): the backbone keeps
  ``aux_hidden_state_layers`` and collects at the top of each iteration; the causal-LM class
  implements the protocol's setter and getter, whose default is ``(2, n // 2, n - 3)``;
- ``EagleModelMixin`` beside a protocol with defaults (0.18.0 on): the backbone inherits the
  mixin and calls ``_maybe_add_hidden_state`` before the loop and after each layer with
  ``idx + 1``, so the id equal to the layer count is the last layer's output; the causal-LM
  class subclasses the protocol, whose defaults find the backbone at ``.model``.

The backbone must loop over its slice of ``self.layers`` carrying ``hidden_states`` and
``residual``: ``for layer in islice(self.layers, ...)``, ``self.layers[a:b]``, or
``for i in range(self.start_layer, self.end_layer): layer = self.layers[i]``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import describe, extend_separated
from patcher.codemods.base import Codemod, Outcome, ShapeError, Status, Tree
from patcher.codemods.eagle3_interface import (
    INTERFACE,
    base_names,
    enumerated,
    find_class,
    find_method,
    method,
    replace_top_level,
    statement,
    top_level_imports,
)
from patcher.codemods.options import INTERFACES_MODULE, BackboneOptions

MIXIN = "EagleModelMixin"
MIXIN_HOOK = "_maybe_add_hidden_state"
AUX_FIELD = "aux_hidden_state_layers"
SETTER = "set_aux_hidden_state_layers"
AUX = "aux_hidden_states"

SELF_LAYERS = m.Attribute(m.Name("self"), m.Name("layers"))
LAYER_CALL = m.Assign(
    targets=[m.AssignTarget(m.Tuple(elements=[m.Element(m.Name()), m.Element(m.Name())]))],
    value=m.Call(),
)
RANGE_OVER_SLICE = m.Call(
    func=m.Name("range"),
    args=[
        m.Arg(m.Attribute(m.Name("self"), m.Name("start_layer"))),
        m.Arg(m.Attribute(m.Name("self"), m.Name("end_layer"))),
    ],
)


@dataclass(frozen=True)
class Protocol:
    """The release's ``SupportsEagle3``: its getter's name, and whether models use the mixin."""

    getter: str
    mixin: bool


@functools.lru_cache(maxsize=16)
def read_protocol(text: str) -> Protocol | None:
    """The protocol as ``interfaces.py`` declares it, or None where it has no ``SupportsEagle3``.
    Read once per text: every backbone patchset of a matrix run asks it of the same release."""
    classes = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.ClassDef)}
    protocol = classes.get(INTERFACE)
    if protocol is None:
        return None
    methods = [n.name for n in protocol.body if isinstance(n, ast.FunctionDef)]
    getter = next((name for name in methods if name.startswith("get_eagle3")), None)
    if getter is None or SETTER not in methods:
        return None
    mixin = classes.get(MIXIN)
    hooks = {n.name for n in mixin.body if isinstance(n, ast.FunctionDef)} if mixin else set()
    return Protocol(getter, MIXIN_HOOK in hooks)


@dataclass(frozen=True)
class Loop:
    """The backbone's loop over its layers, and the names it carries."""

    index: int  # position in the forward's body
    node: cst.For
    counter: str | None  # the layer index variable, where the loop already has one
    call: int  # position of ``hidden_states, residual = layer(...)`` in the loop's body
    hidden: str
    residual: str


class BackboneForward:
    """Finds the layer loop of a backbone's ``forward`` and makes it collect auxiliary states."""

    def __init__(self, path: str, module: cst.Module, backbone: str) -> None:
        self.path, self.module, self.backbone = path, module, backbone

    def fail(self, what: str, near: cst.CSTNode) -> ShapeError:
        return ShapeError(
            f"{self.path}: {what} in {self.backbone}.forward; nearest candidate: "
            f"{describe(self.module, self.path, near)}"
        )

    def loop(self, forward: cst.FunctionDef) -> Loop:
        body = cst.ensure_type(forward.body, cst.IndentedBlock).body
        loops = [i for i, s in enumerate(body) if isinstance(s, cst.For) and self._over_layers(s)]
        if len(loops) != 1:
            near = next((s for s in body if isinstance(s, cst.For)), forward)
            raise self.fail(f"expected one loop over self.layers, found {len(loops)}", near)
        node = cst.ensure_type(body[loops[0]], cst.For)
        if not isinstance(node.target, cst.Name):
            raise self.fail("expected `for layer in ...` over self.layers", node)
        counter = node.target.value if m.matches(node.iter, RANGE_OVER_SLICE) else None
        statements = cst.ensure_type(node.body, cst.IndentedBlock).body
        calls = [
            i
            for i, s in enumerate(statements)
            if isinstance(s, cst.SimpleStatementLine) and m.matches(s.body[0], LAYER_CALL)
        ]
        if len(calls) != 1:
            raise self.fail("expected `hidden_states, residual = layer(...)` in the loop", node)
        line = cst.ensure_type(statements[calls[0]], cst.SimpleStatementLine)
        assign = cst.ensure_type(line.body[0], cst.Assign)
        pair = cst.ensure_type(assign.targets[0].target, cst.Tuple)
        hidden, residual = (cst.ensure_type(e.value, cst.Name).value for e in pair.elements)
        last = body[-1]
        if not (
            isinstance(last, cst.SimpleStatementLine)
            and m.matches(last.body[0], m.Return(m.Name(hidden)))
        ):
            raise self.fail(f"expected it to end in `return {hidden}`", last)
        return Loop(loops[0], node, counter, calls[0], hidden, residual)

    @staticmethod
    def _over_layers(node: cst.For) -> bool:
        if m.findall(node.iter, SELF_LAYERS):
            return True
        return m.matches(node.iter, RANGE_OVER_SLICE) and bool(m.findall(node.body, SELF_LAYERS))

    def rewrite(self, forward: cst.FunctionDef, mixin: bool) -> cst.FunctionDef:
        loop = self.loop(forward)
        body = list(cst.ensure_type(forward.body, cst.IndentedBlock).body)
        inner = list(cst.ensure_type(loop.node.body, cst.IndentedBlock).body)
        node = loop.node
        counter = loop.counter
        if counter is None:
            counter = "idx"
            node = enumerated(node, counter)
        states = f"{loop.hidden}, {loop.residual}"
        if mixin:
            first = statement(
                f"{AUX} = self.{MIXIN_HOOK}(\n    [], self.start_layer, {states}\n)\n"
            )
            after = statement(f"self.{MIXIN_HOOK}(\n    {AUX}, {counter} + 1, {states}\n)\n")
            inner.insert(loop.call + 1, after)
        else:
            first = statement(f"{AUX} = []")
            capture = statement(
                f"if {counter} in self.{AUX_FIELD}:\n"
                f"    {AUX}.append({loop.hidden} + {loop.residual})\n"
            )
            inner.insert(loop.call, capture)
        node = node.with_changes(
            body=cst.ensure_type(node.body, cst.IndentedBlock).with_changes(body=inner),
            leading_lines=[],
        )
        early_return = statement(
            f"if len({AUX}) > 0:\n    return {loop.hidden}, {AUX}\n"
        ).with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body[loop.index : loop.index + 1] = [
            first.with_changes(leading_lines=loop.node.leading_lines),
            node,
        ]
        body[-1:] = [early_return, body[-1]]
        return forward.with_changes(body=forward.body.with_changes(body=body))


def with_bases(cls: cst.ClassDef, names: list[str]) -> cst.ClassDef:
    missing = [n for n in names if n not in base_names(cls)]
    if not missing:
        return cls
    bases = extend_separated(list(cls.bases), [cst.Arg(cst.Name(n)) for n in missing])
    return cls.with_changes(bases=bases)


def with_methods(cls: cst.ClassDef, methods: Iterable[str]) -> cst.ClassDef:
    body = cst.ensure_type(cls.body, cst.IndentedBlock)
    return cls.with_changes(body=body.with_changes(body=[*body.body, *map(method, methods)]))


def replace_method(cls: cst.ClassDef, old: cst.FunctionDef, new: cst.FunctionDef) -> cst.ClassDef:
    body = cst.ensure_type(cls.body, cst.IndentedBlock)
    statements = [new if node is old else node for node in body.body]
    return cls.with_changes(body=body.with_changes(body=statements))


class Eagle3Backbone(Codemod[BackboneOptions]):
    DESCRIPTION = "Implement SupportsEagle3 on a decoder backbone's causal-LM class."

    def paths(self, names: Iterable[str]) -> list[str]:
        return sorted({INTERFACES_MODULE, self.options.module} & set(names))

    def transform(self, tree: Tree) -> Outcome:
        options = self.options
        interfaces = tree.text(INTERFACES_MODULE)
        protocol = read_protocol(interfaces) if interfaces is not None else None
        if protocol is None:
            return Outcome(Status.UNSUPPORTED, f"{INTERFACES_MODULE} has no {INTERFACE} protocol")
        if not tree.exists(options.module):
            return self.unsupported(tree, options.causal_lm, f"no {options.module} in this release")
        for name in (options.causal_lm, options.backbone):
            if not tree.defines_class(options.module, name):
                return self.unsupported(tree, name, f"{options.module} has no class {name}")
        module = tree.module(options.module)
        assert module is not None
        causal_lm = find_class(module, options.causal_lm)
        backbone = find_class(module, options.backbone)
        assert causal_lm is not None and backbone is not None
        if INTERFACE in self._ancestors(module, causal_lm):
            return Outcome(Status.PRESENT, f"{options.causal_lm} already implements {INTERFACE}")
        changed: list[str] = []
        edited_backbone = self._backbone(module, backbone, protocol, changed)
        edited_causal_lm = self._causal_lm(causal_lm, protocol, changed)
        module = replace_top_level(
            module, {id(backbone): edited_backbone, id(causal_lm): edited_causal_lm}
        )
        module = self._import(module, [MIXIN, INTERFACE] if protocol.mixin else [INTERFACE])
        tree.update(options.module, module)
        style = f"{MIXIN} style" if protocol.mixin else f"{INTERFACE} methods style"
        return Outcome(Status.APPLIED, f"{'; '.join(changed)} ({style} of this release)")

    def _ancestors(self, module: cst.Module, cls: cst.ClassDef) -> set[str]:
        """The class's base names, following bases defined in the same module."""
        seen: set[str] = set()
        pending = [cls]
        while pending:
            for name in base_names(pending.pop()) - seen:
                seen.add(name)
                local = find_class(module, name)
                if local is not None:
                    pending.append(local)
        return seen

    def _backbone(
        self, module: cst.Module, cls: cst.ClassDef, protocol: Protocol, changed: list[str]
    ) -> cst.ClassDef:
        name, path = self.options.backbone, self.options.module
        forward = find_method(cls, "forward")
        if forward is None:
            raise ShapeError(
                f"{path}: {name} has no forward; nearest candidate: {describe(module, path, cls)}"
            )
        new_forward = BackboneForward(path, module, name).rewrite(forward, protocol.mixin)
        cls = replace_method(cls, forward, new_forward)
        changed.append(f"{name}.forward returns auxiliary hidden states")
        if protocol.mixin:
            changed.append(f"{name} subclasses {MIXIN}")
            return with_bases(cls, [MIXIN])
        init = find_method(cls, "__init__")
        if init is None:
            raise ShapeError(f"{path}: {name} has no __init__ to set {AUX_FIELD} in")
        body = cst.ensure_type(init.body, cst.IndentedBlock)
        line = statement(f"self.{AUX_FIELD}: tuple[int, ...] = ()")
        changed.append(f"{name}.__init__ sets {AUX_FIELD}")
        return replace_method(
            cls, init, init.with_changes(body=body.with_changes(body=[*body.body, line]))
        )

    def _causal_lm(self, cls: cst.ClassDef, protocol: Protocol, changed: list[str]) -> cst.ClassDef:
        attribute = self.options.attribute
        methods: list[str] = []
        if not protocol.mixin:
            methods = [
                f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
                f"    self.{attribute}.{AUX_FIELD} = layers\n",
                f"def {protocol.getter}(self) -> tuple[int, ...]:\n"
                f"    num_layers = len(self.{attribute}.layers)\n"
                f"    return (2, num_layers // 2, num_layers - 3)\n",
            ]
        elif attribute != "model":  # the protocol's defaults look for the backbone at .model
            methods = [
                f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
                f"    self.{attribute}._set_aux_hidden_state_layers(layers)\n",
                f"def {protocol.getter}(self) -> tuple[int, ...]:\n"
                f"    num_layers = len(self.{attribute}.layers)\n"
                f"    return (2, num_layers // 2, num_layers - 3)\n",
            ]
        changed.append(f"{self.options.causal_lm} subclasses {INTERFACE}")
        names = [SETTER, protocol.getter] if methods else []
        changed += [f"{self.options.causal_lm}.{n}" for n in names]
        return with_methods(with_bases(cls, [INTERFACE]), methods)

    def _import(self, module: cst.Module, names: list[str]) -> cst.Module:
        """Add ``names`` to the module's ``from .interfaces import ...``."""
        imports = top_level_imports(module)
        star = any(isinstance(node.names, cst.ImportStar) for node in imports)
        if star:
            return module
        if not imports:
            raise ShapeError(
                f"{self.options.module}: no `from .interfaces import ...` to add "
                f"{', '.join(names)} to"
            )
        node = imports[0]
        assert not isinstance(node.names, cst.ImportStar)
        have = {a.evaluated_name for i in imports for a in i.names}  # type: ignore[union-attr]
        new = [cst.ImportAlias(cst.Name(n)) for n in names if n not in have]
        if not new:
            return module
        grown = node.with_changes(names=extend_separated(list(node.names), new))
        return replace_top_level(module, {id(node): grown})
