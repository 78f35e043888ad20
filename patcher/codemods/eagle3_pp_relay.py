"""eagle3-pp-relay: let a backbone hand its EAGLE-3 aux hidden states on across pipeline stages.

From vLLM 0.30.0 the V2 model runner accepts EAGLE-3 with pipeline parallelism only where the
target's inner model sets ``supports_aux_hidden_states_over_pp``
(``verify_supports_aux_hidden_states_over_pp`` raises "<Model> does not support eagle3 with
pipeline parallelism" otherwise). Models that set it, Llama among them, inherit
``EagleModelMixin``: a stage that is not the last puts the aux states it took into its
``IntermediateTensors`` under ``AUX_HIDDEN_STATE_KEY{slot}``, the runner reserves those slots and
passes them on, and the last stage puts the states from upstream before its own.

This does the same for a backbone that takes each aux state at the *input* of the layer it
names (``if idx in self.aux_hidden_state_layers`` at the top of each iteration, and the last
layer's output on the last stage only), as ``DeepseekV2Model`` does, whose code is kept: it
inherits the mixin, sets the flag, packs its states on a stage that is not the last and puts
the upstream ones first on the last. With that convention the state at a stage boundary belongs
to the later stage, while the mixin counts it to the earlier one (``bisect_right``), so the
backbone counts the states taken upstream with ``bisect_left``. The causal-LM class's setter
goes through the mixin's, which works out that layout.

Releases whose runner has no such check refuse EAGLE-3 with PP for every model, so this is
``unsupported`` there; a backbone that sets the flag already is ``present``. Any other shape of
the runner, the mixin or the backbone is ``failed``: this never claims a release relays.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from typing import cast

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import (
    base_names,
    describe,
    edit_class,
    edit_method,
    find_class,
    find_method,
    statement,
    with_bases,
    with_methods,
)
from patcher.codemods._templates import AUX_FIELD, SELF_LAYERS, SETTER, layer_calls, with_imports
from patcher.codemods.base import (
    Codemod,
    Outcome,
    ShapeError,
    Signature,
    Status,
    Tree,
    moved,
    python_ast,
)
from patcher.codemods.options import RelayOptions

FLAG = "supports_aux_hidden_states_over_pp"
MIXIN = "EagleModelMixin"
CHECK = "verify_supports_aux_hidden_states_over_pp"
RESERVE = "reserve_aux_intermediate_tensor_slots"
LAYOUT = "_cache_aux_pp_layout"
MIXIN_SETTER = "_set_aux_hidden_state_layers"
PACK = "pack_local_aux_hidden_states"
COLLECT = "collect_remote_aux_hidden_states"
MIXIN_METHODS = (MIXIN_SETTER, LAYOUT, PACK, COLLECT)
REMOTE = "remote_aux_hidden_states"
STATES = "intermediate_tensors"

SELF_AUX_FIELD = m.Attribute(m.Name("self"), m.Name(AUX_FIELD))
OVER_LAYERS = m.For(iter=m.MatchIfTrue(lambda node: bool(m.findall(node, SELF_LAYERS))))
SETS_FLAG = m.SimpleStatementLine(
    body=[
        m.Assign(targets=[m.AssignTarget(m.Name(FLAG))])
        | m.AnnAssign(target=m.Name(FLAG), value=m.DoNotCare())
    ]
)
UPSTREAM_COUNT = m.Call(
    func=m.Name("bisect_right") | m.Attribute(attr=m.Name("bisect_right")),
    args=[m.Arg(SELF_AUX_FIELD), m.Arg(m.Attribute(m.Name("self"), m.Name("start_layer")))],
)
"""``bisect_right(self.aux_hidden_state_layers, self.start_layer)``: the mixin counts a state
at a stage boundary to the stage before it."""
INTERMEDIATE = m.Call(func=m.Name("IntermediateTensors"), args=[m.Arg(m.Dict())])
END_CAPTURE = m.If(
    test=m.Comparison(
        left=m.Attribute(m.Name("self"), m.Name("end_layer")),
        comparisons=[m.ComparisonTarget(m.In(), SELF_AUX_FIELD)],
    )
)


def capture_of(counter: str) -> m.If:
    """``if <counter> in self.aux_hidden_state_layers: ...``: a state taken in the loop."""
    return m.If(
        test=m.Comparison(
            left=m.Name(counter), comparisons=[m.ComparisonTarget(m.In(), SELF_AUX_FIELD)]
        )
    )


def appends_to(node: cst.CSTNode) -> set[str]:
    """The names ``node`` calls ``.append`` on."""
    found = m.findall(
        node,
        m.Call(func=m.Attribute(value=m.SaveMatchedNode(m.Name(), "list"), attr=m.Name("append"))),
    )
    return {cst.ensure_type(call, cst.Call).func.value.value for call in found}  # type: ignore[attr-defined]


def returns_pair(aux: str) -> m.Return:
    """``return <hidden>, <aux>``: the last stage's answer with its aux states."""
    return m.Return(value=m.Tuple(elements=[m.Element(), m.Element(m.Name(aux))]))


