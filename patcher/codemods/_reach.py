"""Where a barrier can be reached across modules: the tree-wide half of a signature.

A per-module signature sees a barrier where its module says what it is about (``eagle3`` next to
a ``model_type``). A release can split that: the EAGLE-3 test in one module, the model-type check
that raises in a generic helper of another, handed the model type, the target's config or the
list; the model type read into a local first; a helper returning the model type. This follows
the calls that code on the EAGLE-3 path (or in the proposer) makes into any module of the tree,
resolved by import, and tracks which values derive from a model type through locals, arguments
and return values. It is conservative: a model-type decision on that path that may refuse is a
sighting, whatever it decides; only code shown to hold none is a proven absence.

Modules are parsed only as the calls reach them: a whole release (thousands of modules) would
take seconds to parse, and the EAGLE-3 path reaches a few dozen.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from patcher.codemods._fold import BUILT, STRINGS, folded_string
from patcher.codemods._gate_decision import (
    FUNCTIONS,
    HARMLESS_CALLS,
    LOGGERS,
    eagle3_functions,
    eagle3_spelling,
    is_property,
    names_draft,
    spelled,
    walk_body,
)

Function = ast.FunctionDef | ast.AsyncFunctionDef
MAX_DEPTH = 6
"""How many calls deep the path is followed from where it starts."""
MAX_REEXPORT = 4


def strings(node: ast.AST) -> Iterator[str]:
    """Every string spelled under ``node`` (see ``spelled``), and every name and attribute, in
    lower case; nested functions and classes included."""
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            yield child.id.lower()
        elif isinstance(child, ast.Attribute):
            yield child.attr.lower()
        elif isinstance(child, ast.arg):
            yield child.arg.lower()
        elif isinstance(child, FUNCTIONS | ast.ClassDef):
            yield child.name.lower()
        elif isinstance(child, STRINGS):
            text = spelled(child)
            if text is not None:
                yield text.lower()


def model_type_read(node: ast.AST) -> bool:
    """Whether ``node`` itself reads a model type not of a draft: ``x.model_type``,
    ``getattr(x, "model_type")``, ``x["model_type"]``, ``x.get("model_type")``, the name
    spelled in pieces included."""
    if isinstance(node, ast.Attribute):
        return node.attr == "model_type" and not names_draft(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        named = (isinstance(func, ast.Name) and func.id in ("getattr", "vars")) or (
            isinstance(func, ast.Attribute) and func.attr in ("get", "__getattribute__", "pop")
        )
        return (
            named and any(spelled(a) == "model_type" for a in node.args) and not names_draft(node)
        )
    if isinstance(node, ast.Subscript):
        return spelled(node.slice) == "model_type" and not names_draft(node.value)
    return False


@dataclass
class ModuleInfo:
    path: str
    dotted: str
    tree: ast.Module
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """local name -> (module, symbol): ``import a.b as x`` is ("a.b", None)."""
    owner: dict[ast.AST, ast.ClassDef] = field(default_factory=dict)
    parents: dict[ast.AST, Function] = field(default_factory=dict)  # a nested def's function
    strings: dict[str, ast.expr] = field(default_factory=dict)  # module-level constants
    package: str = ""
    eagle3_named: list[Function] | None = None  # ``eagle3_named``, worked out once


def add_imports(imports: dict[str, tuple[str, str | None]], node: ast.stmt, package: str) -> None:
    """What ``import``/``from ... import`` binds: local name -> (module, symbol or None)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                imports[alias.asname] = (alias.name, None)
            else:
                head = alias.name.split(".")[0]
                imports[head] = (head, None)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parts = package.split(".") if package else []
            parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
            base = ".".join([*parts, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        for alias in node.names:
            if alias.name != "*":
                imports[alias.asname or alias.name] = (base, alias.name)


@dataclass
class Facts:
    """What a search asks of one function, worked out once: its nodes (nested functions left
    out), the functions it nests, its local imports and the values its names are bound to."""

    nodes: list[ast.AST]
    nested: dict[str, Function]
    imports: dict[str, tuple[str, str | None]]
    assigned: dict[str, list[ast.AST]]


FACTS: weakref.WeakKeyDictionary[Function, Facts] = weakref.WeakKeyDictionary()
"""Each function's facts, while its tree lives (ast nodes hash by identity)."""


def facts(function: Function, package: str = "") -> Facts:
    held = FACTS.get(function)
    if held is not None:
        return held
    nodes = list(walk_body(function.body))
    nested = {
        n.name: n for n in ast.walk(function) if isinstance(n, FUNCTIONS) and n is not function
    }
    imports: dict[str, tuple[str, str | None]] = {}
    assigned: dict[str, list[ast.AST]] = {}
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            add_imports(imports, node, package)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    found = Facts(nodes, nested, imports, assigned)
    FACTS[function] = found
    return found


def dotted_name(path: str) -> str:
    name = path.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


class Program:
    """The modules of a tree, parsed as they are reached, with their imports resolved."""

    def __init__(
        self,
        names: Iterable[str],
        parse: Callable[[str], ast.Module | None],
        text: Callable[[str], str | None],
    ) -> None:
        self.names = {n for n in names if n.endswith(".py")}
        self.parse = parse
        self._text = text
        self._texts: dict[str, str | None] = {}
        self._infos: dict[str, ModuleInfo | None] = {}
        self._by_name: dict[tuple[str, str], list[tuple[ModuleInfo, Function]]] = {}

    def text(self, path: str) -> str | None:
        if path not in self._texts:
            self._texts[path] = self._text(path)
        return self._texts[path]

    def may_define(self, path: str, name: str) -> bool:
        """Whether the module at ``path`` may hold ``def name``: a cheap look at its text
        before it is parsed."""
        text = self.text(path)
        return text is None or f"def {name}" in text or ("import" in text and name in text)

    def binding(self, dotted: str, name: str) -> ModuleInfo | None:
        """The module ``dotted``, where it may bind ``name`` to a value (``NAME = ...`` at its
        top level, or an import of it); None where its text shows it cannot (a class, a function,
        or no such name), so that a name imported for its class is not a module parsed."""
        path = self.path_of(dotted)
        if path is None:
            return None
        text = self.text(path)
        if text is not None:
            escaped = re.escape(name)
            if re.search(rf"^(?:class|def|async\s+def)\s+{escaped}\b", text, re.M) or not (
                re.search(rf"\b{escaped}\b", text)
            ):
                return None
        return self.info(path)

    def path_of(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.names:
                return candidate
        return None

    def info(self, path: str) -> ModuleInfo | None:
        if path not in self._infos:
            tree = self.parse(path)
            self._infos[path] = None if tree is None else self._index(path, tree)
        return self._infos[path]

    def module(self, dotted: str) -> ModuleInfo | None:
        path = self.path_of(dotted)
        return None if path is None else self.info(path)

    def _index(self, path: str, tree: ast.Module) -> ModuleInfo:
        """A module's top-level functions, its classes and their methods, what it imports and
        the values its top level assigns; statements under ``if``/``try``/``with`` included,
        function bodies not (their imports are read where a call in them is resolved)."""
        info = ModuleInfo(path, dotted_name(path), tree)
        package = info.dotted if path.endswith("/__init__.py") else info.dotted.rpartition(".")[0]
        pending: list[ast.stmt] = list(tree.body)
        while pending:
            node = pending.pop(0)
            if isinstance(node, ast.ClassDef):
                info.classes.setdefault(node.name, node)
                for item in node.body:
                    if isinstance(item, FUNCTIONS):
                        info.owner[item] = node
                    elif isinstance(item, ast.ClassDef):
                        pending.append(item)
            elif isinstance(node, FUNCTIONS):
                info.functions.setdefault(node.name, node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                add_imports(info.imports, node, package)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        info.strings[target.id] = node.value
            else:
                for block in ("body", "orelse", "finalbody"):
                    pending += getattr(node, block, []) or []
                for handler in getattr(node, "handlers", []) or []:
                    pending += handler.body
        info.package = package
        return info

    def symbol(
        self, info: ModuleInfo, name: str, hops: int = 0
    ) -> list[tuple[ModuleInfo, ast.AST]]:
        """What ``name`` is in ``info``: a function, a class, or what an import brings in
        (followed through re-exports); [] where it is none of those in this tree."""
        if name in info.functions:
            return [(info, info.functions[name])]
        if name in info.classes:
            return [(info, info.classes[name])]
        if name not in info.imports or hops > MAX_REEXPORT:
            return []
        module, symbol = info.imports[name]
        if symbol is None:
            target = self.module(module)
            return [(target, target.tree)] if target is not None else []
        target = self.module(module)
        if target is None:
            sub = self.module(f"{module}.{symbol}")  # ``from pkg import submodule``
            return [(sub, sub.tree)] if sub is not None else []
        found = self.symbol(target, symbol, hops + 1)
        if not found:
            sub = self.module(f"{module}.{symbol}")
            if sub is not None:
                return [(sub, sub.tree)]
        return found

    def local_symbol(
        self, info: ModuleInfo, known: Facts, name: str
    ) -> list[tuple[ModuleInfo, ast.AST]]:
        """``symbol``, with the function's own imports first."""
        if name in known.imports:
            scratch = ModuleInfo(info.path, info.dotted, info.tree, imports=known.imports)
            return self.symbol(scratch, name)
        return self.symbol(info, name)

    def methods(
        self, info: ModuleInfo, klass: ast.ClassDef, name: str, hops: int = 0
    ) -> list[tuple[ModuleInfo, Function]]:
        """``klass.name``: its own method, else its bases' (resolved by import)."""
        for item in klass.body:
            if isinstance(item, FUNCTIONS) and item.name == name:
                return [(info, item)]
        found: list[tuple[ModuleInfo, Function]] = []
        if hops > MAX_REEXPORT:
            return found
        for base in klass.bases:
            if isinstance(base, ast.Name):
                for owner, node in self.symbol(info, base.id):
                    if isinstance(node, ast.ClassDef):
                        found += self.methods(owner, node, name, hops + 1)
        return found

    def imported_classes(
        self, info: ModuleInfo, method: str
    ) -> Iterator[tuple[ModuleInfo, ast.ClassDef]]:
        """The classes ``info`` defines or imports by name (a CapWords name) that may have
        ``method``."""
        for klass in info.classes.values():
            yield info, klass
        for name, (module, symbol) in info.imports.items():
            if symbol is not None and name[:1].isupper():
                path = self.path_of(module)
                text = self.text(path) if path is not None else None
                if text is not None and f"class {symbol}" in text and f"def {method}" not in text:
                    continue  # defined there, without the method (bases aside)
                for owner, node in self.symbol(info, name):
                    if isinstance(node, ast.ClassDef):
                        yield owner, node

    def made(
        self, info: ModuleInfo, function: Function, call: ast.Call
    ) -> list[tuple[ModuleInfo, Function]]:
        """Where ``call`` makes an instance of a class of the tree (``Class(...)``,
        ``module.Class(...)``): what Python runs of it implicitly (``implicit_methods``)."""
        func = call.func
        known = facts(function, info.package)
        found: list[tuple[ModuleInfo, Function]] = []
        if isinstance(func, ast.Name):
            symbols = list(self.local_symbol(info, known, func.id))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            symbols = []
            for owner, node in self.local_symbol(info, known, func.value.id):
                if isinstance(node, ast.Module):
                    symbols += list(self.symbol(owner, func.attr))
        else:
            return found
        for owner, node in symbols:
            if isinstance(node, ast.ClassDef):
                found += [(owner, method) for method in implicit_methods(node)]
        return found

    def callees(
        self, info: ModuleInfo, function: Function, call: ast.Call, by_name: bool = True
    ) -> list[tuple[ModuleInfo, Function]]:
        """The functions ``call`` (in ``function`` of ``info``) may run, as far as the tree
        shows: nested and module functions, imports, ``module.f``, ``self.f`` and ``Class.f``,
        and ``obj.f`` for ``f`` a method of a class the module defines or imports."""
        func = call.func
        found: list[tuple[ModuleInfo, Function]] = []
        known = facts(function, info.package)
        if isinstance(func, ast.Name):
            if func.id in known.nested:
                return [(info, known.nested[func.id])]
            for owner, node in self.local_symbol(info, known, func.id):
                if isinstance(node, FUNCTIONS):
                    found.append((owner, node))
            return found
        if not isinstance(func, ast.Attribute):
            return found
        name = func.attr
        value = func.value
        if isinstance(value, ast.Name):
            if value.id in ("self", "cls"):
                klass = info.owner.get(function)
                if klass is None:
                    if function not in info.parents:
                        for method in list(info.owner):
                            if any(n is function for n in ast.walk(method)):
                                info.parents[function] = method  # type: ignore[assignment]
                                break
                    parent = info.parents.get(function)
                    klass = info.owner.get(parent) if parent is not None else None
                if klass is not None:
                    found += self.methods(info, klass, name)
                if found:
                    return found
            else:
                for owner, node in self.local_symbol(info, known, value.id):
                    if isinstance(node, ast.Module) and name in owner.functions:
                        return [(owner, owner.functions[name])]
                    if isinstance(node, ast.Module):
                        for target, inner in self.symbol(owner, name):
                            if isinstance(inner, FUNCTIONS):
                                found.append((target, inner))
                        return found
                    if isinstance(node, ast.ClassDef):
                        return self.methods(owner, node, name)
        if name.startswith("__") or name in HARMLESS_METHODS or not by_name:
            return found
        key = (info.path, name)
        if key not in self._by_name:
            self._by_name[key] = [
                pair
                for owner, klass in self.imported_classes(info, name)
                for pair in self.methods(owner, klass, name)
            ]
        return found + self._by_name[key]


def implicit_methods(klass: ast.ClassDef) -> list[Function]:
    """What Python runs of ``klass`` for code that makes an instance and uses it, naming none
    of it: its dunder methods (``__init__``, ``__post_init__``, ``__enter__``, ``__getattr__``…)
    and its properties (``property``, ``cached_property``, a library's ``*_property``)."""
    return [
        item
        for item in klass.body
        if isinstance(item, FUNCTIONS)
        and ((item.name.startswith("__") and item.name.endswith("__")) or is_property(item))
    ]


HARMLESS_METHODS = frozenset(
    {"get", "items", "keys", "values", "append", "extend", "format", "join", "lower", "upper"}
)


def nodes_of(function: Function) -> list[ast.AST]:
    return facts(function).nodes


def assigned_names(target: ast.AST) -> Iterator[str]:
    """The names a store binds: ``x``, ``self.x``, each of a tuple's, a starred one."""
    if isinstance(target, ast.Name):
        yield target.id
    elif (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        yield f"self.{target.attr}"
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from assigned_names(element)
    elif isinstance(target, ast.Starred):
        yield from assigned_names(target.value)


class Reach:
    """The taint of model types along the calls of one search."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._returns: dict[tuple[Function, frozenset[str]], bool] = {}
        self._refuses: dict[Function, bool] = {}

    def tainted(self, info: ModuleInfo, function: Function, params: frozenset[str]) -> set[str]:
        """The names in ``function`` holding a value derived from a model type (or from the
        ``params`` that do): locals, loop targets, ``self.x`` stores, fixed point."""
        tainted = set(params)
        nodes = nodes_of(function)
        changed = True
        while changed:
            changed = False
            for node in nodes:
                pairs: list[tuple[ast.AST, ast.AST]] = []
                if isinstance(node, ast.Assign):
                    pairs = [(t, node.value) for t in node.targets]
                elif (
                    isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None
                ) or isinstance(node, ast.NamedExpr):
                    assert node.value is not None
                    pairs = [(node.target, node.value)]
                elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    pairs = [(node.target, node.iter)]
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    pairs = [(node.optional_vars, node.context_expr)]
                for target, value in pairs:
                    if self.depends(info, function, value, tainted):
                        for name in assigned_names(target):
                            if name not in tainted:
                                tainted.add(name)
                                changed = True
        return tainted

    def depends(
        self, info: ModuleInfo, function: Function, node: ast.AST, tainted: set[str]
    ) -> bool:
        for child in ast.walk(node):
            if model_type_read(child):
                return True
            if isinstance(child, ast.Name) and child.id in tainted:
                return True
            if (
                isinstance(child, ast.Attribute)
                and isinstance(child.value, ast.Name)
                and child.value.id == "self"
                and f"self.{child.attr}" in tainted
            ):
                return True
            if (
                isinstance(child, ast.Call)
                and self.hands_over(child, tainted)
                and self.call_returns_type(info, function, child, tainted)
            ):
                return True
        return False

    def hands_over(self, call: ast.Call, tainted: set[str]) -> bool:
        """Whether ``call`` may compute a model type: it is given one, or the target (its
        config, its model), or it is a method of the object itself (``self.model_type()``)."""
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        ):
            return True
        given = [*call.args, *(k.value for k in call.keywords)]
        if isinstance(func, ast.Attribute):
            given.append(func.value)
        return any(self.shallow(a, tainted) or names_target(a) for a in given)

    def call_returns_type(
        self,
        info: ModuleInfo,
        function: Function,
        call: ast.Call,
        tainted: set[str],
        depth: int = 0,
    ) -> bool:
        """Whether a call resolved in the tree returns a value derived from a model type: one
        it reads, or one it is given."""
        if depth > 2:
            return False
        for owner, callee in self.program.callees(info, function, call):
            params = self.bound_params(callee, call, lambda a: self.shallow(a, tainted))
            key = (callee, frozenset(params))
            if key not in self._returns:
                self._returns[key] = False  # a recursion reads as no
                inner = self.tainted(owner, callee, frozenset(params))
                self._returns[key] = any(
                    isinstance(n, ast.Return)
                    and n.value is not None
                    and (
                        any(model_type_read(c) for c in ast.walk(n.value))
                        or any(isinstance(c, ast.Name) and c.id in inner for c in ast.walk(n.value))
                    )
                    for n in nodes_of(callee)
                )
            if self._returns[key]:
                return True
        return False

    def returns_type(self, info: ModuleInfo, function: Function, params: frozenset[str]) -> bool:
        """Whether ``function``, its ``params`` holding model types, returns one."""
        key = (function, frozenset(params))
        if key not in self._returns:
            self._returns[key] = False  # a recursion reads as no
            inner = self.tainted(info, function, params)
            self._returns[key] = any(
                isinstance(n, ast.Return)
                and n.value is not None
                and self.depends(info, function, n.value, inner)
                for n in nodes_of(function)
            )
        return self._returns[key]

    @staticmethod
    def shallow(node: ast.AST, tainted: set[str]) -> bool:
        return any(
            model_type_read(c) or (isinstance(c, ast.Name) and c.id in tainted)
            for c in ast.walk(node)
        )

    @staticmethod
    def bound_params(
        callee: Function, call: ast.Call, taints: Callable[[ast.AST], bool]
    ) -> set[str]:
        """The parameters of ``callee`` that ``call`` hands a value ``taints`` holds for."""
        params = [*callee.args.posonlyargs, *callee.args.args]
        if params and params[0].arg in ("self", "cls") and isinstance(call.func, ast.Attribute):
            params = params[1:]
        found = set()
        for param, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            if taints(arg):
                found.add(param.arg)
        if any(isinstance(a, ast.Starred) and taints(a) for a in call.args):
            found |= {p.arg for p in params}
            if callee.args.vararg:
                found.add(callee.args.vararg.arg)
        elif callee.args.vararg and any(taints(a) for a in call.args[len(params) :]):
            found.add(callee.args.vararg.arg)
        for keyword in call.keywords:
            if taints(keyword.value):
                if keyword.arg is None:
                    found |= {p.arg for p in [*params, *callee.args.kwonlyargs]}
                else:
                    found.add(keyword.arg)
        return found

    def refuses(self, info: ModuleInfo, function: Function, depth: int = 0) -> bool:
        """Whether ``function`` may refuse: a ``raise`` or ``assert`` in it, or a call to a
        function of the tree that does (followed two deep)."""
        key = function
        if key in self._refuses:
            return self._refuses[key]
        self._refuses[key] = False
        result = False
        for node in nodes_of(function):
            if isinstance(node, ast.Raise | ast.Assert):
                result = True
                break
            if (
                depth < 2
                and isinstance(node, ast.Call)
                and any(
                    self.refuses(owner, callee, depth + 1)
                    for owner, callee in self.program.callees(info, function, node)
                )
            ):
                result = True
                break
        self._refuses[key] = result
        return result


def names_target(node: ast.AST) -> bool:
    """Whether ``node`` names the target (its config, its model), not a draft."""
    return not names_draft(node) and any(
        "target" in (getattr(n, "id", None) or getattr(n, "attr", None) or "").lower()
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    )


def harmless(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in HARMLESS_CALLS or func.id in ("any", "all", "getattr", "hasattr")
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, ast.Attribute | ast.Call):
            root = root.func if isinstance(root, ast.Call) else root.value
        return (isinstance(root, ast.Name) and root.id in LOGGERS) or func.attr in (
            "lower",
            "upper",
            "startswith",
            "endswith",
            "strip",
            "get",
            "format",
            "join",
            "append",
            "debug",
            "info",
            "warning",
            "warning_once",
            "info_once",
        )
    return False


def decision_tests(node: ast.AST) -> list[ast.AST]:
    """The expressions a statement decides on: an ``if``'s or ``while``'s test, an
    ``assert``'s, a ``match``'s subject, a conditional expression's or ``and``/``or``'s."""
    if isinstance(node, ast.If | ast.While | ast.Assert | ast.IfExp):
        return [node.test]
    if isinstance(node, ast.Match):
        return [node.subject]
    if isinstance(node, ast.BoolOp):
        return list(node.values[:-1])
    return []


def string_list(info: ModuleInfo, function: Function, node: ast.AST, hops: int = 0) -> bool:
    """Whether ``node`` is a list, tuple or set of strings, or a name bound to one."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return bool(node.elts) and all(spelled(e) is not None for e in node.elts)
    if isinstance(node, ast.Name) and hops < MAX_REEXPORT:
        for value in facts(function).assigned.get(node.id, []):
            if string_list(info, function, value, hops + 1):
                return True
        bound = info.strings.get(node.id)
        return bound is not None and string_list(info, function, bound, hops + 1)
    return False


@dataclass(frozen=True)
class Step:
    info: ModuleInfo
    function: Function
    params: frozenset[str]
    depth: int
    root: bool


def eagle3_gate_sightings(program: Program, roots: Iterable[str]) -> Iterator[tuple[str, int]]:
    """Where the EAGLE-3 path leaves the modules ``roots`` for a function of the tree that
    decides on a model type and may refuse.

    The path is the interpreter's (``_gate_decision``): the calls it makes, from every function
    naming EAGLE-3, that it does not follow and that are handed the target, a model type or a
    list of strings (``decision_escapes``). Each is resolved by import into any module and read
    there: a test on a model type (one it reads, or one it was handed, through locals and
    helpers) in a function that raises or asserts, or calls one that does, is a sighting; so is
    a call there that returns a model type to the EAGLE-3 path, since what the caller then does
    with it is not followed. Such a helper's own calls are followed where they hand over the
    same."""
    reach = Reach(program)
    pending: list[Step] = []
    for path in roots:
        info = program.info(path)
        if info is None:
            continue
        for function in eagle3_named(program, info):  # code made of a string, on the path
            for node in nodes_of(function):
                if runs_code(node):
                    yield info.path, getattr(node, "lineno", function.lineno)
        for function, call, deps, keywords in escapes_of(info.tree):
            if not isinstance(call.func, ast.Name | ast.Attribute) and (
                any(deps) or any(keywords.values())
            ):
                # the model type handed to a function chosen at run time (a dispatch table's
                # .get(method, default)): what it runs is not read, and may refuse
                yield info.path, call.lineno
            for owner, callee in program.callees(info, function, call):
                params = bound_by_flags(callee, call, deps, keywords)
                returns = reach.returns_type(owner, callee, frozenset(params))
                if returns:
                    yield info.path, call.lineno
                pending.append(Step(owner, callee, frozenset(params), 1, False))
    pending += eagle3_callers(program, reach, roots)
    yield from follow(program, reach, pending)


def eagle3_callers(program: Program, reach: Reach, roots: Iterable[str]) -> list[Step]:
    """The calls that enter the EAGLE-3 check from outside it: any function of the modules
    ``roots`` (EAGLE-3 named or not: ``_verify_args`` calling ``_gate(self.method, mt)``)
    calling a function of those modules that names EAGLE-3, may refuse, and decides on what it
    is handed or on a model type it reads (a nested function, a function of the module or of
    another, a static or class method), each with the parameters its arguments hand a model
    type. The interpreter runs a function naming EAGLE-3 with its parameters unknown, so a check
    there on a model type it is handed (guard clauses, ``any``, a loop over the list,
    ``cond and _refuse()``) decides nothing for it; followed from the call, a decision there on
    a model type (one it is handed or reads) is a sighting."""
    infos = [info for info in map(program.info, roots) if info is not None]
    candidates: set[str] = set()
    functions: set[str] = set()  # called by name, or through their module
    methods: set[str] = set()  # called through self, cls, super() or their class
    classes: set[str] = set()
    for info in infos:
        for function in eagle3_named(program, info):
            name = function.name
            if (name.startswith("__") and name.endswith("__")) or not decides_on_input(function):
                continue
            candidates.add(name)
            klass = info.owner.get(function)
            if klass is None:
                functions.add(name)
            else:
                methods.add(name)
                classes.add(klass.name)
    steps: list[Step] = []
    if not candidates:
        return steps
    names = "|".join(map(re.escape, sorted(candidates)))
    called = re.compile(rf"\b({names})\s*\(")
    held_by = "|".join(map(re.escape, sorted({"self", "cls", *classes})))
    owners = re.compile(rf"(?:\b(?:{held_by})|\))\.$")  # self., cls., super()., Class.
    for path in sorted(program.names):
        text = program.text(path) or ""
        if not any(name in text for name in candidates):
            continue
        lines = {
            text.count("\n", 0, match.start()) + 1
            for match in called.finditer(text)
            if match.group(1) in functions
            or (
                match.group(1) in methods
                and owners.search(text, max(0, match.start() - 80), match.start()) is not None
            )
        }
        caller = program.info(path) if lines else None
        if caller is None:
            continue
        for function in enclosing_functions(caller.tree, lines):
            steps += calls_into(program, reach, caller, function, candidates)
    return steps


def calls_into(
    program: Program, reach: Reach, info: ModuleInfo, function: Function, candidates: set[str]
) -> list[Step]:
    """The calls ``function`` makes to a function named in ``candidates`` that names EAGLE-3
    and may refuse, each with the parameters its arguments hand a model type."""
    steps: list[Step] = []
    tainted: set[str] | None = None
    for call in nodes_of(function):
        if not (isinstance(call, ast.Call) and called_name(call) in candidates):
            continue
        for owner, callee in program.callees(info, function, call, by_name=False):
            if (
                callee is function
                or callee.name not in candidates
                or not any(callee is f for f in eagle3_named(program, owner))
                or not reach.refuses(owner, callee)
            ):
                continue
            if tainted is None:
                tainted = reach.tainted(info, function, frozenset())
            held = tainted

            def holds_type(arg: ast.AST, held: set[str] = held) -> bool:
                return reach.depends(info, function, arg, held)

            params = reach.bound_params(callee, call, holds_type)
            steps.append(Step(owner, callee, frozenset(params), 1, False))
    return steps


def lines_of(text: str, pattern: re.Pattern[str]) -> set[int]:
    """The lines (from 1) where ``pattern`` matches ``text``."""
    return {text.count("\n", 0, match.start()) + 1 for match in pattern.finditer(text)}


def eagle3_named(program: Program, info: ModuleInfo) -> list[Function]:
    """The functions of ``info`` that name EAGLE-3 (``eagle3_functions``), or a constant of
    their module holding it (``SPEC_METHODS = ("eagle3",)``, a string, a list, a set)."""
    if info.eagle3_named is None:
        found = list(eagle3_functions(info.tree))
        aliases = [name for name, value in info.strings.items() if holds_eagle3(value)]
        if aliases:
            text = program.text(info.path) or ""
            alias = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(aliases)))})\b")
            for function in enclosing_functions(info.tree, lines_of(text, alias)):
                if not any(function is f for f in found):
                    found.append(function)
        info.eagle3_named = found
    return info.eagle3_named


def holds_eagle3(value: ast.AST) -> bool:
    """Whether a constant's value names EAGLE-3: a string spelling it, or a tuple, list or set
    (literal, or ``frozenset(...)`` of one) with such a string."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    if isinstance(value, ast.Tuple | ast.List | ast.Set):
        return any(eagle3_spelling(e) for e in value.elts)
    return eagle3_spelling(value)


DECIDES: weakref.WeakKeyDictionary[Function, bool] = weakref.WeakKeyDictionary()


def decides_on_input(function: Function) -> bool:
    """Whether a decision of ``function`` may depend on one of its parameters (``self`` and
    ``cls`` aside), or on a model type it reads: by the names a decision test holds, through
    the locals bound from them (by ``ast`` alone, no call followed: a cheap first look); kept
    while its tree lives."""
    held = DECIDES.get(function)
    if held is None:
        held = DECIDES[function] = input_decided(function)
    return held


def input_decided(function: Function) -> bool:
    arguments = function.args
    tainted = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if a.arg not in ("self", "cls")
    }
    tainted |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    nodes = nodes_of(function)

    def depends(node: ast.AST) -> bool:
        return any(
            model_type_read(c) or (isinstance(c, ast.Name) and c.id in tainted)
            for c in ast.walk(node)
        )

    changed = True
    while changed:
        changed = False
        for node in nodes:
            value = getattr(node, "value", None)
            if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                value = node.iter
            target = getattr(node, "target", None)
            targets = node.targets if isinstance(node, ast.Assign) else [target]
            if value is None or not isinstance(value, ast.AST) or not depends(value):
                continue
            for bound in targets:
                for name in assigned_names(bound) if bound is not None else ():
                    if name not in tainted:
                        tainted.add(name)
                        changed = True
    return any(depends(test) for node in nodes for test in decision_tests(node))


DEFINED: weakref.WeakKeyDictionary[ast.Module, list[Function]] = weakref.WeakKeyDictionary()


def enclosing_functions(tree: ast.Module, lines: set[int]) -> list[Function]:
    """The innermost function of ``tree`` holding each of ``lines``; the functions are found
    through the statements alone (no expression walked) and kept for the tree."""
    if not lines:
        return []
    defined = DEFINED.get(tree)
    if defined is None:
        defined = []
        pending: list[ast.stmt] = list(tree.body)
        while pending:
            node = pending.pop()
            if isinstance(node, FUNCTIONS):
                defined.append(node)
            for block in ("body", "orelse", "finalbody"):
                pending += getattr(node, block, None) or []
            for handler in getattr(node, "handlers", None) or []:
                pending += handler.body
            for case in getattr(node, "cases", None) or []:
                pending += case.body
        DEFINED[tree] = defined
    found: dict[Function, None] = {}
    for line in sorted(lines):
        holding = [f for f in defined if f.lineno <= line <= (f.end_lineno or f.lineno)]
        if holding:
            found[max(holding, key=lambda f: f.lineno)] = None
    return list(found)


def called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


ESCAPES: weakref.WeakKeyDictionary[ast.Module, list] = weakref.WeakKeyDictionary()


def escapes_of(tree: ast.Module) -> list:
    from patcher.codemods._gate_decision import decision_escapes

    held = ESCAPES.get(tree)
    if held is None:
        held = ESCAPES[tree] = decision_escapes(tree)
    return held


def bound_by_flags(
    callee: Function, call: ast.Call, deps: tuple[bool, ...], keywords: dict[str, bool]
) -> set[str]:
    """The parameters of ``callee`` that ``call`` hands a model type, by the interpreter's
    flags for its arguments."""
    params = [*callee.args.posonlyargs, *callee.args.args]
    if params and params[0].arg in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    found = {p.arg for p, dep in zip(params, deps, strict=False) if dep}
    if callee.args.vararg and any(deps[len(params) :]):
        found.add(callee.args.vararg.arg)
    found |= {name for name, dep in keywords.items() if dep}
    return found


def follow(program: Program, reach: Reach, pending: list[Step]) -> Iterator[tuple[str, int]]:
    seen: set[tuple[Function, frozenset[str]]] = set()
    while pending:
        step = pending.pop()
        key = (step.function, step.params)
        if key in seen:
            continue
        seen.add(key)
        info, function = step.info, step.function
        tainted = reach.tainted(info, function, step.params)
        for node in nodes_of(function):
            if runs_code(node):  # code this cannot read, on the path: it may refuse
                yield info.path, getattr(node, "lineno", function.lineno)
            tests = decision_tests(node)
            if any(reach.depends(info, function, t, tainted) for t in tests) and reach.refuses(
                info, function
            ):
                yield info.path, getattr(node, "lineno", function.lineno)
        if step.depth < MAX_DEPTH:
            pending += next_steps(program, reach, step, tainted)


def runs_code(node: ast.AST) -> bool:
    """``exec(...)``, ``eval(...)`` or ``compile(...)``: code made of a string, which may do
    anything (refuse, read ``image_token_index``) where no search can read it."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("exec", "eval", "compile")
    )


