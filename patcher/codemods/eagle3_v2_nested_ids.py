"""eagle3-v2-nested-ids: let the V2 model runner read a drafter's nested EAGLE-3 layer ids.

The V1 runner's ``_get_eagle3_aux_layers_from_config`` reads a top-level
``eagle_aux_hidden_state_layer_ids``, else ``eagle_config["eagle_aux_hidden_state_layer_ids"]``.
The V2 runner's ``get_eagle3_aux_layers_from_config`` (the GPU default where Triton is present)
reads the top-level field, DFlash's and DSpark's fields and ``eagle_config["layer_ids"]``, but
not the nested ids, so a drafter that keeps them only there silently gets the target's default
layers (issue 19). This adds that read where nothing earlier gave ids, just before the final
return; every earlier read keeps its precedence.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from patcher.codemods import _signatures as signatures
from patcher.codemods._cst import describe, edit_first, statement
from patcher.codemods.base import FileCodemod, Outcome, ShapeError, Status, Tree, moved

READER = "get_eagle3_aux_layers_from_config"
IDS = "eagle_aux_hidden_state_layer_ids"

NAMES_IDS: m.MatchIfTrue[cst.BaseExpression] = m.MatchIfTrue(
    lambda node: isinstance(node, cst.SimpleString) and node.evaluated_value == IDS
)
READER_FUNCTION = m.FunctionDef(name=m.Name(READER))
TOP_LEVEL_READ = m.Assign(
    targets=[m.AssignTarget(target=m.SaveMatchedNode(m.Name(), "ids"))],
    value=m.Call(
        func=m.Name("getattr"),
        args=[m.Arg(m.SaveMatchedNode(m.Name(), "config")), m.Arg(NAMES_IDS), m.ZeroOrMore()],
    ),
)
"""``layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)``, capturing
the variable the ids accumulate in and the drafter's config."""
NESTED_READ = m.Call(func=m.Attribute(attr=m.Name("get")), args=[m.Arg(NAMES_IDS), m.ZeroOrMore()])
NESTED_SUBSCRIPT = m.Subscript(slice=[m.SubscriptElement(slice=m.Index(value=NAMES_IDS))])
"""``....get("eagle_aux_hidden_state_layer_ids")`` or ``...["eagle_aux_hidden_state_layer_ids"]``:
the nested read, already there."""
TOP_LEVEL_GUARD = m.If(
    test=m.UnaryOperation(
        operator=m.Not(),
        expression=m.Call(
            func=m.Name("hasattr"),
            args=[m.Arg(m.SaveMatchedNode(m.Name(), "config")), m.Arg(NAMES_IDS)],
        ),
    )
)
"""``if not hasattr(hf_config, "eagle_aux_hidden_state_layer_ids"): return None``: the older
readers (0.17.0 to 0.23.0), which give up where the top-level field is missing."""


def is_eagle_config(node: cst.BaseExpression, names: set[str]) -> bool:
    """Whether ``node`` is the drafter's ``eagle_config``: ``getattr(x, "eagle_config", ...)``,
    ``x.eagle_config``, ``x.get("eagle_config")``, ``x["eagle_config"]``, or a name bound to
    one of those in the reader."""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Attribute):
        return node.attr.value == "eagle_config"
    if isinstance(node, cst.Call):
        key = (
            node.args[1].value if isinstance(node.func, cst.Name) and len(node.args) >= 2 else None
        )
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and node.args:
            key = node.args[0].value
        return isinstance(key, cst.SimpleString) and key.evaluated_value == "eagle_config"
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        value = index.value if isinstance(index, cst.Index) else None
        return isinstance(value, cst.SimpleString) and value.evaluated_value == "eagle_config"
    return False


def reads_nested_ids(function: cst.FunctionDef) -> bool:
    """Whether the reader reads ``eagle_aux_hidden_state_layer_ids`` out of ``eagle_config``
    itself, not out of another dict that happens to have the key (issue 28)."""
    names: set[str] = set()
    for assign in m.findall(function, m.Assign(targets=[m.AssignTarget(target=m.Name())])):
        assign = cst.ensure_type(assign, cst.Assign)
        if is_eagle_config(assign.value, names):
            names.add(cst.ensure_type(assign.targets[0].target, cst.Name).value)
    for read in m.findall(function, NESTED_READ | NESTED_SUBSCRIPT):
        if isinstance(read, cst.Call):
            receiver = cst.ensure_type(read.func, cst.Attribute).value
        else:
            receiver = cst.ensure_type(read, cst.Subscript).value
        if is_eagle_config(receiver, names):
            return True
    return False


