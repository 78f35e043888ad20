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

from patcher.codemods import _signatures as signatures
from patcher.codemods._cst import ExtendLiterals, describe, find_compound, string_values
from patcher.codemods.base import FileCodemod, Outcome, ShapeError, Tree, summarize

IS_DEEPSEEK_MLA = m.FunctionDef(name=m.Name("is_deepseek_mla"))
EAGLE: m.MatchIfTrue[cst.BaseExpression] = m.MatchIfTrue(
    lambda node: isinstance(node, cst.SimpleString) and node.evaluated_value == "eagle"
)
EAGLE_BRANCH = m.If(
    test=m.Comparison(
        left=m.Attribute(attr=m.Name("model_type")),
        comparisons=[m.ComparisonTarget(operator=m.Equal(), comparator=EAGLE)],
    )
)
"""``if ... .model_type == "eagle":``, or an ``elif`` of it."""
INNER_MEMBERSHIP = m.Comparison(
    left=m.Attribute(attr=m.Name("model_type")),
    comparisons=[
        m.ComparisonTarget(
            operator=m.In(), comparator=m.SaveMatchedNode(m.Tuple() | m.List(), "types")
        )
    ],
)
"""``... .model_type in (...)``, capturing the literal."""


def eagle_branches(function: cst.FunctionDef) -> list[cst.If]:
    """The ``if``/``elif`` branches of ``function`` that test ``model_type == "eagle"``."""
    return [cst.ensure_type(node, cst.If) for node in find_compound(function.body, EAGLE_BRANCH)]


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
                    module = module.visit(ExtendLiterals({literal: missing}))
                    tree.update(path, module)
                    applied.append(f"{path}: EAGLE drafters of {', '.join(missing)} count as MLA")
        return summarize(
            applied, present, "model types already listed", "no EAGLE branch in is_deepseek_mla"
        )

    def _inner_types(self, module: cst.Module, path: str, branch: cst.If) -> cst.Tuple | cst.List:
        """The tuple of inner model types the EAGLE branch accepts."""
        literals = [
            found["types"]
            for found in m.extractall(branch.body, INNER_MEMBERSHIP)
            if isinstance(found["types"], cst.Tuple | cst.List)
            and string_values(found["types"]) is not None
        ]
        if len(literals) != 1:
            raise ShapeError(
                f"{path}: expected one tuple of inner model types in the EAGLE branch of "
                f"is_deepseek_mla, found {len(literals)}; nearest candidate: "
                f"{describe(module, path, branch)}"
            )
        literal = literals[0]
        assert isinstance(literal, cst.Tuple | cst.List)
        return literal
