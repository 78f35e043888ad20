"""What each barrier does, as ``ast`` finds it in any module: the proof behind ``not-needed``.

A codemod matches one known shape in a few expected files; these match the behaviour in any file
and any shape (a renamed module, a constant for the literal, the raise moved into a helper, a
``getattr`` for the attribute), so a gate that moved is reported where it is, not as gone. They
need no libcst, and only run where a codemod found nothing to do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from patcher.codemods import _reach
from patcher.codemods._fold import BUILT, STRINGS, folded_string
from patcher.codemods._gate_decision import decision_sites, eagle3_prefix, eagle3_spelling
from patcher.codemods._gate_decision import walk_body as body_nodes
from patcher.codemods.base import Signature

FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef


def identifiers(node: ast.AST) -> Iterator[str]:
    """The names, attribute names and strings under ``node`` (constants, and what a constant
    expression folds to), in lower case."""
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            yield child.id.lower()
        elif isinstance(child, ast.Attribute):
            yield child.attr.lower()
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value.lower()
        elif isinstance(child, BUILT):
            text = folded_string(child)  # built at run time: chr, bytes.decode, base64, ...
            if text is not None:
                yield text.lower()


def mentions(node: ast.AST, word: str, aliases: frozenset[str] = frozenset()) -> bool:
    """Whether ``word`` is in a name or string under ``node``, or a name bound to such a string
    (``EAGLE3 = "eagle3"``) is used there."""
    return any(word in text or text in aliases for text in identifiers(node))


def string_aliases(module: ast.Module, word: str) -> frozenset[str]:
    """Names the module assigns a string holding ``word`` to, in lower case."""
    found: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            value = folded_string(node.value)
            if value is not None and word in value.lower():
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.update(t.id.lower() for t in targets if isinstance(t, ast.Name))
    return frozenset(found)


def called_names(statements: list[ast.stmt]) -> set[str]:
    """The functions and methods called among ``statements``: ``f()`` and ``x.f()``."""
    names = set()
    for node in body_nodes(statements):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
    return names


def is_eagle3(node: ast.expr, aliases: frozenset[str]) -> bool:
    """Whether ``node`` is the EAGLE-3 method as a value: a string holding ``eagle3``, a tuple
    of strings with one, a name bound to one, or a constant-style name (``EAGLE3``,
    ``Method.EAGLE3``)."""
    if isinstance(node, STRINGS) and eagle3_spelling(node):
        return True
    if isinstance(node, ast.Constant | ast.BinOp | ast.JoinedStr):
        return False
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(is_eagle3(element, aliases) for element in node.elts)
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(name, str) and (
        name.lower() in aliases or ("EAGLE3" in name.upper() and name.isupper())
    )


def tests_eagle3(test: ast.expr, aliases: frozenset[str]) -> bool:
    """Whether ``test`` compares something with the EAGLE-3 method."""
    return any(
        (
            isinstance(node, ast.Compare)
            and any(is_eagle3(side, aliases) for side in [node.left, *node.comparators])
        )
        or eagle3_prefix(node)
        for node in ast.walk(test)
    )


def eagle3_model_type_checks(module: ast.Module) -> Iterator[int]:
    """Where EAGLE-3 is refused for a model type: an ``if`` testing a ``model_type`` that
    raises (itself or in a function it calls), where the method is compared with EAGLE-3 (the
    literal, or a constant for it) in its test or an enclosing ``if``; or such a check in a
    helper that an EAGLE-3 test calls."""
    aliases = string_aliases(module, "eagle3")
    functions = [node for node in ast.walk(module) if isinstance(node, FUNCTIONS)]
    raising = {
        f.name for f in functions if any(isinstance(n, ast.Raise) for n in body_nodes(f.body))
    }

    def raises(statements: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Raise) for n in body_nodes(statements)) or bool(
            called_names(statements) & raising
        )

    rejecting: dict[str, list[int]] = {}  # each function's model-type checks that raise
    for function in functions:
        rejecting.setdefault(function.name, []).extend(
            node.lineno
            for node in body_nodes(function.body)
            if isinstance(node, ast.If) and mentions(node.test, "model_type") and raises(node.body)
        )

    def visit(statements: list[ast.stmt], under_eagle3: bool) -> Iterator[int]:
        for statement in statements:
            if isinstance(statement, FUNCTIONS | ast.ClassDef):
                yield from visit(statement.body, False)
            elif isinstance(statement, ast.If):
                eagle3 = under_eagle3 or tests_eagle3(statement.test, aliases)
                if eagle3 and mentions(statement.test, "model_type") and raises(statement.body):
                    yield statement.lineno
                if eagle3:
                    for name in called_names(statement.body):
                        yield from rejecting.get(name, ())
                yield from visit(statement.body, eagle3)
                yield from visit(statement.orelse, under_eagle3)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    yield from visit(getattr(statement, field, []), under_eagle3)

    yield from visit(module.body, False)
    yield from decision_sites(module)  # by meaning: guard clauses, elif, match, assert, loops


def image_token_index_reads(module: ast.Module) -> Iterator[int]:
    """Where a module that defines a proposer (a ``...Proposer`` class) reads
    ``image_token_index`` (``image_token_index_loads``)."""
    if any(
        isinstance(node, ast.ClassDef) and node.name.endswith("Proposer")
        for node in ast.walk(module)
    ):
        yield from image_token_index_loads(module)


def image_token_index_loads(module: ast.Module) -> Iterator[int]:
    """Where ``module`` reads ``image_token_index``: as an attribute, or names it as a string
    (``getattr``, a dict lookup falling back to it). Any module of the proposers' packages
    counts, a helper the fallback moved into included."""
    for node in ast.walk(module):
        if _reach.reads_image_token_index(node):
            yield getattr(node, "lineno", 1)  # as a string: getattr, a dict's fallback, a lookup


def target_backbone_reads(module: ast.Module) -> Iterator[int]:
    """Where the target's embedding is read as ``target_language_model.model.embed_tokens``,
    with no fallback to the target itself for a bare backbone."""
    for node in ast.walk(module):
        if not (
            isinstance(node, ast.Attribute)
            and node.attr == "embed_tokens"
            and isinstance(node.ctx, ast.Load)
        ):
            continue
        inner = node.value
        if isinstance(inner, ast.Attribute) and inner.attr == "model":
            owner = inner.value
        elif (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Name)
            and inner.func.id == "getattr"
            and len(inner.args) == 2
        ):
            owner = inner.args[0]
        else:
            continue
        if isinstance(owner, ast.Name) and owner.id == "target_language_model":
            yield node.lineno


def eagle_inner_mla_checks(module: ast.Module) -> Iterator[int]:
    """Where an EAGLE drafter's inner model type is checked against a list of model types:
    a branch testing ``model_type == "eagle"`` whose body tests a ``model_type in (...)``."""
    for node in ast.walk(module):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        if not (
            mentions(test.left, "model_type")
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "eagle"
        ):
            continue
        if any(
            isinstance(n, ast.Compare)
            and isinstance(n.ops[0], ast.In)
            and isinstance(n.comparators[0], ast.Tuple | ast.List | ast.Set)
            and mentions(n.left, "model_type")
            for n in body_nodes(node.body)
        ):
            yield node.lineno


EAGLE3_WORDS = ("eagle3", "eagle-3", "eagle_3", 'eagle"', "eagle'", "eagle{")
"""EAGLE-3's name as a module's text can hold it: whole, or in pieces (``"eagle" + "3"``,
``f"eagle{3}"``, ``method.startswith("eagle")``)."""


def eagle3_root(path: str, lowered: bytes) -> bool:
    return any(word.encode() in lowered for word in EAGLE3_WORDS)


EAGLE3_MODEL_TYPE_CHECK = Signature(
    "the EAGLE-3 model-type check",
    EAGLE3_WORDS,
    eagle3_model_type_checks,
    reach=_reach.eagle3_gate_sightings,
    root=eagle3_root,
    reach_undecided=True,
)
SPEC_DECODE_PACKAGES = (
    "vllm/v1/spec_decode/",
    "vllm/spec_decode/",
    "vllm/v1/worker/gpu/spec_decode/",
)
"""The proposers' packages (V1's, the older one, the V2 runner's). No release read reads
image_token_index in them outside the proposer's fallback (0.10.0, 0.15.0, 0.16.0, 0.17.1,
0.18.0, 0.22.0, 0.28.0 and 0.34.0 read)."""


def proposer_root(path: str, lowered: bytes) -> bool:
    """A module of the proposers' packages, or one defining a proposer, whose code names
    images or multimodality: where the proposer's image-token lookup starts."""
    return (path.startswith(SPEC_DECODE_PACKAGES) or b"proposer" in lowered) and (
        b"image" in lowered or b"multimodal" in lowered
    )


