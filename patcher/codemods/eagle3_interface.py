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

from patcher.codemods._cst import code, describe, extend_separated
from patcher.codemods.base import Codemod, Outcome, ShapeError, Status, Tree
from patcher.codemods.options import InterfaceOptions

INTERFACE = "SupportsEagle3"
AUX_FIELD = "aux_hidden_state_layers"
SETTER = "set_aux_hidden_state_layers"
GETTER = "get_eagle3_aux_hidden_state_layers"

INTERFACES_IMPORT = m.ImportFrom(
    module=m.Name("interfaces") | m.Attribute(attr=m.Name("interfaces"))
)
SETS_AUX_FIELD = m.Assign(
    targets=[m.AssignTarget(m.Attribute(m.Name("self"), m.Name(AUX_FIELD)))]
) | m.AnnAssign(target=m.Attribute(m.Name("self"), m.Name(AUX_FIELD)))
OVER_LAYERS = m.For(
    iter=m.MatchIfTrue(
        lambda node: bool(m.findall(node, m.Attribute(m.Name("self"), m.Name("layers"))))
    )
)
LAYER_CALL_ASSIGN = m.Assign(
    targets=[m.AssignTarget(m.Tuple(elements=[m.Element(m.Name()), m.Element(m.Name())]))],
    value=m.Call(),
)


def statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


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


def method(code: str) -> cst.FunctionDef:
    return cst.ensure_type(statement(code), cst.FunctionDef).with_changes(
        leading_lines=[cst.EmptyLine(indent=False)]
    )


def backbone_methods(attribute: str) -> dict[str, str]:
    """The interface's two methods for a class holding the backbone as ``self.<attribute>``."""
    return {
        SETTER: f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
        f"    self.{attribute}.{AUX_FIELD} = layers\n",
        GETTER: f"def {GETTER}(self) -> tuple[int, ...]:\n"
        f"    num_layers = len(self.{attribute}.layers)\n"
        f"    return (2, num_layers // 2, num_layers - 3)\n",
    }


def find_class(module: cst.Module, name: str) -> cst.ClassDef | None:
    for node in module.body:
        if isinstance(node, cst.ClassDef) and node.name.value == name:
            return node
    return None


def find_method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for node in cls.body.body:
        if isinstance(node, cst.FunctionDef) and node.name.value == name:
            return node
    return None


def base_names(cls: cst.ClassDef) -> set[str]:
    return {arg.value.value for arg in cls.bases if isinstance(arg.value, cst.Name)}


def top_level_imports(module: cst.Module) -> list[cst.ImportFrom]:
    """``from .interfaces import ...`` statements at the top of the module."""
    return [
        cst.ensure_type(small, cst.ImportFrom)
        for statement in module.body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if m.matches(small, INTERFACES_IMPORT)
    ]


def replace_top_level(module: cst.Module, replacements: dict[int, cst.CSTNode]) -> cst.Module:
    """The module with top-level nodes (or a small statement inside one) swapped by identity."""
    body = []
    for statement in module.body:
        if id(statement) in replacements:
            body.append(replacements[id(statement)])
        elif isinstance(statement, cst.SimpleStatementLine) and any(
            id(small) in replacements for small in statement.body
        ):
            smalls = [replacements.get(id(small), small) for small in statement.body]
            body.append(statement.with_changes(body=smalls))
        else:
            body.append(statement)
    return module.with_changes(body=body)


def with_interface(import_node: cst.ImportFrom) -> cst.ImportFrom:
    """The import with the interface appended; never called on ``import *``."""
    assert not isinstance(import_node.names, cst.ImportStar)
    names = extend_separated(list(import_node.names), [cst.ImportAlias(cst.Name(INTERFACE))])
    return import_node.with_changes(names=names)


def implement(cls: cst.ClassDef, add_base: bool, methods: list[cst.FunctionDef]) -> cst.ClassDef:
    if add_base:
        cls = cls.with_changes(
            bases=extend_separated(list(cls.bases), [cst.Arg(cst.Name(INTERFACE))])
        )
    if methods:
        body = cst.ensure_type(cls.body, cst.IndentedBlock)
        cls = cls.with_changes(body=body.with_changes(body=[*body.body, *methods]))
    return cls


