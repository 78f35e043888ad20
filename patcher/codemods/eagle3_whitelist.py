"""eagle3-whitelist: let the EAGLE-3 target check accept the patchset's model types.

``SpeculativeConfig`` raises unless the target's ``hf_text_config.model_type`` contains one of
a hard-coded list of substrings. The list is found by what the check does: an ``if`` that
mentions ``"eagle3"``, tests membership in a ``...model_type`` and raises. Its variable has had
several names, so the list is resolved from the generator the check iterates over.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from patcher.codemods import _signatures as signatures
from patcher.codemods._cst import ExtendLiterals, code, string_values
from patcher.codemods._gate_decision import Decision, decide
from patcher.codemods.base import (
    BOM,
    FileCodemod,
    Outcome,
    ShapeError,
    Tree,
    ast_depth,
    summarize,
)

MENTIONS_EAGLE3 = m.SimpleString(value=m.MatchIfTrue(lambda value: "eagle3" in value))
MODEL_TYPE = m.Attribute(attr=m.Name("model_type"))
SUBSTRING_OF_MODEL_TYPE = m.Comparison(
    comparisons=[m.ComparisonTarget(operator=m.In(), comparator=MODEL_TYPE)]
)
OVER_ITERABLE = m.CompFor(iter=m.SaveMatchedNode(m.DoNotCare(), "iterable"))
ANY_SUBSTRING = m.Call(
    func=m.Name("any"),
    args=[
        m.Arg(
            value=m.GeneratorExp(elt=SUBSTRING_OF_MODEL_TYPE, for_in=OVER_ITERABLE)
            | m.ListComp(elt=SUBSTRING_OF_MODEL_TYPE, for_in=OVER_ITERABLE)
        )
    ],
)
"""``any(s in x.model_type for s in <iterable>)``, capturing the iterable."""
SINGLE_SUBSTRING = m.Comparison(
    left=m.SimpleString(),
    comparisons=[m.ComparisonTarget(operator=m.NotIn(), comparator=MODEL_TYPE)],
)
RAISES = m.If(
    body=m.IndentedBlock(
        body=[m.ZeroOrMore(), m.SimpleStatementLine(body=[m.Raise()]), m.ZeroOrMore()]
    )
)


@dataclass(frozen=True)
class Gate:
    """One EAGLE-3 model-type check and the literal it compares against."""

    node: cst.If
    literal: cst.List | cst.Tuple | None = None  # the substrings, where they are a list
    single: cst.Comparison | None = None  # ``"llama" not in ...model_type``, the oldest shape


class GateFinder(cst.CSTVisitor):
    """Collects the gates, resolving a named list to its last assignment in scope."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, cst.List | cst.Tuple]] = [{}]
        self.gates: list[Gate] = []
        self.unresolved: list[cst.If] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append({})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        """Record list assignments; never descend, since gates are compound statements."""
        for small in node.body:
            if (
                isinstance(small, cst.Assign)
                and isinstance(small.value, cst.List | cst.Tuple)
                and string_values(small.value) is not None
            ):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        self.scopes[-1][target.target.value] = small.value
        return False

    def visit_If(self, node: cst.If) -> None:
        """A check on a model type that raises, or calls what may (a helper): which of them the
        EAGLE-3 path meets is ``gate_decision``'s to say, before and after the edit."""
        if not (m.matches(node, RAISES) or m.findall(node.body, m.Raise() | m.Call())):
            return
        if not m.findall(node.test, MODEL_TYPE):
            return
        for found in m.extractall(node.test, ANY_SUBSTRING):
            iterable = found["iterable"]
            if isinstance(iterable, cst.List | cst.Tuple):
                self.gates.append(Gate(node, literal=iterable))
                return
            if isinstance(iterable, cst.Name):
                for scope in reversed(self.scopes):
                    if iterable.value in scope:
                        self.gates.append(Gate(node, literal=scope[iterable.value]))
                        return
        singles = m.findall(node.test, SINGLE_SUBSTRING)
        if singles:
            self.gates.append(Gate(node, single=cst.ensure_type(singles[0], cst.Comparison)))
            return
        self.unresolved.append(node)


@functools.lru_cache(maxsize=16)
def find_gates(module: cst.Module) -> tuple[tuple[Gate, ...], tuple[cst.If, ...]]:
    """The module's gates, and the checks whose list was not found. They do not depend on the
    model types, and a text's module is parsed once per process (``base.parsed``), so each
    patchset of a matrix run reuses them."""
    finder = GateFinder()
    module.visit(finder)
    return tuple(finder.gates), tuple(finder.unresolved)


def covered(model_type: str, substrings: list[str]) -> bool:
    """vLLM's own rule: a model type passes when any listed substring occurs in it."""
    return any(s in model_type for s in substrings)


