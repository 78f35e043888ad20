"""mm-image-token: tell the EAGLE proposer where a multimodal target keeps its image token.

Under ``if supports_multimodal(target_model):`` the proposer's ``load_model`` picks the image
token by architecture name in an ``if``/``elif`` chain; the final ``else`` reads
``target.config.image_token_index``, which some configs (Kimi-K2.5's) do not have. This adds an
``elif`` for the patchset's architecture ahead of that ``else``, which stays last.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from patcher.codemods import _signatures as signatures
from patcher.codemods._cst import describe, find_compound, line_of
from patcher.codemods.base import FileCodemod, Outcome, ShapeError, Status, Tree

SUPPORTS_MULTIMODAL = m.If(test=m.Call(func=m.Name("supports_multimodal")))
READS_IMAGE_TOKEN_INDEX = m.Assign(
    targets=[m.AssignTarget(target=m.Attribute(attr=m.Name("image_token_index")))],
    value=m.Attribute(attr=m.Name("image_token_index")),
)
NAME_TEST = m.Comparison(comparisons=[m.ComparisonTarget(operator=m.Equal() | m.In())])


@dataclass
class Chain:
    """An architecture ``if``/``elif`` chain whose ``else`` falls back to image_token_index."""

    head: cst.If
    last_elif: cst.If  # the branch whose orelse is the fallback ``else``
    fallback: cst.Assign
    branches: list[cst.If]  # the head and each elif, in order

    @property
    def tests(self) -> list[cst.BaseExpression]:
        return [branch.test for branch in self.branches]


def fallback_assign(block: cst.BaseSuite) -> cst.Assign | None:
    for statement in getattr(block, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if m.matches(small, READS_IMAGE_TOKEN_INDEX):
                    return cst.ensure_type(small, cst.Assign)
    return None


def find_chains(branch: cst.If) -> list[Chain]:
    """The chains under ``branch``; an ``elif`` is part of its head's chain, not a head."""
    ifs = [cst.ensure_type(node, cst.If) for node in find_compound(branch.body, m.If())]
    elifs = {node.orelse for node in ifs if isinstance(node.orelse, cst.If)}
    chains = []
    for head in ifs:
        if head in elifs:
            continue
        branches, node = [head], head
        while isinstance(node.orelse, cst.If):
            node = node.orelse
            branches.append(node)
        if isinstance(node.orelse, cst.Else):
            fallback = fallback_assign(node.orelse.body)
            if fallback is not None:
                chains.append(Chain(head, node, fallback, branches))
    return chains


IMAGE_TOKEN_INDEX = m.Attribute(attr=m.Name("image_token_index"))


def module_constants(module: cst.Module) -> dict[str, list[str]]:
    """Module-level names bound once to a literal list, tuple or set of strings and never
    changed (no other store, no method called on them): what a chain's ``in NAME`` reads."""
    found: dict[str, list[str]] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                values = literal_strings(small.value)
                if isinstance(target, cst.Name) and values is not None:
                    found[target.value] = values
    changed = {  # a method called on it, or an augmented store or del of it
        cst.ensure_type(node, cst.Attribute).value.value  # type: ignore[attr-defined]
        for node in m.findall(module, m.Attribute(value=m.Name()))
    }
    for node in m.findall(module, m.AugAssign() | m.Del()):
        changed |= {
            cst.ensure_type(n, cst.Name).value
            for n in m.findall(getattr(node, "target", node), m.Name())
        }
    stores = [
        cst.ensure_type(name, cst.Name).value
        for target in m.findall(module, m.AssignTarget())
        for name in m.findall(cst.ensure_type(target, cst.AssignTarget).target, m.Name())
    ]
    return {
        name: values
        for name, values in found.items()
        if stores.count(name) == 1 and name not in changed  # bound here and nowhere else
    }


def takes(
    test: cst.BaseExpression,
    name: str,
    architecture: str,
    constants: dict[str, list[str]] | None = None,
) -> bool | None:
    """Whether a chain's ``test`` holds when the model name (the code ``name``) is
    ``architecture``: ``==``/``!=``/``in``/``not in`` a literal, ``and``/``or``/``not`` of such,
    and the constants True and False; None where that cannot be worked out from the code."""
    if isinstance(test, cst.Name) and test.value in ("True", "False"):
        return test.value == "True"
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = takes(test.expression, name, architecture, constants)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left = takes(test.left, name, architecture, constants)
        right = takes(test.right, name, architecture, constants)
        if isinstance(test.operator, cst.And):
            if left is False or right is False:
                return False
            return None if left is None or right is None else True
        if left is True or right is True:
            return True
        return None if left is None or right is None else False
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        if cst.Module([]).code_for_node(test.left) != name:
            return None
        target = test.comparisons[0]
        comparator = target.comparator
        known = constants or {}
        constant = known.get(comparator.value) if isinstance(comparator, cst.Name) else None
        values = constant if constant is not None else literal_strings(comparator)
        if values is None:
            return None
        if isinstance(target.operator, cst.Equal | cst.NotEqual) and len(values) == 1:
            equal = values[0] == architecture
            return equal if isinstance(target.operator, cst.Equal) else not equal
        if constant is not None or isinstance(comparator, cst.List | cst.Tuple | cst.Set):
            if isinstance(target.operator, cst.In):
                return architecture in values
            if isinstance(target.operator, cst.NotIn):
                return architecture not in values
    return None