class BackboneEdit:
    """Makes the backbone's ``forward`` capture auxiliary hidden states, as vLLM 0.18.0 does."""

    def __init__(self, path: str, module: cst.Module, backbone: str) -> None:
        self.path, self.module, self.backbone = path, module, backbone
        self.changed: list[str] = []

    def apply(self, cls: cst.ClassDef) -> cst.ClassDef:
        body = cst.ensure_type(cls.body, cst.IndentedBlock)
        statements = []
        for node in body.body:
            if isinstance(node, cst.FunctionDef) and node.name.value == "__init__":
                node = self._init(node)
            elif isinstance(node, cst.FunctionDef) and node.name.value == "forward":
                node = self._forward(node)
            statements.append(node)
        return cls.with_changes(body=body.with_changes(body=statements)) if self.changed else cls

    def _init(self, node: cst.FunctionDef) -> cst.FunctionDef:
        if m.findall(node, SETS_AUX_FIELD):
            return node
        body = cst.ensure_type(node.body, cst.IndentedBlock)
        line = statement(f"self.{AUX_FIELD}: tuple[int, ...] = ()")
        self.changed.append(f"{self.backbone}.__init__ sets {AUX_FIELD}")
        return node.with_changes(body=body.with_changes(body=[*body.body, line]))

    def _forward(self, node: cst.FunctionDef) -> cst.FunctionDef:
        if m.findall(node, m.Name("aux_hidden_states")):
            return node
        body = list(cst.ensure_type(node.body, cst.IndentedBlock).body)
        loops = [i for i, s in enumerate(body) if m.matches(s, OVER_LAYERS)]
        if len(loops) != 1:
            raise ShapeError(
                f"{self.path}: expected one loop over self.layers in {self.backbone}.forward, "
                f"found {len(loops)}; nearest candidate: "
                f"{describe(self.module, self.path, node)}"
            )
        loop = cst.ensure_type(body[loops[0]], cst.For)
        calls = [s for s in m.findall(loop.body, LAYER_CALL_ASSIGN)]
        if not isinstance(loop.target, cst.Name) or not calls:
            raise ShapeError(
                f"{self.path}: expected `for layer in ...: hidden_states, residual = layer(...)` "
                f"in {self.backbone}.forward; nearest candidate: "
                f"{describe(self.module, self.path, body[loops[0]])}"
            )
        hidden, residual = (
            cst.ensure_type(e.value, cst.Name).value
            for e in cst.ensure_type(
                cst.ensure_type(calls[0], cst.Assign).targets[0].target, cst.Tuple
            ).elements
        )
        if not isinstance(body[-1], cst.SimpleStatementLine) or not m.matches(
            body[-1].body[0], m.Return()
        ):
            raise ShapeError(f"{self.path}: {self.backbone}.forward does not end in a return")
        capture = statement(
            f"if idx in self.{AUX_FIELD}:\n    aux_hidden_states.append({hidden} + {residual})\n"
        )
        loop_body = cst.ensure_type(loop.body, cst.IndentedBlock)
        new_loop = enumerated(loop, "idx").with_changes(
            body=loop_body.with_changes(body=[capture, *loop_body.body])
        )
        early_return = statement(
            f"if len(aux_hidden_states) > 0:\n    return {hidden}, aux_hidden_states\n"
        ).with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        new_body = [
            *body[: loops[0]],
            statement("aux_hidden_states = []").with_changes(leading_lines=loop.leading_lines),
            new_loop.with_changes(leading_lines=[]),
            *body[loops[0] + 1 : -1],
            early_return,
            body[-1],
        ]
        self.changed.append(f"{self.backbone}.forward returns auxiliary hidden states")
        return node.with_changes(body=node.body.with_changes(body=new_body))


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
        changed = self._text_model(tree, text_module, text_class)
        if options.wrapper_module is not None and options.wrapper_class is not None:
            wrapper_module, wrapper_class = options.wrapper_module, options.wrapper_class
            if not tree.defines_class(wrapper_module, wrapper_class):
                return self.unsupported(
                    tree, wrapper_class, f"{wrapper_module} has no {wrapper_class}"
                )
            changed += self._wrapper(tree, wrapper_module, wrapper_class)
        if changed:
            return Outcome(Status.APPLIED, "; ".join(changed))
        return Outcome(Status.PRESENT, f"{text_class} already implements {INTERFACE}")

    def _text_model(self, tree: Tree, path: str, class_name: str) -> list[str]:
        module = tree.module(path)
        assert module is not None
        backbone = self.options.backbone_class
        backbone_class = find_class(module, backbone)
        if backbone_class is None:
            raise ShapeError(f"{path}: no class {backbone}, the backbone named by the patchset")
        editor = BackboneEdit(path, module, backbone)
        edited = editor.apply(backbone_class)
        if editor.changed:
            module = replace_top_level(module, {id(backbone_class): edited})
        methods = backbone_methods(self.options.backbone_attribute)
        return editor.changed + self._interface(
            tree, path, module, class_name, methods, dirty=bool(editor.changed)
        )

    def _wrapper(self, tree: Tree, path: str, class_name: str) -> list[str]:
        module = tree.module(path)
        assert module is not None
        cls = find_class(module, class_name)
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
        if holds_backbone:  # older wrappers hold the backbone itself, not the causal-LM class
            methods = backbone_methods(attribute)
        else:
            methods = {
                SETTER: f"def {SETTER}(self, layers: tuple[int, ...]) -> None:\n"
                f"    self.{attribute}.{SETTER}(layers)\n",
                GETTER: f"def {GETTER}(self) -> tuple[int, ...]:\n"
                f"    return self.{attribute}.{GETTER}()\n",
            }
        return self._interface(tree, path, module, class_name, methods)

    def _interface(
        self,
        tree: Tree,
        path: str,
        module: cst.Module,
        class_name: str,
        methods: dict[str, str],
        dirty: bool = False,
    ) -> list[str]:
        """Import the interface, add it to the class's bases, add the missing methods."""
        changed = []
        imports = top_level_imports(module)
        imported = any(
            isinstance(node.names, cst.ImportStar)
            or any(a.evaluated_name == INTERFACE for a in node.names)
            for node in imports
        )
        if not imports and not imported:
            raise ShapeError(f"{path}: no `from .interfaces import ...` to add {INTERFACE} to")
        import_node = None if imported else imports[0]
        cls = find_class(module, class_name)
        assert cls is not None
        add_base = INTERFACE not in base_names(cls)
        missing = [method(code) for name, code in methods.items() if find_method(cls, name) is None]
        if import_node is not None:
            changed.append(f"{path} imports {INTERFACE}")
        if add_base:
            changed.append(f"{class_name} subclasses {INTERFACE}")
        changed += [f"{class_name}.{f.name.value}" for f in missing]
        if changed:
            replacements: dict[int, cst.CSTNode] = {id(cls): implement(cls, add_base, missing)}
            if import_node is not None:
                replacements[id(import_node)] = with_interface(import_node)
            module = replace_top_level(module, replacements)
        if changed or dirty:
            tree.update(path, module)
        return changed
