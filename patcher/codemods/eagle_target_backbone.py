"""eagle-target-backbone: let the EAGLE proposer share embeddings with a bare-backbone target.

``EagleProposer.load_model`` reads ``target_language_model.model.embed_tokens`` to share the
target's embedding with the drafter. In vLLM 0.15.x, Kimi-K2.5's wrapper holds the bare
``DeepseekV2Model`` as its language model: it has ``embed_tokens`` but no ``.model``, so
loading an EAGLE-3 drafter stops with AttributeError. This reads
``getattr(target_language_model, "model", target_language_model)`` there instead. From vLLM
0.16.0 the wrapper holds a causal-LM class and the proposer reads ``.model`` with ``getattr``;
nothing reads it as a plain attribute, and the codemod has nothing to do.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patcher.codemods import _signatures as signatures
from patcher.codemods._cst import find_compound
from patcher.codemods.base import FileCodemod, Outcome, Tree, summarize

TARGET = "target_language_model"
LOAD_MODEL = m.FunctionDef(name=m.Name("load_model"))
INNER_MODEL = m.Attribute(value=m.Name(TARGET), attr=m.Name("model"))
GUARDED = m.Call(
    func=m.Name("getattr"),
    args=[m.Arg(m.Name(TARGET)), m.Arg(m.SimpleString()), m.Arg(m.Name(TARGET))],
)
REPLACEMENT = cst.parse_expression(f'getattr({TARGET}, "model", {TARGET})')


class GuardInnerModel(m.MatcherDecoratableTransformer):
    """Replaces ``target_language_model.model`` inside ``load_model``."""

    @m.call_if_inside(LOAD_MODEL)
    @m.leave(INNER_MODEL)
    def guard(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        return REPLACEMENT


class EagleTargetBackbone(FileCodemod):
    DESCRIPTION = "Let the EAGLE proposer use a target language model that is its own backbone."
    CANDIDATE_FILES = ("vllm/v1/spec_decode/*.py",)
    SIGNATURE = signatures.TARGET_BACKBONE_READ

    def transform(self, tree: Tree) -> Outcome:
        applied, present = [], []
        for path, module in tree.modules_mentioning(tree.files(self), TARGET):
            functions = find_compound(module, LOAD_MODEL)
            if any(m.findall(f, INNER_MODEL) for f in functions):
                module = module.visit(GuardInnerModel())
                tree.update(path, module)
                applied.append(f"{path}: load_model reads the target's backbone with getattr")
            elif any(m.findall(f, GUARDED) for f in functions):
                present.append(path)
        return summarize(
            applied,
            present,
            "load_model already falls back to the target itself",
            "no load_model reads target_language_model.model",
        )
