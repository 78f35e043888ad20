"""eagle-mla-detect: let an EAGLE drafter whose inner model type is the patchset's count as MLA.

``SpeculativeConfig`` wraps a drafter's config as model type ``eagle`` with the original
inside. ``is_deepseek_mla`` then checks that inner model type against a short tuple; a
``kimi_k2`` MLA drafter is not on it, so its ``use_mla`` comes out False while the target's is
True. The tuple is found by structure: in ``is_deepseek_mla``, the branch that tests
``... .model_type == "eagle"`` and returns ``... .model.model_type in (...)``.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patcher.codemods import signatures
from patcher.codemods._cst import ExtendLiterals, describe, find_compound, string_values
from patcher.codemods.base import FileCodemod, Outcome, ShapeError, Tree, summarize

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


class EagleMlaDetect(FileCodemod):
    DESCRIPTION = "Add the model types to the EAGLE branch of is_deepseek_mla."
    CANDIDATE_FILES = (
        "vllm/transformers_utils/model_arch_config_convertor.py",
        "vllm/config/model.py",
        "vllm/config/__init__.py",
        "vllm/config.py",
    )
    SIGNATURE = signatures.EAGLE_INNER_MLA_CHECK

    def transform(self, tree: Tree) -> Outcome:
        applied, present = [], []
        for path, module in tree.modules_mentioning(tree.files(self), "deepseek_mla"):
            for function in find_compound(module, IS_DEEPSEEK_MLA):
                for branch in eagle_branches(cst.ensure_type(function, cst.FunctionDef)):
                    literal = self._inner_types(module, path, branch)
                    listed = string_values(literal) or []
                    missing = [t for t in self.model.types if t not in listed]
                    if not missing:
                        present.append(path)
                        continue
                    module = module.visit(ExtendLiterals({id(literal): missing}))
                    tree.update(path, module)
                    applied.append(f"{path}: EAGLE drafters of {', '.join(missing)} count as MLA")
        return summarize(
            applied, present, "model types already listed", "no EAGLE branch in is_deepseek_mla"
        )

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
