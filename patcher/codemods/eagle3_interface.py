"""eagle3-interface: give a text model and its multimodal wrapper the ``SupportsEagle3`` interface.

The worker refuses EAGLE-3 unless the target implements ``SupportsEagle3``. As upstream did in
vLLM 0.18.0, the text model's backbone collects ``hidden_states + residual`` at the input of each
layer in ``aux_hidden_state_layers`` and returns them beside the final states; the causal-LM
class sets those layers and defaults them to ``(2, n // 2, n - 3)``; the wrapper delegates both.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from patcher.codemods import _templates as templates
from patcher.codemods._cst import (
    appended,
    base_names,
    describe,
    edit_class,
    find_class,
    find_method,
    statement,
)
from patcher.codemods._templates import AUX, AUX_FIELD, GETTER, INTERFACE, SELF_LAYERS, SETTER
from patcher.codemods.base import Codemod, Outcome, ShapeError, Status, Tree
from patcher.codemods.options import InterfaceOptions

SETS_AUX_FIELD = m.Assign(
    targets=[m.AssignTarget(m.Attribute(m.Name("self"), m.Name(AUX_FIELD)))]
) | m.AnnAssign(target=m.Attribute(m.Name("self"), m.Name(AUX_FIELD)))
OVER_LAYERS = m.For(iter=m.MatchIfTrue(lambda node: bool(m.findall(node, SELF_LAYERS))))


APPENDS_AUX = m.Call(func=m.Attribute(value=m.Name(AUX), attr=m.Name("append")))
RETURNS_AUX = m.Return(
    value=m.MatchIfTrue(lambda v: v is not None and bool(m.findall(v, m.Name(AUX))))
)


def captures(forward: cst.FunctionDef) -> bool:
    """Whether ``forward`` already collects the auxiliary states: a loop over ``self.layers``
    appends to ``aux_hidden_states``, and a return hands them back. Using the name alone is not
    enough (issue 28)."""
    loops = m.findall(forward, OVER_LAYERS)
    appends = any(m.findall(loop, APPENDS_AUX) for loop in loops)
    return appends and bool(m.findall(forward, RETURNS_AUX))


def backbone_methods(attribute: str) -> dict[str, str]:
    """The interface's two methods for a class holding the backbone as ``self.<attribute>``."""
    return {SETTER: templates.setter_code(attribute), GETTER: templates.getter_code(attribute)}


def delegating_methods(attribute: str) -> dict[str, str]:
    """The interface's two methods for a wrapper whose ``self.<attribute>`` implements it."""
    return {
        SETTER: f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
        f"    self.{attribute}.{SETTER}(layers)\n",
        GETTER: f"def {GETTER}(self) -> tuple[int, ...]:\n    return self.{attribute}.{GETTER}()\n",
    }


def binds(cls: cst.ClassDef, attribute: str) -> bool:
    """Whether a method of ``cls`` assigns ``self.<attribute>``: what the methods added read."""
    target = m.Attribute(m.Name("self"), m.Name(attribute))
    return bool(
        m.findall(cls, m.Assign(targets=[m.ZeroOrMore(), m.AssignTarget(target), m.ZeroOrMore()]))
        or m.findall(cls, m.AnnAssign(target=target))
    )


def does_nothing(method: cst.FunctionDef) -> bool:
    """A method whose body only raises, passes or is ``...`` (a docstring aside): a stub."""
    # an indented block's statements, or a one-line body's small statements (``: raise X``)
    for node in method.body.body:
        smalls = node.body if isinstance(node, cst.SimpleStatementLine) else [node]
        for small in smalls:
            if isinstance(small, cst.Raise | cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, cst.SimpleString | cst.ConcatenatedString | cst.Ellipsis
            ):
                continue
            return False
    return True


def rebound_later(module: cst.Module, class_name: str) -> cst.CSTNode | None:
    """A module-level statement after ``class_name``'s definition that binds that name again,
    or deletes or sets an attribute of the class: the class vLLM loads is not the one patched."""
    seen = False
    for node in module.body:
        named = isinstance(node, cst.ClassDef | cst.FunctionDef) and node.name.value == class_name
        if not seen:
            seen = named
            continue
        if named:
            return node
        stores = list(m.findall(node, m.AssignTarget(target=m.Name(class_name))))
        stores += m.findall(node, m.ImportAlias(asname=m.AsName(name=m.Name(class_name))))
        stores += m.findall(
            node,
            m.Call(
                func=m.Name("delattr") | m.Name("setattr"),
                args=[m.Arg(m.Name(class_name)), m.ZeroOrMore()],
            ),
        )
        if stores and not isinstance(node, cst.ClassDef | cst.FunctionDef):
            return node
    return None


