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
``for i in range(self.start_layer, self.end_layer): layer = self.layers[i]``. A backbone whose
layers add their own residual and return one tensor (``hidden_states = layer(...)``, Step-3.5's)
carries no ``residual`` anywhere in its forward: the tensor between layers is then the whole
residual stream, and that is what is kept (``residual`` is ``None`` to the mixin's hook, as
vLLM's own Granite writes it).

A multimodal wrapper that holds the causal-LM class (``wrapper_module``, ``wrapper_class``) gets
the interface too, since the worker asks it of the class it serves: with the mixin, the
protocol's defaults find the backbone through the wrapper's ``language_model``; without it, the
wrapper delegates the setter and getter to the causal-LM class.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import (
    appended,
    base_names,
    describe,
    edit_class,
    edit_method,
    find_class,
    find_method,
    statement,
    with_bases,
)
from patcher.codemods._templates import (
    AUX,
    AUX_FIELD,
    INTERFACE,
    SELF_LAYERS,
    SETTER,
    aux_field_init,
    capture,
    early_return,
    enumerated,
    getter_code,
    implement,
    layer_calls,
    setter_code,
    with_imports,
)
from patcher.codemods.base import Codemod, Outcome, ShapeError, Status, Tree
from patcher.codemods.options import INTERFACES_MODULE, BackboneOptions

MIXIN = "EagleModelMixin"
MIXIN_HOOK = "_maybe_add_hidden_state"
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
    residual: str | None  # None where the layers return one tensor, their residual added


RESIDUAL = m.Name("residual")


def single_state_calls(node: cst.CSTNode) -> list[str]:
    """The name each ``hidden_states = layer(..., hidden_states, ...)`` in ``node`` assigns,
    ``node`` itself included: a layer called by name that passes the state through."""
    call = m.Assign(
        targets=[m.AssignTarget(m.SaveMatchedNode(m.Name(), "hidden"))],
        value=m.SaveMatchedNode(m.Call(func=m.Name()), "call"),
    )
    names = []
    for found in m.extractall(node, call):
        hidden = cst.ensure_type(found["hidden"], cst.Name).value
        args = cst.ensure_type(found["call"], cst.Call).args
        if any(m.matches(arg.value, m.Name(hidden)) for arg in args):
            names.append(hidden)
    return names


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
        calls: dict[int, tuple[str, str | None]] = {
            i: found[0]
            for i, s in enumerate(statements)
            if isinstance(s, cst.SimpleStatementLine) and (found := layer_calls(s.body[0]))
        }
        if not calls and not m.findall(forward, RESIDUAL):  # one state: the residual added
            singles = {
                i: single_state_calls(s.body[0])
                for i, s in enumerate(statements)
                if isinstance(s, cst.SimpleStatementLine)
            }
            calls = {i: (names[0], None) for i, names in singles.items() if names}
        if len(calls) != 1:
            raise self.fail("expected `hidden_states, residual = layer(...)` in the loop", node)
        ((call, (hidden, residual)),) = calls.items()
        last = body[-1]
        if not (
            isinstance(last, cst.SimpleStatementLine)
            and m.matches(last.body[0], m.Return(m.Name(hidden)))
        ):
            raise self.fail(f"expected it to end in `return {hidden}`", last)
        return Loop(loops[0], node, counter, call, hidden, residual)

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
        states = f"{loop.hidden}, {loop.residual or 'None'}"
        if mixin:
            first = statement(
                f"{AUX} = self.{MIXIN_HOOK}(\n    [], self.start_layer, {states}\n)\n"
            )
            after = statement(f"self.{MIXIN_HOOK}(\n    {AUX}, {counter} + 1, {states}\n)\n")
            inner.insert(loop.call + 1, after)
        else:
            first = statement(f"{AUX} = []")
            if loop.residual is None:
                kept = statement(
                    f"if {counter} in self.{AUX_FIELD}:\n    {AUX}.append({loop.hidden})\n"
                )
            else:
                kept = capture(counter, loop.hidden, loop.residual)
            inner.insert(loop.call, kept)
        node = node.with_changes(
            body=cst.ensure_type(node.body, cst.IndentedBlock).with_changes(body=inner),
            leading_lines=[],
        )
        body[loop.index : loop.index + 1] = [
            first.with_changes(leading_lines=loop.node.leading_lines),
            node,
        ]
        body[-1:] = [early_return(loop.hidden), body[-1]]
        return forward.with_changes(body=forward.body.with_changes(body=body))


class Eagle3Backbone(Codemod[BackboneOptions]):
    DESCRIPTION = "Implement SupportsEagle3 on a decoder backbone's causal-LM class."

    def paths(self, names: Iterable[str]) -> list[str]:
        wanted = {INTERFACES_MODULE, self.options.module, self.options.wrapper_module or ""}
        return sorted(wanted & set(names))

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
        wrapper = options.wrapper_module
        if wrapper is not None and not tree.defines_class(wrapper, options.wrapper_class or ""):
            return self.unsupported(
                tree, options.wrapper_class or "", f"{wrapper} has no class {options.wrapper_class}"
            )
        if INTERFACE in self._ancestors(module, causal_lm):
            if self._wrap(tree, protocol):
                return Outcome(Status.APPLIED, "; ".join(self.context.changes))
            return Outcome(Status.PRESENT, f"{options.causal_lm} already implements {INTERFACE}")
        edited_backbone = self._backbone(module, backbone, protocol)
        edited_causal_lm = self._causal_lm(causal_lm, protocol)
        module = edit_class(module, options.backbone, lambda _: edited_backbone)
        module = edit_class(module, options.causal_lm, lambda _: edited_causal_lm)
        names = [MIXIN, INTERFACE] if protocol.mixin else [INTERFACE]
        module, _ = with_imports(module, options.module, names)
        tree.update(options.module, module)
        self._wrap(tree, protocol)
        style = f"{MIXIN} style" if protocol.mixin else f"{INTERFACE} methods style"
        changes = "; ".join(self.context.changes)
        return Outcome(Status.APPLIED, f"{changes} ({style} of this release)")

    def _wrap(self, tree: Tree, protocol: Protocol) -> bool:
        """Give the wrapper the interface, if the patchset names one that lacks it."""
        options = self.options
        if options.wrapper_module is None or options.wrapper_class is None:
            return False
        path, name = options.wrapper_module, options.wrapper_class
        attribute = options.wrapper_attribute
        module = tree.module(path)
        assert module is not None
        cls = find_class(module, name)
        assert cls is not None
        if INTERFACE in self._ancestors(module, cls):
            return False
        methods: list[str] = []
        if not protocol.mixin:
            methods = [
                f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
                f"    self.{attribute}.{SETTER}(layers)\n",
                f"def {protocol.getter}(self) -> tuple[int, ...]:\n"
                f"    return self.{attribute}.{protocol.getter}()\n",
            ]
        module = edit_class(module, name, lambda c: implement(c, methods))
        module, _ = with_imports(module, path, [INTERFACE])
        tree.update(path, module)
        self.report(f"{name} subclasses {INTERFACE}")
        for method in [SETTER, protocol.getter] if methods else []:
            self.report(f"{name}.{method}")
        return True

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

    def _backbone(self, module: cst.Module, cls: cst.ClassDef, protocol: Protocol) -> cst.ClassDef:
        name, path = self.options.backbone, self.options.module
        forward = find_method(cls, "forward")
        if forward is None:
            raise ShapeError(
                f"{path}: {name} has no forward; nearest candidate: {describe(module, path, cls)}"
            )
        new_forward = BackboneForward(path, module, name).rewrite(forward, protocol.mixin)
        cls = edit_method(cls, "forward", lambda _: new_forward)
        self.report(f"{name}.forward returns auxiliary hidden states")
        if protocol.mixin:
            self.report(f"{name} subclasses {MIXIN}")
            return with_bases(cls, [MIXIN])
        if find_method(cls, "__init__") is None:
            raise ShapeError(f"{path}: {name} has no __init__ to set {AUX_FIELD} in")
        self.report(f"{name}.__init__ sets {AUX_FIELD}")
        return edit_method(cls, "__init__", lambda init: appended(init, aux_field_init()))

    def _causal_lm(self, cls: cst.ClassDef, protocol: Protocol) -> cst.ClassDef:
        attribute = self.options.attribute
        methods: list[str] = []
        if not protocol.mixin:
            methods = [setter_code(attribute), getter_code(attribute, protocol.getter)]
        elif attribute != "model":  # the protocol's defaults look for the backbone at .model
            methods = [
                f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
                f"    self.{attribute}._set_aux_hidden_state_layers(layers)\n",
                getter_code(attribute, protocol.getter),
            ]
        self.report(f"{self.options.causal_lm} subclasses {INTERFACE}")
        for name in [SETTER, protocol.getter] if methods else []:
            self.report(f"{self.options.causal_lm}.{name}")
        return implement(cls, methods)
