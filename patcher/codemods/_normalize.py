"""One reading of a module for every analysis of a barrier: what Python does, spelled plainly.

A refusal need not be a ``raise``. ``warnings.warn(...)`` is one where warnings are errors,
which a deployment sets with ``-W error`` or ``PYTHONWARNINGS=error``, and a module with
``warnings.simplefilter("error")``; ``sys.exit()``, ``os._exit()`` and ``os.abort()`` end the
process. Each such call made as a statement is read as a ``raise`` at its place, so every
search that looks for a refusal (the signatures, the reach across modules, the interpreter that
decides a gate) sees the same refusals without each learning every spelling.
"""

from __future__ import annotations

import ast

WARNS = frozenset({"warn", "warn_explicit"})
EXITS = frozenset({"exit", "_exit", "abort", "quit"})


def refusing_call(call: ast.Call) -> bool:
    """Whether ``call`` refuses as a raise would: a warning (as under ``-W error``) or an exit;
    a logger's ``warn`` is not one."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in WARNS or func.id in ("exit", "quit")
    if isinstance(func, ast.Attribute):
        owner = func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else ""
        if "log" in owner_name.lower() or (
            isinstance(owner, ast.Attribute) and "log" in owner.attr.lower()
        ):
            return False
        if func.attr in WARNS:
            return True
        return func.attr in EXITS and (
            owner_name in ("sys", "os") or isinstance(owner, ast.Call)  # __import__("sys")
        )
    return False


class _Refusals(ast.NodeTransformer):
    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        if isinstance(node.value, ast.Call) and refusing_call(node.value):
            return ast.copy_location(ast.Raise(exc=node.value, cause=None), node)
        return node


def normalized(tree: ast.Module) -> ast.Module:
    """``tree`` with each refusing call made as a statement read as a ``raise`` of it."""
    return _Refusals().visit(tree)  # type: ignore[no-any-return]


def parse(text: str) -> ast.Module:
    return normalized(ast.parse(text))