class Eagle3Interface(Codemod[InterfaceOptions]):
    DESCRIPTION = "Implement SupportsEagle3 on the text model and its multimodal wrapper."

    def paths(self, names: Iterable[str]) -> list[str]:
        options = self.options
        wanted = {options.interfaces_module, options.text_module, options.wrapper_module or ""}
        return sorted(wanted & set(names))

    def transform(self, tree: Tree) -> Outcome:
        options = self.options
        interfaces = options.interfaces_module
        if not tree.defines_class(interfaces, INTERFACE):
            return Outcome(Status.UNSUPPORTED, f"{interfaces} has no {INTERFACE} interface")
        text_module, text_class = options.text_module, options.text_class
        if not tree.defines_class(text_module, text_class):
            return self.unsupported(tree, text_class, f"{text_module} has no {text_class}")
        self._text_model(tree, text_module, text_class)
        if options.wrapper_module is not None and options.wrapper_class is not None:
            wrapper_module, wrapper_class = options.wrapper_module, options.wrapper_class
            if not tree.defines_class(wrapper_module, wrapper_class):
                return self.unsupported(
                    tree, wrapper_class, f"{wrapper_module} has no {wrapper_class}"
                )
            self._wrapper(tree, wrapper_module, wrapper_class)
        if self.context.changes:
            return Outcome(Status.APPLIED, "; ".join(self.context.changes))
        return Outcome(Status.PRESENT, f"{text_class} already implements {INTERFACE}")

    def _text_model(self, tree: Tree, path: str, class_name: str) -> None:
        original = module = tree.module(path)
        assert module is not None
        backbone = self.options.backbone_class
        backbone_class = find_class(module, backbone)
        if backbone_class is None:
            raise ShapeError(f"{path}: no class {backbone}, the backbone named by the patchset")
        edited = self._backbone(path, module, backbone_class)
        if edited is not backbone_class:
            module = edit_class(module, backbone, lambda _: edited)
        methods = backbone_methods(self.options.backbone_attribute)
        module = self._interface(path, module, class_name, methods, self.options.backbone_attribute)
        if module is not original:
            tree.update(path, module)

    def _wrapper(self, tree: Tree, path: str, class_name: str) -> None:
        original = tree.module(path)
        assert original is not None
        cls = find_class(original, class_name)
        assert cls is not None
        attribute = self.options.wrapper_attribute
        init = find_method(cls, "__init__")
        holds_backbone = init is not None and bool(
            m.findall(
                init,
                m.Assign(
                    targets=[m.AssignTarget(m.Attribute(m.Name("self"), m.Name(attribute)))],
                    value=m.Call(func=m.Name(self.options.backbone_class)),
                ),
            )
        )
        # older wrappers hold the backbone itself, not the causal-LM class
        methods = backbone_methods(attribute) if holds_backbone else delegating_methods(attribute)
        module = self._interface(path, original, class_name, methods, attribute)
        if module is not original:
            tree.update(path, module)

    def _interface(
        self,
        path: str,
        module: cst.Module,
        class_name: str,
        methods: dict[str, str],
        attribute: str,
    ) -> cst.Module:
        """Import the interface, add it to the class's bases, add the missing methods (which
        read ``self.<attribute>``). ShapeError where the class vLLM loads would still lack it:
        the name rebound after the class, a method of the interface that is a stub, or an
        attribute the new methods read that the class never sets."""
        later = rebound_later(module, class_name)
        if later is not None:
            raise ShapeError(
                f"{path}: {class_name} is bound again or changed after its class statement, so "
                f"the class vLLM loads is not the one patched; nearest candidate: "
                f"{describe(module, path, later)}"
            )
        module, imported = templates.with_imports(module, path, [INTERFACE])
        if imported:
            self.report(f"{path} imports {INTERFACE}")
        cls = find_class(module, class_name)
        assert cls is not None
        for name in methods:
            method = find_method(cls, name)
            if method is not None and does_nothing(method):
                raise ShapeError(
                    f"{path}: {class_name}.{name} is a stub (it only raises or passes): the "
                    f"interface is declared, not implemented; nearest candidate: "
                    f"{describe(module, path, method)}"
                )
        missing = {name: code for name, code in methods.items() if find_method(cls, name) is None}
        if missing and not binds(cls, attribute):
            raise ShapeError(
                f"{path}: the methods to add read self.{attribute}, which {class_name} never "
                f"sets; nearest candidate: {describe(module, path, cls)}"
            )
        add_base = INTERFACE not in base_names(cls)
        if add_base:
            self.report(f"{class_name} subclasses {INTERFACE}")
        for name in missing:
            self.report(f"{class_name}.{name}")
        if not add_base and not missing:
            return module
        return edit_class(module, class_name, lambda c: templates.implement(c, missing.values()))

    def _backbone(self, path: str, module: cst.Module, cls: cst.ClassDef) -> cst.ClassDef:
        """The backbone's ``forward`` capturing auxiliary hidden states, as vLLM 0.18.0 does;
        ``cls`` itself where it does already."""
        body = cst.ensure_type(cls.body, cst.IndentedBlock)
        statements = []
        for node in body.body:
            if isinstance(node, cst.FunctionDef) and node.name.value == "__init__":
                node = self._init(node)
            elif isinstance(node, cst.FunctionDef) and node.name.value == "forward":
                node = self._forward(path, module, node)
            statements.append(node)
        if all(new is old for new, old in zip(statements, body.body, strict=True)):
            return cls
        return cls.with_changes(body=body.with_changes(body=statements))

    def _init(self, node: cst.FunctionDef) -> cst.FunctionDef:
        if m.findall(node, SETS_AUX_FIELD):
            return node
        self.report(f"{self.options.backbone_class}.__init__ sets {AUX_FIELD}")
        return appended(node, templates.aux_field_init())

    def _forward(self, path: str, module: cst.Module, node: cst.FunctionDef) -> cst.FunctionDef:
        backbone = self.options.backbone_class
        if m.findall(node, m.Name(AUX)):
            if captures(node):
                return node
            raise ShapeError(
                f"{path}: {backbone}.forward uses the name {AUX} but does not both append to it "
                f"in its loop over self.layers and return it; nearest candidate: "
                f"{describe(module, path, node)}"
            )
        body = list(cst.ensure_type(node.body, cst.IndentedBlock).body)
        loops = [i for i, s in enumerate(body) if m.matches(s, OVER_LAYERS)]
        if len(loops) != 1:
            raise ShapeError(
                f"{path}: expected one loop over self.layers in {backbone}.forward, "
                f"found {len(loops)}; nearest candidate: {describe(module, path, node)}"
            )
        loop = cst.ensure_type(body[loops[0]], cst.For)
        calls = templates.layer_calls(loop.body)
        if not isinstance(loop.target, cst.Name) or not calls:
            raise ShapeError(
                f"{path}: expected `for layer in ...: hidden_states, residual = layer(...)` "
                f"in {backbone}.forward; nearest candidate: "
                f"{describe(module, path, body[loops[0]])}"
            )
        hidden, residual = calls[0]
        if not isinstance(body[-1], cst.SimpleStatementLine) or not m.matches(
            body[-1].body[0], m.Return()
        ):
            raise ShapeError(f"{path}: {backbone}.forward does not end in a return")
        loop_body = cst.ensure_type(loop.body, cst.IndentedBlock)
        capture = templates.capture("idx", hidden, residual)
        new_loop = templates.enumerated(loop, "idx").with_changes(
            body=loop_body.with_changes(body=[capture, *loop_body.body])
        )
        new_body = [
            *body[: loops[0]],
            statement(f"{AUX} = []").with_changes(leading_lines=loop.leading_lines),
            new_loop.with_changes(leading_lines=[]),
            *body[loops[0] + 1 : -1],
            templates.early_return(hidden),
            body[-1],
        ]
        self.report(f"{backbone}.forward returns auxiliary hidden states")
        return node.with_changes(body=node.body.with_changes(body=new_body))
