"""Small libcst helpers the codemods share: layout-preserving list growth, node locations,
and finding and editing a module's classes and their methods by name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

Item = Any  # cst.Element, cst.Arg or cst.ImportAlias: each has a ``comma``

SPACE_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _without_comment(comma: cst.Comma) -> cst.Comma:
    space = comma.whitespace_after
    if isinstance(space, cst.ParenthesizedWhitespace):
        space = space.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return comma.with_changes(whitespace_after=space)


def extend_bracketed(
    items: Sequence[Item], new_items: Sequence[Item], closing: cst.BaseParenthesizableWhitespace
) -> tuple[list[Item], cst.BaseParenthesizableWhitespace]:
    """Like extend_separated, for items before a closing bracket whose whitespace is ``closing``.

    libcst keeps a comment after the last item in the bracket's whitespace; it is moved to the
    last original item's comma so that it stays on that item's line.
    """
    last = items[-1] if items else None
    if (
        last is not None
        and len(items) >= 2
        and isinstance(closing, cst.ParenthesizedWhitespace)
        and closing.first_line.comment is not None
        and isinstance(last.comma, cst.Comma)
        and isinstance(last.comma.whitespace_after, cst.SimpleWhitespace)
        and not last.comma.whitespace_after.value
    ):
        separator = items[-2].comma
        if isinstance(separator, cst.Comma) and isinstance(
            separator.whitespace_after, cst.ParenthesizedWhitespace
        ):
            separator = _without_comment(separator)
            between = cst.ensure_type(separator.whitespace_after, cst.ParenthesizedWhitespace)
            moved = last.comma.with_changes(
                whitespace_after=closing.with_changes(
                    indent=between.indent, last_line=between.last_line
                )
            )
            result = [*items[:-1], last.with_changes(comma=moved)]
            result += [item.with_changes(comma=separator) for item in new_items[:-1]]
            result.append(new_items[-1].with_changes(comma=last.comma))
            return result, closing.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return extend_separated(items, new_items), closing


def extend_separated(items: Sequence[Item], new_items: Sequence[Item]) -> list[Item]:
    """``items`` followed by ``new_items``, separated and laid out as the existing items are.

    Comments stay where they were: one after the last item stays after it, and the new
    items take the separator's indentation and the closing bracket's.
    """
    if not new_items:
        return list(items)
    separator = items[-2].comma if len(items) >= 2 else SPACE_COMMA
    separator = _without_comment(separator) if isinstance(separator, cst.Comma) else SPACE_COMMA
    if not items:
        last_comma: cst.Comma | cst.MaybeSentinel = cst.MaybeSentinel.DEFAULT
        return [
            *(i.with_changes(comma=separator) for i in new_items[:-1]),
            new_items[-1].with_changes(comma=last_comma),
        ]
    trailing = items[-1].comma
    kept = separator
    if isinstance(trailing, cst.Comma):
        space, between = trailing.whitespace_after, separator.whitespace_after
        if isinstance(space, cst.ParenthesizedWhitespace) and isinstance(
            between, cst.ParenthesizedWhitespace
        ):
            kept = trailing.with_changes(
                whitespace_after=space.with_changes(
                    indent=between.indent, last_line=between.last_line
                )
            )
        trailing = _without_comment(trailing)
    result = [*items[:-1], items[-1].with_changes(comma=kept)]
    result += [item.with_changes(comma=separator) for item in new_items[:-1]]
    result.append(new_items[-1].with_changes(comma=trailing))
    return result


def extend_literal(node: cst.List | cst.Tuple, values: Sequence[str]) -> cst.List | cst.Tuple:
    """A list or tuple literal with ``values`` appended as strings, in its own layout."""
    new = [cst.Element(cst.SimpleString(f'"{value}"')) for value in values]
    if isinstance(node, cst.List):
        elements, closing = extend_bracketed(node.elements, new, node.rbracket.whitespace_before)
        return node.with_changes(
            elements=elements, rbracket=node.rbracket.with_changes(whitespace_before=closing)
        )
    if not node.rpar:  # a bare tuple has no bracket to keep a comment in
        return node.with_changes(elements=extend_separated(node.elements, new))
    elements, closing = extend_bracketed(node.elements, new, node.rpar[-1].whitespace_before)
    rpar = [*node.rpar[:-1], node.rpar[-1].with_changes(whitespace_before=closing)]
    return node.with_changes(elements=elements, rpar=rpar)


class ExtendLiterals(cst.CSTTransformer):
    """Appends strings to the list or tuple literals given (libcst nodes compare by identity)."""

    def __init__(self, additions: dict[cst.CSTNode, Sequence[str]]) -> None:
        self.additions = additions

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.BaseExpression:
        added = self.additions.get(original_node)
        return extend_literal(updated_node, added) if added else updated_node

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.BaseExpression:
        added = self.additions.get(original_node)
        return extend_literal(updated_node, added) if added else updated_node


def string_values(node: cst.BaseExpression) -> list[str] | None:
    """The strings of a list or tuple literal of plain strings, else None."""
    if not isinstance(node, cst.List | cst.Tuple):
        return None
    values = []
    for element in node.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.SimpleString):
            return None
        values.append(element.value.evaluated_value)
    return [v if isinstance(v, str) else v.decode() for v in values]


def code(node: cst.CSTNode) -> str:
    """A node's source text, written outside any module (default indent and line ending)."""
    return cst.Module([]).code_for_node(node)


