"""eagle-mla-detect: let an EAGLE drafter whose inner model type is the patchset's count as MLA.

``SpeculativeConfig`` wraps a drafter's config as model type ``eagle`` with the original
inside. ``is_deepseek_mla`` then checks that inner model type against a short tuple; a
``kimi_k2`` MLA drafter is not on it, so its ``use_mla`` comes out False while the target's is
True. The tuple is found by structure: in ``is_deepseek_mla``, the branch that tests
``... .model_type == "eagle"`` and returns ``... .model.model_type in (...)``.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import describe, extend_bracketed, find_compound, string_values
from patcher.codemods.base import Codemod, Outcome, ShapeError, Status, Tree, match_paths

DESCRIPTION = "Add the model types to the EAGLE branch of is_deepseek_mla."

CANDIDATE_FILES = (
    "vllm/transformers_utils/model_arch_config_convertor.py",
    "vllm/config/model.py",
    "vllm/config/__init__.py",
    "vllm/config.py",
)

IS_DEEPSEEK_MLA = m.FunctionDef(name=m.Name("is_deepseek_mla"))
EAGLE_BRANCH = m.If(
    test=m.Comparison(
        left=m.Attribute(attr=m.Name("model_type")),
        comparisons=[m.ComparisonTarget(operator=m.Equal(), comparator=m.SimpleString())],
    )
)
INNER_MEMBERSHIP = m.Comparison(
    left=m.Attribute(attr=m.Name("model_type")),
    comparisons=[m.ComparisonTarget(operator=m.In(), comparator=m.Tuple() | m.List())],
)


def eagle_branches(function: cst.FunctionDef) -> list[cst.If]:
    """The ``if``/``elif`` branches of ``function`` that test ``model_type == "eagle"``."""
    return [
        cst.ensure_type(node, cst.If)
        for node in find_compound(function.body, EAGLE_BRANCH)
        if cst.ensure_type(
            cst.ensure_type(cst.ensure_type(node, cst.If).test, cst.Comparison)
            .comparisons[0]
            .comparator,
            cst.SimpleString,
        ).evaluated_value
        == "eagle"
    ]


class ExtendTuple(cst.CSTTransformer):
    def __init__(self, literal: cst.Tuple | cst.List, added: list[str]) -> None:
        self.literal, self.added = literal, added

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        if original_node is not self.literal:
            return updated_node
        new = [cst.Element(cst.SimpleString(f'"{value}"')) for value in self.added]
        closing = updated_node.rpar[-1].whitespace_before if updated_node.rpar else None
        if closing is None:
            return updated_node
        elements, closing = extend_bracketed(updated_node.elements, new, closing)
        rpar = [
            *updated_node.rpar[:-1],
            updated_node.rpar[-1].with_changes(whitespace_before=closing),
        ]
        return updated_node.with_changes(elements=elements, rpar=rpar)

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        if original_node is not self.literal:
            return updated_node
        new = [cst.Element(cst.SimpleString(f'"{value}"')) for value in self.added]
        elements, closing = extend_bracketed(
            updated_node.elements, new, updated_node.rbracket.whitespace_before
        )
        return updated_node.with_changes(
            elements=elements,
            rbracket=updated_node.rbracket.with_changes(whitespace_before=closing),
        )


class EagleMlaDetect(Codemod):
    NAME = "eagle-mla-detect"
    DESCRIPTION = DESCRIPTION

    def paths(self, names: Iterable[str]) -> list[str]:
        return match_paths(names, self.options.get("files", CANDIDATE_FILES))

    def transform(self, tree: Tree) -> Outcome:
        applied, present = [], []
        for path in self.paths(tree.source.names()):
            text = tree.text(path)
            if text is None or "is_deepseek_mla" not in text:
                continue  # a cheap skip before parsing; matching itself is structural
            module = tree.module(path)
            assert module is not None
            for function in find_compound(module, IS_DEEPSEEK_MLA):
                for branch in eagle_branches(cst.ensure_type(function, cst.FunctionDef)):
                    literal = self._inner_types(module, path, branch)
                    listed = string_values(literal) or []
                    missing = [t for t in self.model.types if t not in listed]
                    if not missing:
                        present.append(path)
                        continue
                    module = module.visit(ExtendTuple(literal, missing))
                    tree.update(path, module)
                    applied.append(f"{path}: EAGLE drafters of {', '.join(missing)} count as MLA")
        if applied:
            return Outcome(Status.APPLIED, "; ".join(applied))
        if present:
            return Outcome(Status.PRESENT, f"{', '.join(present)}: model types already listed")
        return Outcome(Status.NOT_NEEDED, "no EAGLE branch in is_deepseek_mla")

    def _inner_types(self, module: cst.Module, path: str, branch: cst.If) -> cst.Tuple | cst.List:
        """The tuple of inner model types the EAGLE branch accepts."""
        found = [
            cst.ensure_type(c, cst.Comparison).comparisons[0].comparator
            for c in m.findall(branch.body, INNER_MEMBERSHIP)
        ]
        literals = [f for f in found if string_values(f) is not None]
        if len(literals) != 1:
            raise ShapeError(
                f"{path}: expected one tuple of inner model types in the EAGLE branch of "
                f"is_deepseek_mla, found {len(literals)}; nearest candidate: "
                f"{describe(module, path, branch)}"
            )
        return cst.ensure_type(literals[0], cst.Tuple | cst.List)  # type: ignore[arg-type]