def next_steps(program: Program, reach: Reach, step: Step, tainted: set[str]) -> list[Step]:
    """The calls ``step``'s function makes that hand over a model type, the target or a list
    of strings, each callee with the parameters that receive a model type."""
    info, function = step.info, step.function
    found = []

    def holds_type(arg: ast.AST) -> bool:
        return reach.depends(info, function, arg, tainted)

    for node in nodes_of(function):
        if not isinstance(node, ast.Call) or harmless(node):
            continue
        given = [*node.args, *(k.value for k in node.keywords)]
        if not any(
            holds_type(a) or string_list(info, function, a) or names_target(a) for a in given
        ):
            continue
        for owner, callee in program.callees(info, function, node):
            params = reach.bound_params(callee, node, holds_type)
            found.append(Step(owner, callee, frozenset(params), step.depth + 1, False))
    return found


def image_token_index_sightings(
    program: Program, roots: Iterable[str]
) -> Iterator[tuple[str, int]]:
    """Where the proposer's multimodal code (each function of the modules ``roots`` that names
    an image or multimodality, in any spelling), followed through the calls it makes into any
    module, reads ``image_token_index``: as an attribute, or named by a string in any spelling
    (``getattr(c, "image_" + "token_index")``)."""
    pending: list[Step] = []
    for path in roots:
        info = program.info(path)
        if info is None:
            continue
        for node in ast.walk(info.tree):
            if isinstance(node, FUNCTIONS) and any(
                "image" in text or "multimodal" in text for text in strings(node)
            ):
                pending.append(Step(info, node, frozenset(), 0, True))
    seen: set[Function] = set()
    while pending:
        step = pending.pop()
        if step.function in seen:
            continue
        seen.add(step.function)
        resolve = bindings(program, step.info, step.function)
        for node in nodes_of(step.function):
            if reads_image_token_index(node) or runs_code(node):
                yield step.info.path, getattr(node, "lineno", step.function.lineno)
            for name in named_by(node):  # a name standing for an attribute's or a key's
                if reads_image_token_index(name, resolve):
                    yield step.info.path, getattr(node, "lineno", step.function.lineno)
        if step.depth >= IMAGE_DEPTH:
            continue
        for node in nodes_of(step.function):
            if isinstance(node, ast.Call) and not harmless(node):
                for owner, callee in [
                    *program.callees(step.info, step.function, node, by_name=False),
                    *program.made(step.info, step.function, node),
                ]:
                    pending.append(Step(owner, callee, frozenset(), step.depth + 1, False))