LAYOUT_CODE = (
    f"def {LAYOUT}(self) -> None:\n"
    "    # This backbone takes each aux state at the input of the layer it names, so the state\n"
    "    # at a stage boundary is the later stage's: the stages before hold the ids below\n"
    "    # start_layer, where the mixin counts the boundary to them too.\n"
    f"    super().{LAYOUT}()\n"
    "    if self._aux_slot_base_cached:\n"
    "        from bisect import bisect_left\n"
    "\n"
    f"        upstream = bisect_left(self.{AUX_FIELD}, self.start_layer)\n"
    "        if self._aux_upstream_total_cached:\n"
    "            self._aux_upstream_total_cached = upstream\n"
    "        self._aux_slot_base_cached = upstream\n"
)


def function_lines(name: str, module: ast.Module) -> Iterator[int]:
    """Where ``module`` defines a function ``name``, at any depth."""
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            yield node.lineno


PP_CHECK = Signature(f"def {CHECK}", (CHECK.lower(),), functools.partial(function_lines, CHECK))


class Eagle3PpRelay(Codemod[RelayOptions]):
    DESCRIPTION = (
        "Make a backbone relay its EAGLE-3 aux hidden states across pipeline stages, "
        "as vLLM's Llama does, and say so (supports_aux_hidden_states_over_pp)."
    )

    def paths(self, names: Iterable[str]) -> list[str]:
        options = self.options
        wanted = {options.module, options.interfaces_module, options.runner_module}
        return sorted(wanted & set(names))

    def transform(self, tree: Tree) -> Outcome:
        options = self.options
        runner = options.runner_module
        missing = self._runner_lacks(tree, runner)
        if missing:
            why = (
                f"{runner} has no {' or '.join(missing)}: this release's runner does not relay "
                "aux hidden states across pipeline stages for any model"
            )
            return moved(tree, PP_CHECK, why) or Outcome(Status.UNSUPPORTED, why)
        self._mixin(tree, options.interfaces_module)
        path, backbone_name = options.module, options.backbone
        for name in (backbone_name, options.causal_lm):
            if not tree.defines_class(path, name):
                return self.unsupported(tree, name, f"{path} has no {name}")
        module = tree.module(path)
        assert module is not None
        backbone = find_class(module, backbone_name)
        assert backbone is not None
        statements = cst.ensure_type(backbone.body, cst.IndentedBlock).body
        flag = [s for s in statements if m.matches(s, SETS_FLAG)]
        if flag:
            said = describe(module, path, flag[0])
            value = cst.ensure_type(flag[0], cst.SimpleStatementLine).body[0]
            if not m.matches(
                value, m.Assign(value=m.Name("True")) | m.AnnAssign(value=m.Name("True"))
            ):
                raise ShapeError(f"{said}: {backbone_name} sets {FLAG}, but not to True")
            return Outcome(Status.PRESENT, f"{said}: {backbone_name} relays its aux states already")
        importing, imported = with_imports(module, path, [MIXIN])
        if imported:
            self.report(f"{path} imports {MIXIN}")
        relaying = edit_class(
            importing, backbone_name, lambda cls: self._backbone(importing, path, cls)
        )
        setting = edit_class(
            relaying, options.causal_lm, lambda cls: self._setter(relaying, path, cls)
        )
        tree.update(path, setting)
        return Outcome(Status.APPLIED, "; ".join(self.context.changes))

    def _runner_lacks(self, tree: Tree, path: str) -> list[str]:
        """The runner functions the relay needs that ``path`` does not define at top level."""
        text = tree.text(path) if tree.exists(path) else None
        if text is None:
            return [CHECK]
        try:
            defined = {
                node.name for node in python_ast(text).body if isinstance(node, ast.FunctionDef)
            }
        except (SyntaxError, ValueError) as error:
            raise ShapeError(f"{path}:{getattr(error, 'lineno', 1)}: not valid Python") from error
        return [name for name in (CHECK, RESERVE) if name not in defined]

    def _mixin(self, tree: Tree, path: str) -> None:
        """ShapeError unless ``path`` has the mixin whose methods and layout the relay uses."""
        module = tree.module(path) if tree.exists(path) else None
        mixin = None if module is None else find_class(module, MIXIN)
        if module is None or mixin is None:
            raise ShapeError(f"{path}: no {MIXIN}, though the runner checks {FLAG}")
        lacking = [name for name in MIXIN_METHODS if find_method(mixin, name) is None]
        if lacking:
            raise ShapeError(f"{path}: {MIXIN} has no {', '.join(lacking)}")
        layout = find_method(mixin, LAYOUT)
        assert layout is not None
        if not m.findall(layout, UPSTREAM_COUNT):
            raise ShapeError(
                f"{path}: {MIXIN}.{LAYOUT} does not count the states upstream with "
                f"bisect_right(self.{AUX_FIELD}, self.start_layer); nearest candidate: "
                f"{describe(module, path, layout)}"
            )

    def _backbone(self, module: cst.Module, path: str, cls: cst.ClassDef) -> cst.ClassDef:
        name = cls.name.value
        if find_method(cls, LAYOUT) is not None:
            raise ShapeError(f"{path}: {name} has its own {LAYOUT} but does not set {FLAG}")
        forward = find_method(cls, "forward")
        if forward is None:
            raise ShapeError(f"{path}: {name} defines no forward")
        new_forward = self._forward(module, path, name, forward)
        body = cst.ensure_type(cls.body, cst.IndentedBlock)
        statements = [new_forward if node is forward else node for node in body.body]
        first_method = next(
            (i for i, node in enumerate(statements) if isinstance(node, cst.FunctionDef)),
            len(statements),
        )
        flag = statement(f"{FLAG} = True\n").with_changes(
            leading_lines=[
                cst.EmptyLine(
                    comment=cst.Comment(
                        "# Aux states taken on a stage that is not the last travel in its "
                        "IntermediateTensors."
                    )
                )
            ]
        )
        statements.insert(first_method, flag)
        cls = cls.with_changes(body=body.with_changes(body=statements))
        if MIXIN not in base_names(cls):
            cls = with_bases(cls, [MIXIN])
            self.report(f"{name} inherits {MIXIN}")
        self.report(f"{name}.{FLAG} = True")
        self.report(f"{name}.{LAYOUT} counts a boundary state to the later stage")
        return with_methods(cls, [LAYOUT_CODE])

    def _forward(
        self, module: cst.Module, path: str, name: str, forward: cst.FunctionDef
    ) -> cst.FunctionDef:
        """``forward`` packing the stage's aux states for the next and, on the last stage,
        putting the states from upstream before its own."""
        where = describe(module, path, forward)
        params = {p.name.value for p in forward.params.params}
        if STATES not in params:
            raise ShapeError(f"{where}: {name}.forward takes no {STATES}")
        if m.findall(forward, m.Name(REMOTE)):
            raise ShapeError(f"{where}: {name}.forward already uses the name {REMOTE}")
        body = list(cst.ensure_type(forward.body, cst.IndentedBlock).body)
        loops = [i for i, s in enumerate(body) if m.matches(s, OVER_LAYERS)]
        if len(loops) != 1:
            raise ShapeError(
                f"{where}: expected one loop over self.layers in {name}.forward, found {len(loops)}"
            )
        at = loops[0]
        loop = cst.ensure_type(body[at], cst.For)
        aux = self._loop_capture(module, path, name, loop)
        initial = [
            i
            for i, s in enumerate(body[:at])
            if m.matches(
                s,
                m.SimpleStatementLine(
                    body=[
                        m.Assign(targets=[m.AssignTarget(m.Name(aux))], value=m.List(elements=[]))
                    ]
                ),
            )
        ]
        if not initial:
            raise ShapeError(f"{where}: no `{aux} = []` before the loop over self.layers")
        sends = [i for i, s in enumerate(body) if m.findall(s, m.Return(value=INTERMEDIATE))]
        pairs = [i for i, s in enumerate(body) if m.findall(s, returns_pair(aux))]
        ends = [i for i, s in enumerate(body) if m.matches(s, END_CAPTURE)]
        if len(sends) != 1 or sends[0] < at:
            raise ShapeError(
                f"{where}: expected one `return IntermediateTensors({{...}})` after the loop "
                f"(the stages before the last), found {len(sends)}"
            )
        if len(pairs) != 1 or pairs[0] < sends[0]:
            raise ShapeError(
                f"{where}: expected one `return ..., {aux}` after the stages before the last "
                f"return, found {len(pairs)}"
            )
        if any(i < sends[0] for i in ends):
            raise ShapeError(
                f"{where}: every stage takes the state after its last layer, so a state at a "
                "stage boundary would be taken twice"
            )
        pack = cst.parse_expression(f"{{**self.{PACK}({aux})}}")
        packed = cst.ensure_type(pack, cst.Dict).elements[0]

        def with_pack(found: cst.CSTNode, _: object) -> cst.CSTNode:
            node = cst.ensure_type(found, cst.Call)
            held = cst.ensure_type(node.args[0].value, cst.Dict)
            elements = list(held.elements)
            if elements and elements[-1].comma is cst.MaybeSentinel.DEFAULT:
                elements[-1] = elements[-1].with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                )
            new = held.with_changes(elements=[*elements, packed])
            return node.with_changes(args=[node.args[0].with_changes(value=new)])

        body[sends[0]] = cast(cst.BaseStatement, m.replace(body[sends[0]], INTERMEDIATE, with_pack))
        body.insert(pairs[0], statement(f"{aux} = {REMOTE} + {aux}\n"))
        collect = statement(f"{REMOTE} = self.{COLLECT}({STATES})\n")
        first = cst.ensure_type(body[initial[0]], cst.SimpleStatementLine)
        body[initial[0]] = first.with_changes(leading_lines=[])
        body.insert(initial[0], collect.with_changes(leading_lines=first.leading_lines))
        self.report(
            f"{name}.forward sends its aux states on in IntermediateTensors and, on the last "
            "stage, puts those from upstream first"
        )
        return forward.with_changes(body=forward.body.with_changes(body=body))

    def _loop_capture(self, module: cst.Module, path: str, name: str, loop: cst.For) -> str:
        """The list the loop collects aux states in; ShapeError unless each is taken at the
        input of the layer its id names (before the layer runs)."""
        where = describe(module, path, loop)
        target = loop.target
        if not (
            isinstance(target, cst.Tuple)
            and len(target.elements) == 2
            and all(isinstance(e.value, cst.Name) for e in target.elements)
        ):
            raise ShapeError(f"{where}: expected `for idx, layer in enumerate(...)` in {name}")
        counter, layer = (cst.ensure_type(e.value, cst.Name).value for e in target.elements)
        steps = list(cst.ensure_type(loop.body, cst.IndentedBlock).body)
        runs = m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Name(layer)))])
        captures = [i for i, s in enumerate(steps) if m.matches(s, capture_of(counter))]
        calls = [i for i, s in enumerate(steps) if m.matches(s, runs) and layer_calls(s)]
        if len(captures) != 1 or len(calls) != 1 or captures[0] > calls[0]:
            raise ShapeError(
                f"{where}: expected one `if {counter} in self.{AUX_FIELD}: ...` before "
                f"`hidden_states, residual = {layer}(...)` in {name}.forward (a state taken at "
                f"a layer's input); found {len(captures)} capture(s), {len(calls)} layer call(s)"
            )
        lists = appends_to(steps[captures[0]])
        if len(lists) != 1:
            raise ShapeError(f"{where}: the capture appends to {sorted(lists) or 'nothing'}")
        return lists.pop()

    def _setter(self, module: cst.Module, path: str, cls: cst.ClassDef) -> cst.ClassDef:
        """The causal-LM class's setter through the mixin's, which works out the PP layout."""
        setter = find_method(cls, SETTER)
        if setter is None:  # SupportsEagle3's default goes through the mixin's setter
            return cls
        attribute = self.options.attribute
        params = [p.name.value for p in setter.params.params]
        body = cst.ensure_type(setter.body, cst.IndentedBlock).body
        direct = m.SimpleStatementLine(
            body=[
                m.Assign(
                    targets=[
                        m.AssignTarget(
                            m.Attribute(
                                m.Attribute(m.Name("self"), m.Name(attribute)), m.Name(AUX_FIELD)
                            )
                        )
                    ],
                    value=m.Name(params[-1]) if len(params) == 2 else m.DoNotCare(),
                )
            ]
        )
        if len(params) != 2 or len(body) != 1 or not m.matches(body[0], direct):
            raise ShapeError(
                f"{describe(module, path, setter)}: expected {cls.name.value}.{SETTER} to be "
                f"`self.{attribute}.{AUX_FIELD} = {params[-1] if params else 'layers'}`"
            )
        new = statement(f"self.{attribute}.{MIXIN_SETTER}({params[1]})\n")
        self.report(f"{cls.name.value}.{SETTER} sets them through {MIXIN}.{MIXIN_SETTER}")
        return edit_method(
            cls, SETTER, lambda f: f.with_changes(body=f.body.with_changes(body=[new]))
        )