class WhitelistExtender(ExtendLiterals):
    """Extends the gates' literals, and turns the oldest single-string gate into a tuple."""

    def __init__(self, gates: Sequence[Gate], additions: dict[int, list[str]]) -> None:
        missing = [(gates[i], types) for i, types in additions.items()]  # gates lacking types
        super().__init__({g.literal: t for g, t in missing if g.literal is not None})
        self.singles: dict[cst.CSTNode, list[str]] = {
            g.single: t for g, t in missing if g.single is not None
        }

    def leave_Comparison(
        self, original_node: cst.Comparison, updated_node: cst.Comparison
    ) -> cst.BaseExpression:
        added = self.singles.get(original_node)
        if not added:
            return updated_node
        first = cst.ensure_type(updated_node.left, cst.SimpleString)
        subject = code(updated_node.comparisons[0].comparator)
        values = ", ".join([first.value, *(f'"{v}"' for v in added)])
        return cst.parse_expression(f"not any(supported in {subject} for supported in ({values}))")


class Eagle3Whitelist(FileCodemod):
    DESCRIPTION = "Add the model types to the EAGLE-3 target model-type whitelist."
    CANDIDATE_FILES = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")
    SIGNATURE = signatures.EAGLE3_MODEL_TYPE_CHECK

    def transform(self, tree: Tree) -> Outcome:
        """Each candidate file's gates, judged by what they decide for the model types
        (``gate_decision``), not by their shape: ``applied`` only where the edit turns a
        rejection into an acceptance, ``present`` only where they are accepted already."""
        applied: list[str] = []
        present: list[str] = []
        for path in tree.files(self):
            text = tree.text(path)
            if text is None:
                continue
            before = self.decisions(path, text.removeprefix(BOM))
            rejected = [t for t, d in before.items() if d.verdict == "reject"]
            if not rejected:
                if any(d.verdict == "accept" for d in before.values()):
                    present.append(path)
                continue
            where = f"{path}:{before[rejected[0]].lines[0]}"
            module = tree.module(path)
            assert module is not None
            gates, _ = find_gates(module)
            additions: dict[int, list[str]] = {}
            for i, gate in enumerate(gates):
                substrings = string_values(gate.literal) if gate.literal is not None else []
                missing = [t for t in rejected if not covered(t, substrings or [])]
                if missing:
                    additions[i] = missing
            if not additions:
                raise ShapeError(
                    f"{where}: the EAGLE-3 model-type check rejects {', '.join(rejected)} here, "
                    f"and no list of model-type substrings it iterates over would let them "
                    f"through"
                )
            patched = module.visit(WhitelistExtender(gates, additions))
            after = self.decisions(path, patched.code, rejected)
            still = [t for t, d in after.items() if d.verdict != "accept"]
            if still:
                decision = after[still[0]]
                line = decision.lines[0] if decision.lines else before[still[0]].lines[0]
                why = f": {decision.why}" if decision.why else ""
                raise ShapeError(
                    f"{path}:{line}: extending the list does not make the check accept "
                    f"{', '.join(still)} ({decision.verdict}{why})"
                )
            tree.update(path, patched)
            added = sorted({t for values in additions.values() for t in values})
            applied.append(
                f"{path}: {', '.join(rejected)} rejected -> accepted (added {', '.join(added)})"
            )
        return summarize(
            applied,
            present,
            "model types already accepted",
            "no EAGLE-3 model-type check in this tree",
        )

    def decisions(
        self, path: str, text: str, types: Sequence[str] | None = None
    ) -> dict[str, Decision]:
        """What the file's gates decide for each model type; ShapeError where it cannot say."""
        decided = {t: decide(text, t) for t in (types or self.model.types)}
        for model_type, decision in decided.items():
            if decision.verdict == "undecidable" and decision.why.startswith("nested too deep"):
                try:
                    depth, line = ast_depth(ast.parse(text))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    depth, line = 0, decision.lines[0]
                where = f"{path}:{line} ({depth} levels)" if depth else f"{path}:{line}"
                raise ShapeError(
                    f"{where}: code nested deeper than libcst can walk within Python's "
                    f"recursion limit of {sys.getrecursionlimit()}"
                )
            if decision.verdict == "undecidable":
                line = decision.lines[0]
                source = (
                    text.splitlines()[line - 1].strip() if 0 < line <= text.count("\n") + 1 else ""
                )
                raise ShapeError(
                    f"{path}:{line}: cannot decide what the EAGLE-3 model-type check does for "
                    f"{model_type}: {decision.why}; nearest candidate: {path}:{line} `{source}`"
                )
        return decided