IMAGE_DEPTH = 3
"""How many calls deep the proposer's multimodal code is followed."""


IMAGE_TOKEN_INDEX = "image_token_index"
Pattern = tuple[str | None, ...]
"""A string as far as it is known: its parts in order, None for a part that may be anything."""
MAX_PATTERNS = 16
Resolve = Callable[[ast.expr], list[ast.expr]]
"""What a name (or ``module.NAME``) may be bound to: the values assigned to it, [] unknown."""


def patterns(node: ast.AST, resolve: Resolve | None = None, hops: int = 0) -> set[Pattern]:
    """The strings ``node`` may evaluate to, each as a ``Pattern``: literals, ``+``, f-strings,
    ``%`` and ``.format`` (each placeholder a part not known), ``"sep".join([...])``,
    ``str()``/``.lower()``/``.upper()`` of one, and names bound to any of these (``resolve``:
    locals, the module's constants, another module's, imported). Anything else is a part not
    known."""
    unknown: set[Pattern] = {(None,)}
    if isinstance(node, ast.Call | ast.Subscript):
        text = folded_string(node)
        if text is not None:
            return {(text,)}
    if isinstance(node, ast.Constant):
        return {(node.value,)} if isinstance(node.value, str) else unknown
    if isinstance(node, ast.JoinedStr):
        return concatenated(
            [
                patterns(v.value, resolve, hops)
                if isinstance(v, ast.FormattedValue)
                else patterns(v, resolve, hops)
                for v in node.values
            ]
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return concatenated(
            [patterns(node.left, resolve, hops), patterns(node.right, resolve, hops)]
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return {placeheld(p, PERCENT) for p in patterns(node.left, resolve, hops)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, base = node.func.attr, node.func.value
        if method == "format":
            return {placeheld(p, BRACES) for p in patterns(base, resolve, hops)}
        if method in ("lower", "upper", "casefold", "strip") and not node.args:
            return {
                tuple(None if part is None else getattr(part, method)() for part in p)
                for p in patterns(base, resolve, hops)
            }
        if method == "join" and len(node.args) == 1:
            items = node.args[0]
            if not isinstance(items, ast.List | ast.Tuple):
                return unknown
            found: set[Pattern] = set()
            for separator in patterns(base, resolve, hops):
                pieces: list[set[Pattern]] = []
                for i, item in enumerate(items.elts):
                    if i:
                        pieces.append({separator})
                    pieces.append(patterns(item, resolve, hops))
                found |= concatenated(pieces)
            return capped(found)
        return unknown
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "str" and len(node.args) == 1:
            return patterns(node.args[0], resolve, hops)
        return unknown
    if isinstance(node, ast.Name | ast.Attribute) and resolve is not None and hops < MAX_REEXPORT:
        values = resolve(node)
        found = set()
        for value in values:
            found |= patterns(value, resolve, hops + 1)
        return capped(found) if found else unknown
    return unknown


PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[a-zA-Z]")
BRACES = re.compile(r"\{[^{}]*\}")


def placeheld(pattern: Pattern, placeholder: re.Pattern[str]) -> Pattern:
    """``pattern`` with each placeholder of its known parts (``%s``, ``{}``) a part not known."""
    parts: list[str | None] = []
    for part in pattern:
        if part is None:
            parts.append(None)
            continue
        pieces = placeholder.split(part)
        for i, piece in enumerate(pieces):
            if i:
                parts.append(None)
            parts.append(piece.replace("%%", "%") if placeholder is PERCENT else piece)
    return tuple(parts)


def concatenated(pieces: list[set[Pattern]]) -> set[Pattern]:
    found: set[Pattern] = {()}
    for options in pieces:
        found = capped({a + b for a in found for b in options})
    return found


def capped(found: set[Pattern]) -> set[Pattern]:
    """At most ``MAX_PATTERNS`` alternatives: past that, a string not known at all."""
    return found if len(found) <= MAX_PATTERNS else {(None,)}


def may_spell(node: ast.AST, text: str, resolve: Resolve | None = None) -> bool:
    """Whether ``node`` may evaluate to ``text``: one of its patterns matches it, and holds at
    least 8 known characters (a string not known at all, or ``f"{a}_{b}"``, spells anything
    and is no sign of this one)."""
    for pattern in patterns(node, resolve):
        known = "".join(part for part in pattern if part is not None)
        if pattern == (text,) or (
            len(known) >= 8
            and re.fullmatch(
                "".join(".*" if part is None else re.escape(part) for part in pattern), text
            )
        ):
            return True
    return False


def reads_image_token_index(node: ast.AST, resolve: Resolve | None = None) -> bool:
    """Whether ``node`` reads ``image_token_index``: the attribute, or a string that may name it,
    however built (``"image_" + "token_index"``, ``f"image_token_{suffix}"``,
    ``"image_token_%s" % x``, ``"image_token_{}".format(x)``), a name bound to one included where
    ``resolve`` says what names are bound to (``IMAGE_TOKEN_ATTR`` of this module or another)."""
    if isinstance(node, ast.Attribute):
        if node.attr == IMAGE_TOKEN_INDEX:
            return isinstance(node.ctx, ast.Load)
        return resolve is not None and may_spell(node, IMAGE_TOKEN_INDEX, resolve)
    if isinstance(node, ast.Name):
        return resolve is not None and may_spell(node, IMAGE_TOKEN_INDEX, resolve)
    if isinstance(node, ast.Constant):
        return node.value == IMAGE_TOKEN_INDEX
    if isinstance(node, BUILT):
        return may_spell(node, IMAGE_TOKEN_INDEX, resolve)
    return False


def named_by(node: ast.AST) -> list[ast.expr]:
    """The names (and ``module.NAME``) that may name an attribute or a key at ``node``: a call's
    arguments (``getattr(c, NAME)``, ``attrgetter(NAME)``, ``d.get(NAME)``), a subscript's key,
    a string built of them (``"image_token_" + SUFFIX``)."""
    if isinstance(node, ast.Call):
        given = [*node.args, *(k.value for k in node.keywords)]
    elif isinstance(node, ast.Subscript):
        given = [node.slice]
    else:
        return []
    return [
        g
        for g in given
        if isinstance(g, (ast.Name, ast.Attribute, *BUILT))
        and any(isinstance(c, ast.Name) for c in ast.walk(g))
    ]


def bindings(program: Program, info: ModuleInfo, function: Function) -> Resolve:
    """What a name in ``function`` may be bound to: its local assignments, else the module's
    top-level ones, else those of the module it is imported from (re-exports followed);
    ``module.NAME`` for an imported module."""
    known = facts(function, info.package)

    def constant(module: ModuleInfo | None, name: str, hops: int = 0) -> list[ast.expr]:
        if module is None or hops > MAX_REEXPORT:
            return []
        if name in module.strings:
            return [module.strings[name]]
        if name in module.imports:
            source, symbol = module.imports[name]
            if symbol is not None:
                return constant(program.binding(source, symbol), symbol, hops + 1)
        return []

    def resolve(node: ast.expr) -> list[ast.expr]:
        if isinstance(node, ast.Name):
            if node.id in known.assigned:
                return [v for v in known.assigned[node.id] if isinstance(v, ast.expr)]
            if node.id in known.imports:
                source, symbol = known.imports[node.id]
                return [] if symbol is None else constant(program.binding(source, symbol), symbol)
            return constant(info, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            imported = known.imports.get(node.value.id) or info.imports.get(node.value.id)
            if imported is not None:
                source, symbol = imported
                dotted = source if symbol is None else f"{source}.{symbol}"
                return constant(program.binding(dotted, node.attr), node.attr)
        return []

    return resolve