def returns_ids(ids: str) -> m.BaseMatcherNode:
    """A statement holding ``return tuple(<ids>)``: where the function hands its ids back."""
    return m.Return(value=m.Call(func=m.Name("tuple"), args=[m.Arg(m.Name(ids))]))


def nested_read(condition: str, config: str) -> cst.BaseStatement:
    """Where ``condition`` says nothing gave ids yet: return eagle_config's, if it has them."""
    return statement(
        f"if {condition}:\n"
        f'    eagle_config = getattr({config}, "eagle_config", None)\n'
        f"    if eagle_config and isinstance(eagle_config, dict):\n"
        f'        nested_ids = eagle_config.get("{IDS}")\n'
        f"        if nested_ids and isinstance(nested_ids, (list, tuple)):\n"
        f"            return tuple(nested_ids)\n"
    )


class Eagle3V2NestedIds(FileCodemod):
    DESCRIPTION = (
        "Make the V2 model runner read eagle_config's eagle_aux_hidden_state_layer_ids, "
        "as the V1 runner does."
    )
    CANDIDATE_FILES = ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",)
    SIGNATURE = signatures.V2_NESTED_IDS_UNREAD

    def transform(self, tree: Tree) -> Outcome:
        for path, module in tree.modules_mentioning(tree.files(self), f"def {READER}"):
            function = next((n for n in module.body if m.matches(n, READER_FUNCTION)), None)
            if function is None:
                continue
            if reads_nested_ids(cst.ensure_type(function, cst.FunctionDef)):
                return Outcome(Status.PRESENT, f"{path}: {READER} reads eagle_config's {IDS}")
            tree.update(path, edit_first(module, READER_FUNCTION, self._extended(module, path)))
            self.report(f"{path}: {READER} falls back to eagle_config's {IDS}")
            return Outcome(Status.APPLIED, "; ".join(self.context.changes))
        why = f"the V2 model runner has no {READER} in this tree"
        return moved(tree, signatures.V2_NESTED_IDS_UNREAD, why) or Outcome(Status.UNSUPPORTED, why)

    def _extended(
        self, module: cst.Module, path: str
    ) -> Callable[[cst.FunctionDef], cst.FunctionDef]:
        """The edit of the reader: the nested read put where nothing earlier gave ids, before
        the guard that gives up without the top-level field, else before the final return."""

        def edit(function: cst.FunctionDef) -> cst.FunctionDef:
            block = cst.ensure_type(function.body, cst.IndentedBlock)
            body = list(block.body)
            for i, node in enumerate(body):
                guard = m.extract(node, TOP_LEVEL_GUARD)
                if guard is not None:
                    config = cst.ensure_type(guard["config"], cst.Name).value
                    body.insert(i, nested_read(f'not getattr({config}, "{IDS}", None)', config))
                    return function.with_changes(body=block.with_changes(body=body))
            reads = [found for s in body for found in m.extractall(s, TOP_LEVEL_READ)]
            if len(reads) != 1:
                raise ShapeError(
                    f"{path}: expected one `ids = getattr(config, {IDS!r}, None)` in {READER}, "
                    f"found {len(reads)}; nearest candidate: {describe(module, path, function)}"
                )
            ids = cst.ensure_type(reads[0]["ids"], cst.Name).value
            config = cst.ensure_type(reads[0]["config"], cst.Name).value
            final = [i for i, s in enumerate(body) if m.findall(s, returns_ids(ids))]
            if not final:
                raise ShapeError(
                    f"{path}: {READER} never returns tuple({ids}); nearest candidate: "
                    f"{describe(module, path, function)}"
                )
            body.insert(final[-1], nested_read(f"not {ids}", config))
            return function.with_changes(body=block.with_changes(body=body))

        return edit
