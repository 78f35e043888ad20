"""What a constant expression evaluates to, without running it: the folding behind ``spelled``.

A release (or someone hiding a gate) can build ``"eagle3"`` or ``"model_type"`` at run time:
``"".join(map(chr, [101, 97, ...]))``, ``b"eagle3".decode()``, ``base64.b64decode(...)``,
``codecs.decode("rntyr3", "rot13")``, ``"3elgae"[::-1]``, ``"_".join(["model", "type"])``.
Each is a pure function of constants, so it is evaluated here: the literals and containers of
Python, arithmetic on them, slicing, and a fixed list of pure builtins, ``str``/``bytes``
methods and decoders. Nothing else is called, no name is looked up (``__import__("base64")``
and a bare ``base64`` both name the module only where the name is spelled so), and the result
and every step are capped in size, so folding cannot hang or run away. What cannot be folded
raises ``NotConstant``.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import operator
import re
from collections.abc import Callable
from typing import Any

MAX_SIZE = 4096
"""The longest string, bytes or sequence a step may make."""
MAX_DEPTH = 40


BUILT = (ast.Call, ast.Subscript, ast.BinOp, ast.JoinedStr)
"""The expressions that may build a string at run time from constants."""
STRINGS = (ast.Constant, *BUILT)
"""The expressions that may be a string: a literal, or one built."""


class NotConstant(Exception):
    pass


BUILTINS: dict[str, Callable[..., Any]] = {
    "chr": chr,
    "ord": ord,
    "str": str,
    "bytes": bytes,
    "bytearray": bytearray,
    "reversed": lambda x: list(reversed(x)),
    "list": list,
    "tuple": tuple,
    "sorted": sorted,
    "len": len,
    "int": int,
    "abs": abs,
    "min": min,
    "max": max,
    "sum": sum,
}
MODULES: dict[str, dict[str, Callable[..., Any]]] = {
    "base64": {
        name: getattr(base64, name)
        for name in (
            "b64decode",
            "b64encode",
            "b32decode",
            "b16decode",
            "b85decode",
            "a85decode",
            "urlsafe_b64decode",
            "standard_b64decode",
        )
    },
    "codecs": {"decode": codecs.decode, "encode": codecs.encode},
    "binascii": {
        "unhexlify": binascii.unhexlify,
        "a2b_hex": binascii.a2b_hex,
        "a2b_base64": binascii.a2b_base64,
    },
}
TYPE_METHODS: dict[str, dict[str, Callable[..., Any]]] = {
    "str": {"join": str.join, "maketrans": str.maketrans},
    "bytes": {"fromhex": bytes.fromhex, "join": bytes.join},
}
METHODS = frozenset(
    {
        "decode",
        "encode",
        "join",
        "lower",
        "upper",
        "casefold",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "translate",
        "title",
        "capitalize",
        "swapcase",
        "removeprefix",
        "removesuffix",
        "split",
        "rsplit",
        "format",
        "zfill",
        "center",
        "ljust",
        "rjust",
        "hex",
        "partition",
        "rpartition",
    }
)
BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}


def fold(node: ast.AST) -> Any:
    """The value of ``node``, a constant expression; ``NotConstant`` where it is not one."""
    return _fold(node, 0, {})


def folded_string(node: ast.AST) -> str | None:
    """The string ``node`` evaluates to, where it is a constant expression; else None."""
    try:
        value = fold(node)
    except NotConstant:
        return None
    return value if isinstance(value, str) else None


def _checked(value: Any) -> Any:
    if isinstance(value, str | bytes | bytearray | list | tuple | dict) and len(value) > MAX_SIZE:
        raise NotConstant("too large")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        raise NotConstant("too large")
    return value


def _fold(node: ast.AST, depth: int, scope: dict[str, Any]) -> Any:
    if depth > MAX_DEPTH:
        raise NotConstant("too deep")
    depth += 1
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str | bytes | int | float | bool) or node.value is None:
            return _checked(node.value)
        raise NotConstant(type(node.value).__name__)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = _elements(node.elts, depth, scope)
        made: Any = tuple(items) if isinstance(node, ast.Tuple) else items
        return _checked(made if not isinstance(node, ast.Set) else sorted(set(items), key=repr))
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        raise NotConstant(node.id)
    if isinstance(node, ast.BinOp):
        op = BINARY.get(type(node.op))
        if op is None:
            raise NotConstant("operator")
        left, right = _fold(node.left, depth, scope), _fold(node.right, depth, scope)
        if isinstance(node.op, ast.Mult) and (
            isinstance(left, str | bytes | list | tuple) or isinstance(right, str | bytes | list)
        ):
            count = right if isinstance(left, str | bytes | list | tuple) else left
            size = len(left) if isinstance(left, str | bytes | list | tuple) else len(right)
            if not isinstance(count, int) or count * size > MAX_SIZE:
                raise NotConstant("too large")
        return _checked(_guarded(op, left, right))
    if isinstance(node, ast.UnaryOp):
        op1 = UNARY.get(type(node.op))
        if op1 is None:
            raise NotConstant("operator")
        return _checked(_guarded(op1, _fold(node.operand, depth, scope)))
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = _fold(value.value, depth, scope)
                spec = _fold(value.format_spec, depth, scope) if value.format_spec else ""
                conversions: dict[int, Callable[[Any], str]] = {115: str, 114: repr, 97: ascii}
                convert = conversions.get(value.conversion)
                parts.append(_guarded(format, convert(inner) if convert else inner, spec))
            else:
                parts.append(_fold(value, depth, scope))
        return _checked("".join(parts))
    if isinstance(node, ast.Subscript):
        base = _fold(node.value, depth, scope)
        if isinstance(node.slice, ast.Slice):
            bounds = [
                None if part is None else _fold(part, depth, scope)
                for part in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            return _checked(_guarded(operator.getitem, base, slice(*bounds)))
        return _checked(_guarded(operator.getitem, base, _fold(node.slice, depth, scope)))
    if isinstance(node, ast.ListComp | ast.GeneratorExp) and len(node.generators) == 1:
        generator = node.generators[0]
        if not isinstance(generator.target, ast.Name) or generator.is_async:
            raise NotConstant("comprehension")
        results = []
        for item in _fold(generator.iter, depth, scope):
            inner = {**scope, generator.target.id: item}
            if all(_fold(test, depth, inner) for test in generator.ifs):
                results.append(_fold(node.elt, depth, inner))
                _checked(results)
        return results
    if isinstance(node, ast.Compare):
        left = _fold(node.left, depth, scope)
        for cmp, comparator in zip(node.ops, node.comparators, strict=True):
            right = _fold(comparator, depth, scope)
            if not _guarded(COMPARE[type(cmp)], left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for part in node.values:
            result = _fold(part, depth, scope)
            if bool(result) is isinstance(node.op, ast.Or):
                return result
        return result
    if isinstance(node, ast.IfExp):
        test = _fold(node.test, depth, scope)
        return _fold(node.body if test else node.orelse, depth, scope)
    if isinstance(node, ast.Call):
        return _checked(_call(node, depth, scope))
    raise NotConstant(type(node).__name__)


WIDE = re.compile(r"\d{5,}")
"""A run of five digits in a format spec or template: a width that could make a huge string."""
WIDENING = frozenset({"zfill", "center", "ljust", "rjust", "expandtabs"})


def _elements(nodes: list[ast.expr], depth: int, scope: dict[str, Any]) -> list[Any]:
    """The values of a display's elements or a call's arguments, ``*x`` spread."""
    items: list[Any] = []
    for node in nodes:
        if isinstance(node, ast.Starred):
            items.extend(_fold(node.value, depth, scope))
        else:
            items.append(_fold(node, depth, scope))
    return items


def _guarded(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    name = getattr(function, "__name__", "")
    texts = [a for a in (*args, *kwargs.values()) if isinstance(a, str | bytes)]
    formats = function in (format, operator.mod) or name in ("format", "format_map")
    if formats and any(
        WIDE.search(t if isinstance(t, str) else t.decode("latin-1")) for t in texts
    ):
        raise NotConstant("a wide format")
    if name in WIDENING and any(isinstance(a, int) and a > MAX_SIZE for a in args):
        raise NotConstant("too wide")
    if function in (bytes, bytearray) and args and isinstance(args[0], int) and args[0] > MAX_SIZE:
        raise NotConstant("too large")
    try:
        return function(*args, **kwargs)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, LookupError) as e:
        raise NotConstant(str(e)) from None
    except (binascii.Error, UnicodeError, ZeroDivisionError) as e:
        raise NotConstant(str(e)) from None


def _module(node: ast.AST) -> str | None:
    """The module ``node`` names: ``base64`` spelled so, or ``__import__("base64")``."""
    if isinstance(node, ast.Name) and node.id in MODULES:
        return node.id
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("__import__",)
        and len(node.args) == 1
    ):
        try:
            name = _fold(node.args[0], 0, {})
        except NotConstant:
            return None
        return name if name in MODULES else None
    return None


def _function(node: ast.AST, depth: int, scope: dict[str, Any]) -> Callable[..., Any]:
    """The pure function ``node`` names, for ``map`` and calls."""
    if isinstance(node, ast.Name) and node.id in BUILTINS and node.id not in scope:
        return BUILTINS[node.id]
    if isinstance(node, ast.Attribute):
        module = _module(node.value)
        if module is not None and node.attr in MODULES[module]:
            return MODULES[module][node.attr]
        if isinstance(node.value, ast.Name) and node.value.id in TYPE_METHODS:
            found = TYPE_METHODS[node.value.id].get(node.attr)
            if found is not None:
                return found
        if node.attr in METHODS:
            bound = _fold(node.value, depth, scope)
            if isinstance(bound, str | bytes | bytearray):
                return getattr(bound, node.attr)  # type: ignore[no-any-return]
    if isinstance(node, ast.Lambda):
        params = [a.arg for a in node.args.args]
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.defaults:
            raise NotConstant("lambda")
        body = node.body

        def run(*values: Any) -> Any:
            if len(values) != len(params):
                raise NotConstant("lambda arity")
            return _fold(body, depth, {**scope, **dict(zip(params, values, strict=True))})

        return run
    raise NotConstant("function")


def _call(node: ast.Call, depth: int, scope: dict[str, Any]) -> Any:
    if isinstance(node.func, ast.Name) and node.func.id in ("map", "filter"):
        if len(node.args) < 2 or node.keywords:
            raise NotConstant(node.func.id)
        function = _function(node.args[0], depth, scope)
        iterables = [_fold(a, depth, scope) for a in node.args[1:]]
        if node.func.id == "filter":
            return [x for x in iterables[0] if _guarded(function, x)]
        return [_guarded(function, *items) for items in zip(*iterables, strict=False)]
    function = _function(node.func, depth, scope)
    args = _elements(node.args, depth, scope)
    kwargs = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise NotConstant("**")
        kwargs[keyword.arg] = _fold(keyword.value, depth, scope)
    if function in (str.join, bytes.join) or getattr(function, "__name__", "") == "join":
        args = [list(a) if not isinstance(a, str | bytes) else a for a in args]
    return _guarded(function, *args, **kwargs)