def literal_strings(node: cst.BaseExpression) -> list[str] | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return [value] if isinstance(value, str) else None
    if isinstance(node, cst.List | cst.Tuple | cst.Set):
        values = []
        for element in node.elements:
            if not isinstance(element.value, cst.SimpleString):
                return None
            value = element.value.evaluated_value
            if not isinstance(value, str):
                return None
            values.append(value)
        return values
    return None


def root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Attribute | cst.Subscript | cst.Call):
        node = node.value if not isinstance(node, cst.Call) else node.func
    return node.value if isinstance(node, cst.Name) else None


class BoundBefore(cst.CSTVisitor):
    """The names a function binds before ``stop`` (its parameters, and what its statements
    ahead of ``stop`` assign), for the function that holds ``stop``."""

    def __init__(self, stop: cst.CSTNode) -> None:
        self.stop = stop
        self.stack: list[set[str]] = []
        self.found: set[str] | None = None
        self.done = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if self.done:
            return False
        names = {p.name.value for p in [*node.params.posonly_params, *node.params.params]}
        names |= {p.name.value for p in node.params.kwonly_params}
        self.stack.append(names)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if not self.done:
            self.stack.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.stop:
            self.found = set(self.stack[-1]) if self.stack else set()
            self.done = True
            return False
        if self.done:
            return False
        return super().on_visit(node)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self.stack:
            for name in m.findall(node.target, m.Name()):
                self.stack[-1].add(cst.ensure_type(name, cst.Name).value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.stack and node.value is not None and isinstance(node.target, cst.Name):
            self.stack[-1].add(node.target.value)


class InsertBranch(cst.CSTTransformer):
    def __init__(self, target: cst.If, branch: cst.If) -> None:
        self.target, self.branch = target, branch

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        if original_node is not self.target:
            return updated_node
        return updated_node.with_changes(
            orelse=self.branch.with_changes(orelse=updated_node.orelse)
        )


class MmImageToken(FileCodemod):
    DESCRIPTION = (
        "Map the architecture to its image-token attribute in the EAGLE multimodal branch."
    )
    CANDIDATE_FILES = ("vllm/v1/spec_decode/*.py",)
    SIGNATURE = signatures.IMAGE_TOKEN_INDEX_READ

    def transform(self, tree: Tree) -> Outcome:
        architecture = self.model.architecture
        attribute = self.model.image_token_attribute
        if not architecture or not attribute:
            raise ShapeError("the patchset names no architecture and image-token attribute")
        found: list[tuple[str, cst.Module, Chain]] = []
        for path, module in tree.modules_mentioning(tree.files(self), "supports_multimodal("):
            branches = [
                cst.ensure_type(b, cst.If) for b in find_compound(module, SUPPORTS_MULTIMODAL)
            ]
            chains = [chain for branch in branches for chain in find_chains(branch)]
            if not chains:
                for branch in branches:
                    if fallback_assign(branch.body) is not None:
                        # The chain is what the patch extends: without it the release reads
                        # image_token_index for every multimodal target, so it lacks what the
                        # patch builds on (unsupported), not a shape to learn (failed).
                        return Outcome(
                            Status.UNSUPPORTED,
                            f"{path}: the multimodal branch reads image_token_index with no "
                            f"architecture chain to extend; nearest candidate: "
                            f"{describe(module, path, branch)}",
                        )
            found += [(path, module, chain) for chain in chains]
        if len(found) > 1:
            # Which chain the running proposer takes is not in the code the codemod reads: a
            # copy in another proposer, or a second branch, is a second barrier to decide.
            places = [
                describe(module, path, chain.head).split(" ")[0] for path, module, chain in found
            ]
            return Outcome(
                Status.AMBIGUOUS,
                f"{len(found)} architecture chains fall back to image_token_index, at "
                f"{', '.join(places)}: {self.name} decides one, so it patched none",
            )
        if not found:
            return Outcome(
                Status.NOT_NEEDED, "no image_token_index fallback in a multimodal branch"
            )
        ((path, module, chain),) = found
        inside = set(m.findall(chain.head, IMAGE_TOKEN_INDEX))  # nodes are equal by identity
        elsewhere = [n for n in m.findall(module, IMAGE_TOKEN_INDEX) if n not in inside]
        if elsewhere:
            # a later store overwrites what the chain set, a read elsewhere is a second barrier
            lines = ", ".join(f"{path}:{line_of(module, n)}" for n in elsewhere)
            return Outcome(
                Status.AMBIGUOUS,
                f"{path}:{line_of(module, chain.head)}: the chain sets image_token_index, and "
                f"{lines} touches it too, outside the chain: {self.name} decides one, so it "
                f"patched none",
            )
        if self._mapped(module, path, chain):
            return Outcome(Status.PRESENT, f"{path}: {architecture} already mapped")
        tree.update(
            path, module.visit(InsertBranch(chain.last_elif, self._branch(module, path, chain)))
        )
        return Outcome(Status.APPLIED, f"{path}: {architecture} -> config.{attribute}")

    def decided(self, tree: Tree) -> set[str]:
        """The files holding the chain it decided (patched as it is now): a read of
        image_token_index anywhere else, even in another file it reads, is a second barrier."""
        return {
            path
            for path, module in tree.modules_mentioning(tree.files(self), "supports_multimodal(")
            if any(
                find_chains(cst.ensure_type(branch, cst.If))
                for branch in find_compound(module, SUPPORTS_MULTIMODAL)
            )
        }

    def _mapped(self, module: cst.Module, path: str, chain: Chain) -> bool:
        """Whether the chain already sends the architecture to a branch of its own that reads
        the patchset's attribute: the first test that holds for it is reached (every test
        before it is known not to hold) and names it. ShapeError where a test that names it, or
        one ahead of it, cannot be worked out, or where the branch it takes reads another
        attribute (the config has only its own: a patch there is not the fix)."""
        architecture = self.model.architecture or ""
        head = chain.tests[0]
        if not isinstance(head, cst.Comparison):
            raise ShapeError(
                f"{path}: cannot tell which branch {architecture} takes; nearest candidate: "
                f"{describe(module, path, chain.head)}"
            )
        name = module.code_for_node(head.left)
        constants = module_constants(module)
        for branch in chain.branches:
            # every test ahead of the new branch must be known not to hold for it, or the new
            # branch is never reached: one that holds is the branch it takes already
            holds = takes(branch.test, name, architecture, constants)
            if holds is None:
                raise ShapeError(
                    f"{path}: cannot tell whether {architecture} takes the branch "
                    f"`{module.code_for_node(branch.test)[:80]}`; nearest candidate: "
                    f"{describe(module, path, chain.head)}"
                )
            if holds:
                self._reads_attribute(module, path, chain, branch)
                return True
        return False

    def _reads_attribute(self, module: cst.Module, path: str, chain: Chain, branch: cst.If):
        """ShapeError unless ``branch`` sets the drafter's image_token_index (the target the
        fallback sets) from ``<...>.<the patchset's attribute>``."""
        attribute = self.model.image_token_attribute or ""
        target = module.code_for_node(chain.fallback.targets[0].target)
        reads = []
        for statement in getattr(branch.body, "body", ()):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                    module.code_for_node(t.target) == target for t in small.targets
                ):
                    value = small.value.with_changes(lpar=[], rpar=[])
                    reads.append("".join(module.code_for_node(value).split()))
        # the attribute of the object the fallback reads (the target's config), not of one
        # below it: Kimi's text_config has no media_placeholder_token_id
        source = chain.fallback.value
        owner = (
            "".join(module.code_for_node(source.value.with_changes(lpar=[], rpar=[])).split())
            if isinstance(source, cst.Attribute)
            else None
        )
        if owner is not None and f"{owner}.{attribute}" in reads:
            return
        said = f"sets {target} from `{reads[0]}`" if reads else f"does not set {target}"
        raise ShapeError(
            f"{path}:{line_of(module, branch)}: {self.model.architecture} takes the branch "
            f"`{module.code_for_node(branch.test)[:80]}`, which {said}, not from "
            f"config.{attribute}; nearest candidate: {describe(module, path, branch)}"
        )

    def _branch(self, module: cst.Module, path: str, chain: Chain) -> cst.If:
        """``elif <name> == "Arch": <drafter>.image_token_index = <target>.config.<attr>``."""
        head = chain.tests[0]
        if not m.matches(head, NAME_TEST):
            raise ShapeError(
                f"{path}: expected the multimodal branch to compare the model name with == or in; "
                f"nearest candidate: {describe(module, path, chain.head)}"
            )
        name = module.code_for_node(cst.ensure_type(head, cst.Comparison).left)
        target = module.code_for_node(chain.fallback.targets[0].target)
        source = cst.ensure_type(chain.fallback.value, cst.Attribute)
        owner = module.code_for_node(source.value.with_changes(lpar=[], rpar=[]))
        finder = BoundBefore(chain.head)
        module.visit(finder)
        bound = finder.found or set()
        for read in (source.value, chain.fallback.targets[0].target):
            root = root_name(read)
            if root is not None and root not in bound and root not in ("self", "cls"):
                raise ShapeError(
                    f"{path}: the new branch would read `{module.code_for_node(read)}`, but "
                    f"{root} is not bound ahead of the chain (only in its else, or nowhere): "
                    f"a patch here would raise UnboundLocalError; nearest candidate: "
                    f"{describe(module, path, chain.fallback)}"
                )
        code = (
            f'if {name} == "{self.model.architecture}":\n'
            f"    {target} = (\n"
            f"        {owner}.{self.model.image_token_attribute}\n"
            f"    )\n"
        )
        return cst.ensure_type(cst.parse_statement(code), cst.If)