IMAGE_TOKEN_INDEX_READ = Signature(
    "the proposer's read of image_token_index",
    ("image_token_index",),
    image_token_index_reads,
    SPEC_DECODE_PACKAGES,
    image_token_index_loads,
    reach=_reach.image_token_index_sightings,
    root=proposer_root,
)
TARGET_BACKBONE_READ = Signature(
    "a read of target_language_model.model.embed_tokens",
    ("target_language_model",),
    target_backbone_reads,
)
EAGLE_INNER_MLA_CHECK = Signature(
    "the EAGLE branch of the MLA detection", ('"eagle"', "'eagle'"), eagle_inner_mla_checks
)


def reads_key(node: ast.AST, key: str) -> bool:
    """Whether ``node`` is a read of ``key`` out of a dict: ``x.get(key, ...)`` or ``x[key]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        first = node.args[0] if node.func.attr == "get" and node.args else None
        return isinstance(first, ast.Constant) and first.value == key
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == key
    return False


def nested_ids_unread(module: ast.Module) -> Iterator[int]:
    """Where a module-level id reader (the V2 runner's; the V1 runner's is a method of the
    runner) reads a drafter's top-level ``eagle_aux_hidden_state_layer_ids`` (as an attribute,
    or with ``getattr``/``hasattr``), returns ids as a ``tuple(...)``, and never reads the ids
    nested in a dict (``eagle_config.get(...)`` or ``eagle_config[...]``)."""
    key = "eagle_aux_hidden_state_layer_ids"
    for function in module.body:
        if not isinstance(function, FUNCTIONS):
            continue
        nodes = list(body_nodes(function.body))
        top_level = any(
            (isinstance(n, ast.Attribute) and n.attr == key)
            or (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in ("getattr", "hasattr")
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Constant)
                and n.args[1].value == key
            )
            for n in nodes
        )
        returns_tuple = any(
            isinstance(n, ast.Return)
            and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name)
            and n.value.func.id == "tuple"
            for n in nodes
        )
        if top_level and returns_tuple and not any(reads_key(n, key) for n in nodes):
            yield function.lineno


V2_NESTED_IDS_UNREAD = Signature(
    "the V2 runner's EAGLE-3 id reader, without eagle_config's eagle_aux_hidden_state_layer_ids",
    ("eagle_aux_hidden_state_layer_ids",),
    nested_ids_unread,
)