def line_of(module: cst.Module, node: cst.CSTNode) -> int | None:
    """The 1-based line where ``node`` starts; computed only when a failure needs naming."""
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    position = positions.get(node)
    return position.start.line if position else None


def snippet(module: cst.Module, node: cst.CSTNode, width: int = 80) -> str:
    """The first line of ``node``'s code, shortened, for error messages."""
    first = module.code_for_node(node).strip().splitlines()[0]
    return first if len(first) <= width else first[: width - 3] + "..."


def describe(module: cst.Module, path: str, node: cst.CSTNode) -> str:
    line = line_of(module, node)
    return (
        f"{path}:{line} `{snippet(module, node)}`" if line else f"{path} `{snippet(module, node)}`"
    )


class CompoundFinder(cst.CSTVisitor):
    """Collects compound statements matching ``matcher``, without descending into simple
    statements: most of a module's nodes are expressions inside them, and skipping those makes
    a search over a large vLLM module several times faster than ``m.findall``."""

    def __init__(self, matcher: m.BaseMatcherNode) -> None:
        self.matcher = matcher
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine | cst.BaseExpression):
            return False
        if m.matches(node, self.matcher):
            self.found.append(node)
        return True


def find_compound(node: cst.CSTNode, matcher: m.BaseMatcherNode) -> list[cst.CSTNode]:
    finder = CompoundFinder(matcher)
    node.visit(finder)
    return finder.found


def statement(source: str) -> cst.BaseStatement:
    return cst.parse_statement(source)


def method(source: str) -> cst.FunctionDef:
    """A method parsed from ``source``, after a blank line."""
    return cst.ensure_type(statement(source), cst.FunctionDef).with_changes(
        leading_lines=[cst.EmptyLine(indent=False)]
    )


def find_class(module: cst.Module, name: str) -> cst.ClassDef | None:
    """The module's first top-level class ``name``."""
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


def edit_first(
    module: cst.Module, matcher: m.BaseMatcherNode, edit: Callable[[Any], cst.CSTNode]
) -> cst.Module:
    """``module`` with its first top-level statement (or small statement of a line) that
    matches ``matcher`` replaced by ``edit`` of it; the module itself where none does."""
    body: list[Any] = list(module.body)
    for i, node in enumerate(body):
        if m.matches(node, matcher):
            body[i] = edit(node)
            return module.with_changes(body=body)
        if isinstance(node, cst.SimpleStatementLine):
            smalls: list[Any] = list(node.body)
            for j, small in enumerate(smalls):
                if m.matches(small, matcher):
                    smalls[j] = edit(small)
                    body[i] = node.with_changes(body=smalls)
                    return module.with_changes(body=body)
    return module


def edit_class(
    module: cst.Module, name: str, edit: Callable[[cst.ClassDef], cst.ClassDef]
) -> cst.Module:
    """``module`` with its top-level class ``name`` (as ``find_class`` finds it) edited."""
    return edit_first(module, m.ClassDef(name=m.Name(name)), edit)


def edit_method(
    cls: cst.ClassDef, name: str, edit: Callable[[cst.FunctionDef], cst.FunctionDef]
) -> cst.ClassDef:
    """``cls`` with its first method ``name`` edited."""
    body = cst.ensure_type(cls.body, cst.IndentedBlock)
    statements = list(body.body)
    for i, node in enumerate(statements):
        if isinstance(node, cst.FunctionDef) and node.name.value == name:
            statements[i] = edit(node)
            return cls.with_changes(body=body.with_changes(body=statements))
    return cls


def with_bases(cls: cst.ClassDef, names: Iterable[str]) -> cst.ClassDef:
    """``cls`` subclassing each of ``names`` it does not yet."""
    missing = [n for n in names if n not in base_names(cls)]
    if not missing:
        return cls
    bases = extend_separated(list(cls.bases), [cst.Arg(cst.Name(n)) for n in missing])
    return cls.with_changes(bases=bases)


def with_methods(cls: cst.ClassDef, sources: Iterable[str]) -> cst.ClassDef:
    """``cls`` with the methods ``sources`` appended."""
    body = cst.ensure_type(cls.body, cst.IndentedBlock)
    return cls.with_changes(body=body.with_changes(body=[*body.body, *map(method, sources)]))


def appended(function: cst.FunctionDef, *added: cst.BaseStatement) -> cst.FunctionDef:
    """``function`` with ``added`` at the end of its body."""
    body = cst.ensure_type(function.body, cst.IndentedBlock)
    return function.with_changes(body=body.with_changes(body=[*body.body, *added]))
