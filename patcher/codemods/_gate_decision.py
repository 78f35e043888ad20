"""What an EAGLE-3 model-type gate decides, worked out by meaning rather than by shape.

A small abstract interpreter over ``ast``: each function of a module that holds a gate site (a
``raise``, an ``assert``, a ``match`` or a call under a condition on the target's model type) is
run with ``method == "eagle3"`` and the target's ``model_type`` set to one model type. Other
values are unknown; a branch on an unknown value that does not depend on the model type is
explored both ways and the two states merged after it. What the run cannot work out where the
model type matters (a list it cannot evaluate, a call that could raise, a loop, a ``try``) is
``undecidable`` at its line, never a guess.

The verdict for one model type is one of:

- ``reject``: a ``raise`` (or a failing ``assert``) is reached under a decision that depends on
  the model type;
- ``accept``: a gate was met (a decision on the model type guarding a raise) and let it pass;
- ``absent``: no decision on the model type was met on the EAGLE-3 path;
- ``undecidable``: the line and why.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import operator
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from patcher.codemods._fold import BUILT, STRINGS, WIDE, NotConstant, fold, folded_string
from patcher.codemods._normalize import parse as parse_normalized

FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef
TARGET_WORDS = ("target", "hf_text_config")
HARMLESS_CALLS = frozenset(
    {"isinstance", "str", "repr", "len", "print", "format", "type", "id", "hash", "bool"}
)
LOGGERS = frozenset({"logger", "logging", "warnings", "log", "_logger"})
ANY_VALUE = {"str": 1, "repr": 1, "type": 1, "id": 1, "bool": 1, "hasattr": 1, "print": 1 << 16}
"""How many positional arguments a harmless builtin takes of any value without raising (its
object's own dunders aside, which are followed): another argument made from the model type,
such as print's ``file=`` or isinstance's class, may raise where it is not worked out."""
MAX_DEPTH = 4
MAX_UNROLL = 64


class NotModelled(Exception):
    """An operation the interpreter does not work out: its value is unknown, not an error."""


class Raised(Exception):
    """An operation that raises where Python runs it: on a value made from the model type, or
    under a decision on it, a refusal as a ``raise`` is (``{"llama": 1}[mt]``, ``[x][not ok]``,
    ``mt.startswith(None)``, ``"%d" % mt``)."""


class Undecidable(Exception):
    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"{line}: {why}")
        self.line = line
        self.why = why


@dataclass(frozen=True)
class Val:
    """An abstract value: ``known`` with a Python value, or unknown; ``dep`` where it depends on
    the model type; ``murky`` where it depends on it in a way not worked out."""

    known: bool = False
    value: Any = None
    dep: bool = False
    murky: bool = False
    kind: str = ""  # "target": the target's config (its .model_type is the type); "self"

    def with_dep(self, dep: bool) -> Val:
        return Val(self.known, self.value, self.dep or dep, self.murky, self.kind)


IDENTITY = frozenset({"architectures", "architecture", "_name_or_path", "name_or_path", "model_id"})
"""What else of the target's config says which model it is: a refusal that decides on one is a
decision about the model, which the model type alone does not settle."""
UNKNOWN = Val()
SELF = Val(kind="self")
TARGET = Val(kind="target")


def spelled(node: ast.AST) -> str | None:
    """The string ``node`` spells, where it is made of constants: a literal, ``+`` and implicit
    concatenation, an f-string of constants, ``str(...)``/``.lower()``/``.upper()``/
    ``.casefold()`` of one, ``"".join([...])``, and any constant expression ``_fold`` evaluates
    (``chr``, ``bytes.decode``, ``base64``, ``codecs``, slicing…); None for anything else."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, BUILT):
        text = folded_string(node)
        if text is not None:
            return text
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Add):
            left, right = spelled(node.left), spelled(node.right)
            return None if left is None or right is None else left + right
        if isinstance(node.op, ast.Mod):
            left = spelled(node.left)
            return left if left is not None and "%" not in left else None
        return None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = value.value
                if isinstance(inner, ast.Constant):
                    parts.append(str(inner.value))
                else:
                    text = spelled(inner)
                    if text is None:
                        return None
                    parts.append(text)
            else:
                text = spelled(value)
                if text is None:
                    return None
                parts.append(text)
        return "".join(parts)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Constant):
                return str(arg.value)
            return spelled(arg)
        if isinstance(func, ast.Attribute):
            base = spelled(func.value)
            if base is None:
                return None
            if func.attr in ("lower", "upper", "casefold", "strip") and not node.args:
                return getattr(base, func.attr)()
            if func.attr == "join" and len(node.args) == 1:
                items = node.args[0]
                if isinstance(items, ast.List | ast.Tuple):
                    texts = [spelled(e) for e in items.elts]
                    if all(t is not None for t in texts):
                        return base.join(t for t in texts if t is not None)
            if func.attr == "format":
                return base
    return None


def known(value: Any, dep: bool = False) -> Val:
    return Val(True, value, dep)


def unknown(*parts: Val) -> Val:
    """An unknown value computed from ``parts``: murky where one of them depends on the type."""
    murky = any(p.dep or p.murky for p in parts)
    return Val(dep=murky, murky=murky)


def assigned_targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


SHADOWABLE = frozenset(
    {
        "any",
        "all",
        "getattr",
        "hasattr",
        "list",
        "tuple",
        "set",
        "sorted",
        "frozenset",
        "len",
        "isinstance",
        "str",
        "bool",
        "vars",
        "exec",
        "eval",
        "compile",
        "globals",
    }
)
"""Builtins the interpreter works out itself: a module that rebinds one is not followed."""


def hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def merge(a: Val, b: Val) -> Val:
    if a == b or (a.known and b.known and a.value == b.value and a.kind == b.kind):
        return a.with_dep(b.dep)
    if a.kind and a.kind == b.kind:
        return a
    return Val(dep=a.dep or b.dep, murky=a.murky or b.murky or a.dep or b.dep)


@dataclass
class State:
    env: dict[str, Val] = field(default_factory=dict)

    def copy(self) -> State:
        return State(dict(self.env))


def control_dependent(state: State | None, statements: list[ast.stmt]) -> None:
    """Mark what ``statements`` assign as depending on the model type: they ran, or did not,
    by a decision on it (``ok = True`` under ``if s in model_type``), so a later test of such a
    name decides on the model type too."""
    if state is None:
        return
    for node in walk_body(statements):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            name = node.id
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            name = f"self.{node.attr}"
        if name is not None and name in state.env:
            state.env[name] = state.env[name].with_dep(True)


MUTABLE = (list, set, dict)
READ_ONLY_METHODS = frozenset(
    {"index", "count", "copy", "get", "keys", "values", "items", "join", "format", "issubset"}
)
"""Methods that read a list, set, dict or string and change nothing."""


def rebind(state: State, globals_: dict[str, Val], old: Val, new: Val) -> None:
    """A mutable value changed: every name bound to the same object (``alias = supported``, a
    module-level list) now holds ``new``, in this state; a name only a global is shadowed."""
    if not (old.known and isinstance(old.value, MUTABLE)):
        return
    changed = old.value
    for key, value in list(state.env.items()):
        if value.known and value.value is changed:
            state.env[key] = new
    for key, value in globals_.items():
        if key not in state.env and value.known and value.value is changed:
            state.env[key] = new


def merge_states(states: list[State]) -> State | None:
    if not states:
        return None
    out = states[0].copy()
    for other in states[1:]:
        for key in set(out.env) | set(other.env):
            a, b = out.env.get(key), other.env.get(key)
            out.env[key] = merge(a or UNKNOWN, b or UNKNOWN) if a != b else a  # type: ignore[assignment]
    return out


@dataclass
class Findings:
    rejects: list[int] = field(default_factory=list)
    gates: list[int] = field(default_factory=list)  # decisions on the type that guard a raise
    escapes: list[tuple[ast.Call, tuple[bool, ...], dict[str, bool]]] = field(default_factory=list)
    """Calls on the EAGLE-3 path it does not follow (another module's function, a method of
    another object) that are handed the target, a model type or a list of strings: with, for
    each positional argument and keyword, whether it is a model type. The tree-wide search
    follows them (``_reach``)."""


def reads_identity(node: ast.AST) -> bool:
    """Whether ``node`` reads what else of the target says which model it is (``IDENTITY``:
    ``self.target_model_config.hf_config.architectures``): a check on it is a check on the
    model, which the model type's search alone would not see."""

    def words(expression: ast.AST) -> list[str]:
        chain = [n for n in ast.walk(expression) if isinstance(n, ast.Attribute | ast.Name)]
        return [str(getattr(n, "attr", None) or getattr(n, "id", "")) for n in chain]

    held: set[str] = set()  # locals holding the target's config: cfg = self.target_model_config
    assignments = [n for n in ast.walk(node) if isinstance(n, ast.Assign)]
    grown = True
    while grown:
        grown = False
        for assign in assignments:
            if any(is_target_word(w) or w in held for w in words(assign.value)):
                for target in assign.targets:
                    if isinstance(target, ast.Name) and target.id not in held:
                        held.add(target.id)
                        grown = True
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and child.attr in IDENTITY:
            found = words(child.value)
            if any(is_target_word(w) or w in held for w in found) and not names_draft(child.value):
                return True
    return False


def mentions_target_type(node: ast.AST) -> bool:
    """Whether ``node`` reads a ``model_type`` (an attribute, or with getattr) not of a draft."""
    for child in ast.walk(node):
        if (
            isinstance(child, ast.Attribute)
            and child.attr == "model_type"
            and not names_draft(child.value)
        ):
            return True
        if (
            isinstance(child, ast.Call)
            and isinstance(child.func, ast.Name)
            and child.func.id == "getattr"
            and len(child.args) >= 2
            and isinstance(child.args[1], ast.Constant)
            and child.args[1].value == "model_type"
        ):
            return True
        if (  # read by key (vars(c)["model_type"], c.to_dict()[...]) or by a spelled name
            isinstance(child, ast.Subscript | ast.Call)
            and any(folded_string(part) == "model_type" for part in ast.iter_child_nodes(child))
            and not names_draft(child)
        ):
            return True
    return False


def names_draft(node: ast.AST) -> bool:
    return any(
        "draft" in (getattr(n, "id", None) or getattr(n, "attr", "") or "").lower()
        for n in ast.walk(node)
    )


def is_target_word(name: str) -> bool:
    lowered = name.lower()
    return "draft" not in lowered and any(word in lowered for word in TARGET_WORDS)


def guards_raise(statements: Iterable[ast.stmt]) -> bool:
    """Whether these statements raise, or call something that might."""
    for node in walk_body(list(statements)):
        if isinstance(node, ast.Raise | ast.Assert):
            return True
        if isinstance(node, ast.Call) and not harmless_call(node):
            return True
    return False


def harmless_call(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in HARMLESS_CALLS or func.id in ("any", "all", "getattr", "hasattr")
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in LOGGERS:
            return True
        return func.attr in ("lower", "upper", "startswith", "endswith", "strip", "get", "format")
    return False


def walk_body(statements: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node under ``statements``, without entering nested functions or classes."""
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        yield node
        pending += [
            c
            for c in ast.iter_child_nodes(node)
            if not isinstance(c, FUNCTIONS | ast.ClassDef | ast.Lambda)
        ]


def gate_sites(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Lines in ``function`` (not nested ones) where a decision on a model type guards a raise
    or a call: an ``if`` or ``while`` test, an ``assert``, a ``match`` subject, or a test on a
    name the function computes from a model type."""
    tainted: set[str] = set()
    nodes = list(walk_body(function.body))
    changed = True
    while changed:
        changed = False
        for node in nodes:
            value = getattr(node, "value", None)
            if (
                isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
                and value is not None
                and depends(value, tainted)
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in tainted:
                            tainted.add(name.id)
                            changed = True
    sites = []
    for node in nodes:
        if isinstance(node, ast.stmt) and is_site(node, tainted):
            sites.append(node.lineno)
    return sites


def is_site(node: ast.AST, tainted: set[str]) -> bool:
    """Whether ``node`` decides on the model type (or a name computed from it) and raises, or
    calls what may, on some outcome: an if, a loop, an assert, a match."""
    if isinstance(node, ast.If | ast.While):
        return depends(node.test, tainted) and (
            guards_raise(node.body) or guards_raise(node.orelse)
        )
    if isinstance(node, ast.For | ast.AsyncFor):
        return depends(node, tainted) and guards_raise([node])
    if isinstance(node, ast.Assert):
        return depends(node.test, tainted)
    if isinstance(node, ast.Match):
        return depends(node.subject, tainted) and any(
            guards_raise(case.body) for case in node.cases
        )
    return False


def depends(node: ast.AST, tainted: set[str]) -> bool:
    return mentions_target_type(node) or any(
        isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node)
    )


def eagle3_spelling(node: ast.AST) -> bool:
    """Whether ``node`` spells EAGLE-3's name as a string, however built (``"eagle" + "3"``,
    ``f"eagle{3}"``, ``"EAGLE3".lower()``, ``"eagle-3"``)."""
    text = spelled(node)
    if text is None:
        return False
    return "eagle3" in text.lower().replace("-", "").replace("_", "")


def eagle3_prefix(node: ast.AST) -> bool:
    """Whether ``node`` tests for a prefix or part of EAGLE-3's name that the name passes:
    ``method.startswith("eagle")``, ``"eagle" in method``."""

    def part(value: ast.AST) -> bool:
        text = spelled(value)
        return text is not None and len(text) >= 4 and text.lower() in "eagle3"

    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("startswith", "endswith", "__contains__", "find", "index")
    ):
        return any(part(a) for a in node.args) or any(
            isinstance(a, ast.Tuple) and any(part(e) for e in a.elts) for a in node.args
        )
    if isinstance(node, ast.Compare):
        return isinstance(node.ops[0], ast.In | ast.NotIn) and part(node.left)
    return False


def mentions_eagle3(function: ast.AST, aliases: frozenset[str]) -> bool:
    return any(True for _ in eagle3_mentions(function, aliases))


def eagle3_mentions(tree: ast.AST, aliases: frozenset[str]) -> Iterator[ast.AST]:
    """The nodes under ``tree`` that name EAGLE-3 (see ``mentions_eagle3``)."""
    for node in ast.walk(tree):
        if mentions_node(node, aliases):
            yield node


def mentions_node(node: ast.AST, aliases: frozenset[str]) -> bool:
    """Whether ``node`` itself names EAGLE-3: a string spelling it, a test for a part of its
    name, a name bound to such a string, or a constant-style name (``EAGLE3``)."""
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return name.lower() in aliases or ("EAGLE3" in name.upper() and name.isupper())
    if isinstance(node, STRINGS) and eagle3_spelling(node):
        return True
    return isinstance(node, ast.Call | ast.Compare) and eagle3_prefix(node)


def is_property(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A getter Python runs on ``obj.NAME``: ``property``, ``cached_property``, a library's
    ``*_property``."""
    return any("property" in ast.unparse(d).lower() for d in function.decorator_list)


VALIDATORS = ("validator",)  # pydantic's model_validator, field_validator, root_validator


def runs_when_made(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether making an object of ``function``'s class runs it unnamed: a validator pydantic
    calls (``@model_validator``), which a config's check may sit in without naming EAGLE-3
    (``_CHECKS.get(self.method, ...)``). (``__post_init__`` is not taken: VllmConfig's hands
    the model type to a dozen helpers that decide on it, none of them a refusal.)"""
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = str(getattr(called, "id", None) or getattr(called, "attr", ""))
        if any(word in name for word in VALIDATORS):
            return True
    return False


def owner_attributes(klass: ast.ClassDef) -> dict[str, ast.AST]:
    """What ``self.NAME`` may run in ``klass``: its properties (``property``,
    ``cached_property``, a library's ``*_property``) and its class attributes made by a call (a
    descriptor's ``__get__``)."""
    found: dict[str, ast.AST] = {}
    for item in klass.body:
        if isinstance(item, FUNCTIONS) and is_property(item):
            found[item.name] = item
        elif isinstance(item, ast.Assign | ast.AnnAssign) and isinstance(item.value, ast.Call):
            for target in assigned_targets(item):
                if isinstance(target, ast.Name):
                    found[target.id] = item.value
    return found


def dispatched_names(tree: ast.AST, aliases: frozenset[str]) -> set[str]:
    """The functions a dispatch table files under EAGLE-3: ``{"eagle3": check}``,
    ``[("eagle3", check)]``, ``dict(eagle3=check)``. Looked up by the method's name and called,
    each runs on the EAGLE-3 path though its own code need not name EAGLE-3."""
    names: set[str] = set()

    def referenced(value: ast.AST) -> None:
        for node in ast.walk(value):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is not None and mentions_node(key, aliases):
                    referenced(value)
        elif isinstance(node, ast.Tuple | ast.List) and any(
            mentions_node(e, aliases) for e in node.elts
        ):
            for element in node.elts:
                if not mentions_node(element, aliases):
                    referenced(element)
        elif isinstance(node, ast.Call) and any(
            k.arg is not None and "eagle3" in k.arg.lower() for k in node.keywords
        ):
            for k in node.keywords:
                if k.arg is not None and "eagle3" in k.arg.lower():
                    referenced(k.value)
    return names


@dataclass(frozen=True)
class Decision:
    """What one module's gates decide for one model type."""

    verdict: str  # reject, accept, absent, undecidable
    lines: tuple[int, ...] = ()  # where it rejects, or the gates that accept
    why: str = ""


class Module:
    """A module's functions, classes and module-level values, for the interpreter."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.owner: dict[ast.AST, str] = {}  # a method (nodes hash by identity): its class
        self.globals: dict[str, Val] = {}
        self.aliases: set[str] = set()
        self._mentioning: list[ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        self._enclosing: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        for node in tree.body:
            if isinstance(node, FUNCTIONS):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                methods = self.classes.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, FUNCTIONS):
                        self.methods[item.name] = item
                        methods[item.name] = item
                        self.owner[item] = node.name
        interpreter = Interpreter(self, "")
        state = State()
        for node in tree.body:
            if (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and node.value is not None
                and all(isinstance(t, ast.Name) for t in assigned_targets(node))
            ):
                try:
                    value = interpreter.eval(node.value, state)
                except Undecidable:
                    value = UNKNOWN
                for target in assigned_targets(node):
                    if isinstance(target, ast.Name):
                        self.globals[target.id] = value
                        if (
                            value.known
                            and isinstance(value.value, str)
                            and "eagle3" in value.value.lower()
                        ):
                            self.aliases.add(target.id.lower())
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    self.globals[(alias.asname or alias.name).split(".")[0]] = UNKNOWN
            elif not (
                isinstance(node, FUNCTIONS | ast.ClassDef)
                or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            ):
                # other module-level code (a loop, a call, a store into a list, an if) may
                # change any global it names, or that a function it calls names
                self.forget(node)
        for function in [*self.functions.values(), *self.methods.values()]:
            for inner in ast.walk(function):
                if isinstance(inner, ast.Global):  # rebound at run time: its value is unknown
                    for name in inner.names:
                        self.globals[name] = UNKNOWN
        for name in SHADOWABLE & {*self.globals, *self.functions}:  # a builtin rebound here
            self.globals[name] = UNKNOWN

    def implicitly_called(
        self, functions: list[ast.FunctionDef | ast.AsyncFunctionDef]
    ) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The methods Python calls for what ``functions`` do, though they call none of them by
        name: the dunder methods of each other class of this module they name (made, defined
        as a base or a metaclass, or operated on: its ``__init__``, ``__post_init__``,
        ``__enter__``, ``__bool__``, ``__init_subclass__``, a metaclass's ``__call__``…), and
        the getter of a property or a descriptor of their own class read as ``self.NAME``; then
        what those do, in turn. Each runs on the EAGLE-3 path too. The methods a class's code
        calls by name are followed as calls."""
        classes = {
            node.name: node for node in ast.walk(self.tree) if isinstance(node, ast.ClassDef)
        }
        seen: set[ast.AST] = set(functions)
        pending = list(functions)
        found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

        def add_class(name: str) -> None:
            klass = classes.get(name)
            if klass is None or klass in seen:
                return
            seen.add(klass)
            for item in klass.body:
                if (
                    isinstance(item, FUNCTIONS)
                    and item.name.startswith("__")
                    and item.name.endswith("__")
                    and item not in seen
                ):
                    seen.add(item)
                    found.append(item)
                    pending.append(item)
            for base in [*klass.bases, *(k.value for k in klass.keywords)]:
                if isinstance(base, ast.Name):
                    add_class(base.id)

        for function in functions:  # its own class's methods run as the code names them
            if (owner := classes.get(self.owner.get(function, ""))) is not None:
                seen.add(owner)
                for item in owner.body:  # ...and what making it runs, named or not
                    if isinstance(item, FUNCTIONS) and item not in seen and runs_when_made(item):
                        seen.add(item)
                        found.append(item)
                        pending.append(item)
        while pending:
            function = pending.pop()
            owner = classes.get(self.owner.get(function, ""))
            attributes = owner_attributes(owner) if owner is not None else {}
            for node in ast.walk(function):
                if isinstance(node, ast.Name) and node.id in classes:
                    add_class(node.id)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                    and node.attr in attributes
                ):
                    value = attributes[node.attr]
                    if isinstance(value, FUNCTIONS) and value not in seen:
                        seen.add(value)
                        found.append(value)
                        pending.append(value)
                    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                        add_class(value.func.id)  # a descriptor: its __get__ runs
        return found

    def rebinds(self, node: ast.AST) -> bool:
        """Whether a name under ``node`` is one this module binds (a ``chr`` of its own)."""
        return any(
            isinstance(n, ast.Name) and (n.id in self.globals or n.id in self.functions)
            for n in ast.walk(node)
        )

    def forget(self, node: ast.AST) -> None:
        """Every global ``node`` names, or a module function it calls names, becomes unknown."""
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for name in list(names):
            if name in self.functions:
                names |= {n.id for n in ast.walk(self.functions[name]) if isinstance(n, ast.Name)}
        for name in names:
            if name in self.globals:
                self.globals[name] = UNKNOWN

    def method(self, owner: str | None, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """``self.NAME`` inside a method of ``owner``: that class's own method; a name only
        other classes define is not followed."""
        if owner is not None and name in self.classes.get(owner, {}):
            return self.classes[owner][name]
        if owner is None and sum(name in m for m in self.classes.values()) == 1:
            return self.methods[name]
        raise LookupError(name)

    def mentioning(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions (at any depth) that name EAGLE-3: one walk of the module, each
        mention placed in the functions whose lines hold it."""
        if self._mentioning is None:
            aliases = frozenset(self.aliases)
            lines = sorted(getattr(n, "lineno", 0) for n in eagle3_mentions(self.tree, aliases))
            found = []
            if lines:
                for node in ast.walk(self.tree):
                    if isinstance(node, FUNCTIONS):
                        at = bisect.bisect_left(lines, node.lineno)
                        if at < len(lines) and lines[at] <= (node.end_lineno or node.lineno):
                            found.append(node)
            dispatched = dispatched_names(self.tree, aliases)
            if dispatched:
                found += [
                    node
                    for node in ast.walk(self.tree)
                    if isinstance(node, FUNCTIONS)
                    and node.name in dispatched
                    and not any(node is f for f in found)
                ]
            if found:
                found += self.implicitly_called(found)
            self._mentioning = found
        return self._mentioning

    def entries(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions on the EAGLE-3 path that may decide on the model type: they mention
        EAGLE-3, and hold a gate site, read a model type (a flag set in a loop over a list, a
        ``while``, a ``try``), or call a function of this module that does, however deep."""
        return [
            node
            for node in self.mentioning()
            if gate_sites(node) or self.reaches_type(node, set()) or reads_identity(node)
        ]

    def reaches_type(self, function: ast.AST, seen: set[str]) -> bool:
        """Whether ``function``, or a function or method of this module it calls (by name,
        followed without a depth limit), reads a target's model type."""
        if mentions_target_type(function):
            return True
        for node in walk_body(getattr(function, "body", [])):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if isinstance(node.func, ast.Attribute):
                name = node.func.attr
            if name is None or name in seen:
                continue
            seen.add(name)
            callees = [self.functions[name]] if name in self.functions else []
            callees += [methods[name] for methods in self.classes.values() if name in methods]
            if any(self.reaches_type(callee, seen) for callee in callees):
                return True
        return False


class Interpreter:
    def __init__(self, module: Module, model_type: str, through: bool = False) -> None:
        self.module = module
        self.model_type = model_type
        self.through = through  # past a refusal on the model type: what a passing type meets
        self.findings = Findings()
        self.depth = 0
        self.returns: ReturnCollector | None = None
        self.owner: str | None = None  # the class whose method runs
        self.region = False  # the statement running is under a decision on the model type

    # statements -------------------------------------------------------------------------
    def run(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.owner = self.module.owner.get(function)
        state = State()
        for arg in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
            if arg.arg == "self":
                state.env[arg.arg] = SELF
            elif is_target_word(arg.arg):
                state.env[arg.arg] = TARGET
            else:
                state.env[arg.arg] = UNKNOWN
        self.block(function.body, state, False)

    def block(self, statements: list[ast.stmt], state: State | None, region: bool) -> State | None:
        """Run ``statements``; the state after them, or None where every path left."""
        for statement in statements:
            if state is None:
                return None
            state = self.statement(statement, state, region)
        return state

    def statement(self, node: ast.stmt, state: State, region: bool) -> State | None:
        """Run ``node``; every call in it (an assignment's, an argument's) runs in ``region``."""
        outer, self.region = self.region, region
        try:
            return self.run_statement(node, state, region)
        except Raised:
            self.findings.rejects.append(node.lineno)
            self.findings.gates.append(node.lineno)
            return state if self.through else None
        finally:
            self.region = outer

    def run_statement(self, node: ast.stmt, state: State, region: bool) -> State | None:
        conditional = conditional_statement(node)
        if conditional is not None:
            return self.branch(conditional, state, region)
        if isinstance(node, ast.Return):
            value = self.eval(node.value, state) if node.value is not None else known(None)
            if self.returns is not None:
                self.returns.values.append(value)
            return None
        if isinstance(node, ast.Raise):
            if region:
                self.findings.rejects.append(node.lineno)
                if self.through:
                    return state
            return None
        if isinstance(node, ast.Pass | ast.Break | ast.Continue | ast.Global | ast.Nonlocal):
            return state
        if isinstance(node, FUNCTIONS):
            state.env[node.name] = Val(value=node, kind="function")
            return state
        if isinstance(node, ast.ClassDef):
            # making a class runs its decorators, its bases' __init_subclass__, its metaclass,
            # its body, and __set_name__ of what the body makes: read as one opaque statement
            what = "a class made here (making it runs code)"
            header = [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
            if any(v.dep or v.murky for v in (self.eval(e, state) for e in header)):
                raise Undecidable(node.lineno, f"{what} from the model type")
            state = self.opaque(node, state, region, what)
            state.env[node.name] = UNKNOWN
            return state
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                state.env[(alias.asname or alias.name).split(".")[0]] = UNKNOWN
            return state
        if isinstance(node, ast.Assign):
            value = self.eval(node.value, state)
            for target in node.targets:
                self.assign(target, value, state)
            method = state.env.get("self.method")
            if (
                not region
                and method is not None
                and method.known
                and "eagle3" not in str(method.value)
            ):
                # the method is no longer EAGLE-3: not the path this follows. Under a decision
                # on the model type it is that decision's doing, and a raise after it refuses
                return None
            return state
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value, state), state)
            return state
        if isinstance(node, ast.AugAssign):
            current = (
                self.eval(node.target, state) if isinstance(node.target, ast.Name) else UNKNOWN
            )
            value = self.binop(node.op, current, self.eval(node.value, state))
            self.assign(node.target, value, state)
            return state
        if isinstance(node, ast.Delete):
            for target in node.targets:
                self.assign(target, UNKNOWN, state)
            return state
        if isinstance(node, ast.Expr):
            self.eval(node.value, state, statement=True, region=region)
            return state
        if isinstance(node, ast.If):
            return self.branch(node, state, region)
        if isinstance(node, ast.Assert):  # as ``if not test: raise``, whatever the test's truth
            fails = ast.If(
                test=ast.UnaryOp(op=ast.Not(), operand=node.test),
                body=[ast.Raise(exc=None, cause=None)],
                orelse=[],
            )
            fails = ast.fix_missing_locations(ast.copy_location(fails, node))
            return self.branch(fails, state, region)
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.eval(item.context_expr, state)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, UNKNOWN, state)
            return self.block(node.body, state, region)
        if isinstance(node, ast.For | ast.AsyncFor):
            return self.loop_for(node, state, region)
        if isinstance(node, ast.While):
            return self.opaque(node, state, region, "a while loop")
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            return self.opaque(node, state, region, "a try statement")
        if isinstance(node, ast.Match):
            return self.match(node, state, region)
        return self.opaque(node, state, region, f"a {type(node).__name__} statement")

    def opaque(self, node: ast.stmt, state: State, region: bool, what: str) -> State:
        """A statement not interpreted: fine where it neither reads the model type nor raises
        under a decision on it; its assigned names become unknown."""
        inner = list(walk_body([node]))
        reads = any(isinstance(n, ast.Attribute) and n.attr == "model_type" for n in inner) or any(
            isinstance(n, ast.Name)
            and (v := state.env.get(n.id)) is not None
            and (v.dep or v.murky)
            for n in inner
        )
        if reads or (region and guards_raise([node])):
            raise Undecidable(node.lineno, f"{what} where the model type is decided")
        for n in inner:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                state.env[n.id] = UNKNOWN
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name)
                and n.func.attr in MUTATORS
            ):
                state.env[n.func.value.id] = UNKNOWN
        return state

    def branch(self, node: ast.If, state: State, region: bool) -> State | None:
        test = self.eval(node.test, state)
        if test.murky:
            raise Undecidable(node.lineno, "a test on the model type it cannot evaluate")
        inner = region or test.dep
        if test.dep and (guards_raise(node.body) or guards_raise(node.orelse)):
            self.findings.gates.append(node.lineno)
        if test.known:
            chosen = self.block(node.body if test.value else node.orelse, state, inner)
        else:
            chosen = merge_states(
                [
                    s
                    for s in (
                        self.block(node.body, state.copy(), inner),
                        self.block(node.orelse, state.copy(), inner),
                    )
                    if s is not None
                ]
            )
        if test.dep:
            control_dependent(chosen, [*node.body, *node.orelse])
        return chosen

    def match(self, node: ast.Match, state: State, region: bool) -> State | None:
        subject = self.eval(node.subject, state)
        if subject.murky:
            raise Undecidable(node.lineno, "a match on the model type it cannot evaluate")
        inner = region or subject.dep
        if subject.dep and any(guards_raise(case.body) for case in node.cases):
            self.findings.gates.append(node.lineno)
        after: list[State] = []
        bodies = [statement for case in node.cases for statement in case.body]
        for case in node.cases:
            if case.guard is not None:
                raise Undecidable(case.guard.lineno, "a match case with a guard")
            fits = self.pattern(case.pattern, subject, state)
            if fits is False:
                continue
            result = self.block(case.body, state.copy(), inner)
            if result is not None:
                after.append(result)
            if fits is True:
                break
        else:
            after.append(state)  # no case matched
        merged = merge_states(after)
        if subject.dep:
            control_dependent(merged, bodies)
        return merged

    def pattern(self, pattern: ast.pattern, subject: Val, state: State) -> bool | None:
        if isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
            if pattern.name:
                state.env[pattern.name] = subject
            return True
        if isinstance(pattern, ast.MatchValue):
            value = self.eval(pattern.value, state)
            if subject.known and value.known:
                return bool(subject.value == value.value)
            return None
        if isinstance(pattern, ast.MatchOr):
            results = [self.pattern(p, subject, state) for p in pattern.patterns]
            if True in results:
                return True
            return False if all(r is False for r in results) else None
        if subject.dep:
            raise Undecidable(pattern.lineno, "a match pattern it does not evaluate")
        return None

    def loop_for(self, node: ast.For | ast.AsyncFor, state: State, region: bool) -> State | None:
        iterable = self.eval(node.iter, state)
        if (
            iterable.known
            and isinstance(iterable.value, list | tuple | set | frozenset | str)
            and len(iterable.value) <= MAX_UNROLL
            and not node.orelse
            and not any(isinstance(n, ast.Break | ast.Continue) for n in walk_body(node.body))
        ):
            current: State | None = state
            for element in iterable.value:
                if current is None:
                    return None
                self.assign(node.target, known(element, iterable.dep), current)
                current = self.block(node.body, current, region or iterable.dep)
            return current
        return self.opaque(node, state, region, "a loop over values it cannot list")

    def assign(self, target: ast.expr, value: Val, state: State) -> None:
        if isinstance(target, ast.Name):
            state.env[target.id] = value
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            if target.value.id == "self":
                state.env[f"self.{target.attr}"] = value
            elif value.dep or value.murky:
                # the model type stored on a class or object this does not follow: code that
                # reads it later (a descriptor's __set_name__, a helper) is out of sight
                raise Undecidable(target.lineno, "the model type stored where it is not followed")
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self.assign(element, unknown(value), state)
        elif isinstance(target, ast.Subscript) and not isinstance(target.value, ast.Name):
            # globals()["L"] = ..., vars(m)["L"] = ...: a name rebound by a key; every global
            # (and every name it could reach) becomes unknown
            local = [name for name in state.env if not name.startswith("self.")]
            self.forget_names(
                [state.env, self.module.globals], [*local, *self.module.globals], value
            )
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            name = target.value.id
            current = state.env.get(name) or self.module.globals.get(name, UNKNOWN)
            changed = unknown(current, value)
            rebind(state, self.module.globals, current, changed)
            state.env[name] = changed

    # expressions ------------------------------------------------------------------------
    def eval(
        self, node: ast.expr, state: State, statement: bool = False, region: bool = False
    ) -> Val:
        if isinstance(node, ast.Constant):
            return known(node.value)
        if isinstance(node, BUILT) and not self.module.rebinds(node):
            # a constant built at run time (chr, base64, [::-1]...) with builtins not rebound
            with contextlib.suppress(NotConstant):
                value = fold(node)
                if hashable(value) or isinstance(value, list):
                    return known(value)
        if isinstance(node, ast.Name):
            if node.id in state.env:
                return state.env[node.id]
            if node.id in self.module.globals:
                return self.module.globals[node.id]
            if node.id in self.module.functions:
                return Val(value=self.module.functions[node.id], kind="function")
            if is_target_word(node.id):
                return TARGET
            return UNKNOWN
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, state), node.attr, node, state)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [self.eval(e, state) for e in node.elts if not isinstance(e, ast.Starred)]
            if len(items) == len(node.elts) and all(i.known and hashable(i.value) for i in items):
                values = [i.value for i in items]
                dep = any(i.dep for i in items)
                if isinstance(node, ast.List):
                    return known(values, dep)
                return known(tuple(values) if isinstance(node, ast.Tuple) else set(values), dep)
            return unknown(*items)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, state)
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand, state)
            if isinstance(node.op, ast.Not):
                if operand.known:
                    return known(not operand.value, operand.dep)
                if operand.kind:
                    return UNKNOWN
                return Val(dep=operand.dep, murky=operand.murky)
            if isinstance(node.op, ast.USub):
                return self.compute(lambda: -operand.value, operand)
            return unknown(operand)
        if isinstance(node, ast.Compare):
            return self.compare(node, state)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.eval(node.left, state), self.eval(node.right, state))
        if isinstance(node, ast.IfExp):
            test = self.eval(node.test, state)
            if test.murky:
                return unknown(test)
            if test.known:
                return self.eval(node.body if test.value else node.orelse, state).with_dep(test.dep)
            return merge(self.eval(node.body, state), self.eval(node.orelse, state)).with_dep(
                test.dep
            )
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self.comprehension(node, state)
        if isinstance(node, ast.Call):
            return self.call(node, state, statement, region)
        if isinstance(node, ast.JoinedStr):
            text = spelled(node)
            if text is not None:
                return known(text)
            return unknown(
                *(
                    self.eval(v.value, state)
                    for v in node.values
                    if isinstance(v, ast.FormattedValue)
                )
            )
        if isinstance(node, ast.NamedExpr):  # (L := ...) rebinds L where it is evaluated
            value = self.eval(node.value, state)
            self.assign(node.target, value, state)
            return value
        if isinstance(node, ast.Subscript):
            value, index = self.eval(node.value, state), self.eval(node.slice, state)
            if index.known and index.value == "model_type" and not names_draft(node.value):
                return Val(dep=True, murky=True)  # a model type read by key: not worked out
            if (index.dep or index.murky) and not (value.known and index.known):
                # a lookup by a key made from the model type, in what this cannot read
                raise Undecidable(node.lineno, "a lookup by the model type may raise")
            return self.compute(lambda: value.value[index.value], value, index)
        parts = [self.eval(c, state) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        return unknown(*parts)

    def attribute(self, base: Val, attr: str, node: ast.AST, state: State) -> Val:
        if base.kind == "self":
            key = f"self.{attr}"
            if key in state.env:
                return state.env[key]
            if attr == "method":
                return known("eagle3")
            if attr == "model":  # EAGLE-3 always names its drafter
                return known("<the EAGLE-3 drafter>")
            if is_target_word(attr):
                return TARGET
            return UNKNOWN
        if attr == "model_type":
            if base.kind == "target":
                return known(self.model_type, True)
            return unknown(base)
        if base.kind == "target" and attr in IDENTITY:  # which model, other than its type
            return Val(dep=True, murky=True)
        if base.kind == "target" or is_target_word(attr):
            return TARGET
        if base.known:
            return Val(True, (base.value, attr), base.dep, kind="bound")  # a method of a value
        return unknown(base)

    def boolop(self, node: ast.BoolOp, state: State) -> Val:
        stop = isinstance(node.op, ast.Or)  # the value that ends the chain
        dep = False
        murky = False
        unsure = False
        for element in node.values:
            value = self.eval(element, state)
            if value.known and value.kind != "bound":
                if bool(value.value) is stop:
                    return known(value.value, value.dep)
                dep = dep or value.dep
                continue
            unsure = True
            dep = dep or value.dep
            murky = murky or value.murky
        if murky:
            return Val(dep=True, murky=True)
        if unsure:
            return Val(dep=dep)
        return known(not stop, dep)

    def compare(self, node: ast.Compare, state: State) -> Val:
        left = self.eval(node.left, state)
        result: Val = known(True)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, state)
            if isinstance(op, ast.Is | ast.IsNot) and (left.kind or right.kind):
                value = unknown(left, right)
            else:
                value = self.compute(
                    functools.partial(COMPARE[type(op)], left.value, right.value), left, right
                )
            if value.known and not value.value:
                return value
            result = (
                value
                if not result.known or not value.known
                else known(True, result.dep or value.dep)
            )
            if not value.known:
                result = Val(dep=result.dep or value.dep, murky=result.murky or value.murky)
            left = right
        return result

    def binop(self, op: ast.operator, left: Val, right: Val) -> Val:
        def compute() -> Any:
            a, b = left.value, right.value
            if isinstance(op, ast.Add):
                if isinstance(a, list) and isinstance(b, tuple | list):
                    return a + list(b)
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.BitOr):
                return a | b
            if isinstance(op, ast.Mod) and isinstance(a, str) and not WIDE.search(a):
                return a % b
            numbers = all(isinstance(x, int | float) and abs(x) < 1 << 64 for x in (a, b))
            if numbers and isinstance(op, ast.Mult | ast.FloorDiv | ast.Div | ast.Mod):
                return ARITHMETIC[type(op)](a, b)  # 1 // sum(...) raises where Python does
            raise NotModelled

        return self.compute(compute, left, right)

    def compute(self, fn: Any, *parts: Val) -> Val:
        if all(p.known and p.kind == "" for p in parts):
            try:
                return known(fn(), any(p.dep for p in parts))
            except NotModelled:
                return unknown(*parts)
            except RecursionError:
                return unknown(*parts)
            except Exception:
                if self.region or any(p.dep for p in parts):
                    raise Raised from None  # where Python raises, so does this
                return unknown(*parts)
        return unknown(*parts)

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, state: State
    ) -> Val:
        if len(node.generators) != 1 or node.generators[0].is_async:
            return unknown(known(0, mentions_target_type(node)))
        generator = node.generators[0]
        iterable = self.eval(generator.iter, state)
        scope = state.copy()
        if not (iterable.known and isinstance(iterable.value, list | tuple | set | str)):
            self.assign(generator.target, unknown(iterable), scope)
            parts = [self.eval(node.elt, scope), *(self.eval(c, scope) for c in generator.ifs)]
            dep = iterable.dep or iterable.murky or any(p.dep or p.murky for p in parts)
            return Val(dep=dep, murky=dep)
        values = []
        dep = iterable.dep
        for element in iterable.value:
            self.assign(generator.target, known(element, iterable.dep), scope)
            keep = True
            for condition in generator.ifs:
                test = self.eval(condition, scope)
                if not test.known:
                    return Val(dep=True, murky=True) if test.dep or test.murky else unknown(test)
                dep = dep or test.dep
                keep = keep and bool(test.value)
            if keep:
                item = self.eval(node.elt, scope)
                if not item.known or not hashable(item.value):
                    return unknown(item, iterable)
                values.append(item.value)
                dep = dep or item.dep
        if isinstance(node, ast.SetComp):
            return known(set(values), dep)
        return known(values, dep)

    @staticmethod
    def forget_names(envs: list[dict[str, Val]], names: Iterable[str], *values: Val) -> None:
        """Each of ``names`` bound in ``envs`` (a function aside) becomes unknown: a rebinding
        this cannot follow (globals()[...], setattr, a function made at run time)."""
        for name in list(names):
            for env in envs:
                if name in env and env[name].kind != "function":
                    env[name] = unknown(env[name], *values)

    def call(self, node: ast.Call, state: State, statement: bool, region: bool) -> Val:
        region = region or self.region
        func = node.func
        args = [self.eval(a, state) for a in node.args if not isinstance(a, ast.Starred)]
        keywords = [self.eval(k.value, state) for k in node.keywords]
        everything = [*args, *keywords]
        if not isinstance(func, ast.Name | ast.Attribute) or (
            isinstance(func, ast.Name) and func.id == "globals"
        ):
            # a function made at run time (getattr(L, "rem" + "ove"), globals()[...]) may change
            # whatever its expression names: each becomes unknown, globals() every global
            named = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)}
            if "globals" in named:
                named |= set(self.module.globals)
            self.forget_names([state.env, self.module.globals], named)
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
            # setattr(module, "L", ...) rebinds what a name reads: every global is unknown
            self.forget_names([self.module.globals], list(self.module.globals), *everything)
        if isinstance(func, ast.Name):
            bound = state.env.get(func.id) or self.module.globals.get(func.id)
            if bound is not None and bound.kind == "function":  # a nested def, or an alias
                return self.inline(bound.value, None, node, state, region)
            if func.id in SHADOWABLE and (
                func.id in self.module.globals or func.id in self.module.functions
            ):
                raise Undecidable(node.lineno, f"the module rebinds the builtin {func.id}")
        if isinstance(func, ast.Name) and func.id not in state.env:
            name = func.id
            if name in ("any", "all") and len(args) == 1:
                return self.any_all(name, args[0])
            if name == "getattr" and len(node.args) >= 2:
                attribute = args[1]
                if (attribute.dep or attribute.murky) and len(node.args) == 2:
                    raise Undecidable(
                        node.lineno, "getattr of a name made from the model type may raise"
                    )
                if attribute.known and isinstance(attribute.value, str):
                    return self.attribute(args[0], attribute.value, node, state)
                return unknown(*args)
            if name in BUILDERS and len(args) == 1:
                builder = BUILDERS[name]
                return self.compute(lambda: builder(args[0].value), args[0])
            if name in PURE and not node.keywords and len(args) == len(node.args):
                pure = PURE[name]

                def run() -> Any:
                    if any(isinstance(a.value, str) and WIDE.search(a.value) for a in args):
                        raise NotModelled  # a width that would make a huge string
                    return pure(*[a.value for a in args])

                return self.compute(run, *args)
            if name in ("exec", "eval", "compile"):
                raise Undecidable(node.lineno, f"{name}() runs code this cannot read")
            if name in HARMLESS_CALLS or name == "hasattr":
                accepted = len(args[: ANY_VALUE.get(name, 0)])  # what it takes of any value
                if any(v.dep or v.murky for v in everything[accepted:]):
                    raise Undecidable(
                        node.lineno, f"{name}() of a value made from the model type may raise"
                    )
                return unknown(*everything)
            if name in self.module.functions:
                return self.inline(self.module.functions[name], None, node, state, region)
        if isinstance(func, ast.Attribute):
            base = self.eval(func.value, state)
            if base.kind == "self" and func.attr in self.module.methods:
                try:
                    method = self.module.method(self.owner, func.attr)
                except LookupError:
                    raise Undecidable(
                        node.lineno, f"self.{func.attr} is a method of another class here"
                    ) from None
                return self.inline(method, SELF, node, state, region)
            if isinstance(func.value, ast.Name) and func.attr in MUTATORS:
                current = state.env.get(func.value.id)
                if current is None and func.value.id in self.module.globals:
                    current = self.module.globals[func.value.id]
                if current is not None and current.known and isinstance(current.value, list):
                    updated = list(current.value)
                    result = self.compute(
                        lambda: MUTATORS[func.attr](updated, *[a.value for a in args]),
                        current,
                        *args,
                    )
                    if result.known or not current.known:
                        changed = known(updated, current.dep or any(a.dep for a in args))
                        rebind(state, self.module.globals, current, changed)
                        state.env[func.value.id] = changed
                        return known(None)
                if current is not None:
                    changed = unknown(current, *args)
                    rebind(state, self.module.globals, current, changed)
                    state.env[func.value.id] = changed
                    return UNKNOWN
            if base.known and isinstance(base.value, str) and func.attr in STRING_METHODS:
                return self.compute(
                    lambda: getattr(base.value, func.attr)(*[a.value for a in args]), base, *args
                )
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in LOGGERS:
                # the message's arguments are formatted when it is emitted, where logging
                # reports an error and goes on; its keywords (extra=, stacklevel=) are read
                # at once, and raise there
                if any(v.dep or v.murky for v in keywords):
                    raise Undecidable(
                        node.lineno, "a logging keyword made from the model type may raise"
                    )
                return UNKNOWN
            if func.attr == "get" and not statement:
                return unknown(base, *everything)
        if (
            isinstance(func, ast.Attribute)
            and "config" in func.attr.lower()
            and self.eval(func.value, state).kind == "target"
        ):
            return TARGET  # the target's config through a getter: get_text_config()
        # an unknown call: it may change a list it is given (or called on), and it could raise
        # where the model type is decided
        receiver = [self.eval(func.value, state)] if isinstance(func, ast.Attribute) else []
        if not harmless_call(node) and any(
            v.kind in ("target", "self")  # self: the config that holds the target
            or v.dep
            or v.murky
            or (
                v.known
                and isinstance(v.value, list | tuple | set | frozenset)
                and v.value
                and all(isinstance(x, str) for x in v.value)
            )
            for v in [*everything, *receiver]
        ):
            self.findings.escapes.append(
                (
                    node,
                    tuple(a.dep or a.murky for a in args),
                    {
                        k.arg: v.dep or v.murky
                        for k, v in zip(node.keywords, keywords, strict=True)
                        if k.arg
                    },
                )
            )
        given = list(everything)
        if isinstance(func, ast.Attribute) and func.attr not in READ_ONLY_METHODS:
            given.append(self.eval(func.value, state))
        for value in given:
            rebind(state, self.module.globals, value, unknown(value))
        called_on = [self.eval(func.value, state)] if isinstance(func, ast.Attribute) else []
        if region or any(v.dep or v.murky for v in [*everything, *called_on]):
            raise Undecidable(node.lineno, f"a call to {ast.unparse(func)} it cannot follow")
        return unknown(*everything)

    def any_all(self, name: str, iterable: Val) -> Val:
        if iterable.known and isinstance(iterable.value, list | tuple | set):
            values = iterable.value
            return known(any(values) if name == "any" else all(values), iterable.dep)
        return Val(dep=iterable.dep or iterable.murky, murky=iterable.dep or iterable.murky)

    def inline(
        self,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        self_value: Val | None,
        node: ast.Call,
        state: State,
        region: bool,
    ) -> Val:
        if self.depth >= MAX_DEPTH:
            raise Undecidable(node.lineno, f"calls nested deeper than {MAX_DEPTH}")
        inner = State({k: v for k, v in state.env.items() if k.startswith("self.")})
        params = [*function.args.posonlyargs, *function.args.args]
        if self_value is not None and params:
            inner.env[params[0].arg] = self_value
            params = params[1:]
        given = [self.eval(a, state) for a in node.args]
        for param, value in zip(params, given, strict=False):
            inner.env[param.arg] = value
        for param in params[len(given) :]:
            inner.env[param.arg] = TARGET if is_target_word(param.arg) else UNKNOWN
        for keyword in node.keywords:
            if keyword.arg:
                inner.env[keyword.arg] = self.eval(keyword.value, state)
        for param in function.args.kwonlyargs:
            inner.env.setdefault(param.arg, UNKNOWN)
        self.depth += 1
        caller = self.owner
        if self_value is not None:
            self.owner = self.module.owner.get(function, self.owner)
        try:
            returns = ReturnCollector()
            after = self.block_returning(function.body, inner, region, returns)
        finally:
            self.depth -= 1
            self.owner = caller
        if after is not None:
            for key, value in after.env.items():
                if key.startswith("self."):
                    state.env[key] = value
        for param, value in zip(params, given, strict=False):
            if not (value.known and isinstance(value.value, MUTABLE)):
                continue
            if after is not None and not returns.values:  # one way through: its state is exact
                rebind(state, self.module.globals, value, after.env.get(param.arg, UNKNOWN))
            elif may_change(function, param.arg):
                rebind(state, self.module.globals, value, unknown(value))
        values = returns.values + ([known(None)] if after is not None else [])
        if not values:
            return UNKNOWN
        out = values[0]
        for value in values[1:]:
            out = merge(out, value)
        return out

    def block_returning(
        self, statements: list[ast.stmt], state: State, region: bool, returns: ReturnCollector
    ) -> State | None:
        previous = self.returns
        self.returns = returns
        try:
            return self.block(statements, state, region)
        finally:
            self.returns = previous


CONDITIONAL: weakref.WeakKeyDictionary[ast.stmt, ast.If | None] = weakref.WeakKeyDictionary()


def conditional_statement(node: ast.stmt) -> ast.If | None:
    """The ``if`` an expression statement or an assignment runs as where a later operand of
    its ``and``/``or``, or a branch of its conditional expression, calls something: ``cond and
    _refuse(msg)`` is ``if cond: _refuse(msg)``, ``ok or _refuse(msg)`` is ``if not ok:
    _refuse(msg)``, ``x = a if t else f()`` is ``if t: x = a`` else ``x = f()``; so a call that
    refuses runs under the decision it is guarded by. None for any other statement; kept for
    the node."""
    if node in CONDITIONAL:
        return CONDITIONAL[node]
    found = None
    if isinstance(node, ast.Expr | ast.Assign) and not (
        isinstance(node, ast.Assign) and len(node.targets) != 1
    ):
        value = node.value

        def made(expression: ast.expr) -> ast.stmt:
            if isinstance(node, ast.Assign):
                return ast.Assign(targets=node.targets, value=expression)
            return ast.Expr(value=expression)

        if (
            isinstance(value, ast.BoolOp)
            and len(value.values) > 1
            and any(calls_something(v) for v in value.values[1:])
        ):
            first, rest = value.values[0], value.values[1:]
            later = rest[0] if len(rest) == 1 else ast.BoolOp(op=value.op, values=rest)
            test = first if isinstance(value.op, ast.And) else ast.UnaryOp(ast.Not(), first)
            orelse = [made(first)] if isinstance(node, ast.Assign) else []
            found = ast.If(test=test, body=[made(later)], orelse=orelse)
        elif isinstance(value, ast.IfExp) and (
            calls_something(value.body) or calls_something(value.orelse)
        ):
            found = ast.If(test=value.test, body=[made(value.body)], orelse=[made(value.orelse)])
        if found is not None:
            for inner in ast.walk(found):
                if "lineno" in inner._attributes and not hasattr(inner, "lineno"):
                    ast.copy_location(inner, node)
    CONDITIONAL[node] = found
    return found


def calls_something(node: ast.AST) -> bool:
    """Whether ``node`` calls what may raise (``harmless_call`` aside)."""
    return any(isinstance(c, ast.Call) and not harmless_call(c) for c in ast.walk(node))


def may_change(function: ast.AST, name: str) -> bool:
    """Whether ``function`` may change the object bound to ``name``: a method called on it, an
    item stored or deleted, or the object handed to another call."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            return True
        if isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == name
                and node.func.attr not in READ_ONLY_METHODS
            ):
                return True
            passed = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, ast.Name) and a.id == name for a in passed):
                return True
    return False


class ReturnCollector:
    def __init__(self) -> None:
        self.values: list[Val] = []


def _remove(values: list[Any], value: Any) -> None:
    values.remove(value)


MUTATORS: dict[str, Any] = {
    "remove": _remove,
    "append": lambda values, value: values.append(value),
    "extend": lambda values, more: values.extend(more),
    "insert": lambda values, index, value: values.insert(index, value),
    "pop": lambda values, *index: values.pop(*index),
    "clear": lambda values: values.clear(),
}
ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
PURE: dict[str, Callable[..., Any]] = {
    "len": len,
    "hash": hash,
    "format": format,
    "int": int,
    "ord": ord,
    "chr": chr,
    "abs": abs,
    "min": min,
    "max": max,
    "sum": sum,
    "divmod": divmod,
    "repr": repr,
    "bool": bool,
}
"""Builtins the interpreter runs on known values, so that one raising (``len(0)``,
``format(mt, "d")``) refuses as Python would."""
SHADOWABLE = SHADOWABLE | frozenset(PURE)  # a module's own len or format is not run
BUILDERS: dict[str, Callable[[Any], Any]] = {
    "list": list,
    "tuple": tuple,
    "set": set,
    "sorted": sorted,
    "frozenset": frozenset,
    "len": len,
    "str": str,
    "bool": bool,
}
"""Builtins worked out on known values."""
STRING_METHODS = frozenset(
    {
        "lower",
        "upper",
        "casefold",
        "startswith",
        "endswith",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "split",
        "rsplit",
        "partition",
        "rpartition",
        "removeprefix",
        "removesuffix",
    }
)
COMPARE: dict[type, Any] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


@functools.lru_cache(maxsize=16)
def read_module(text: str) -> tuple[Module, tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]]:
    """The module of ``text`` and its entry functions, worked out once per text."""
    module = Module(parse_normalized(text))
    return module, tuple(module.entries())


@functools.lru_cache(maxsize=64)
def decide(text: str, model_type: str) -> Decision:
    """What the gates of the module ``text`` decide for ``model_type`` under EAGLE-3."""
    try:
        module, entries = read_module(text)
    except (SyntaxError, ValueError) as error:
        return Decision("undecidable", (getattr(error, "lineno", 1) or 1,), "not valid Python")
    except RecursionError:
        return Decision("undecidable", (1,), "nested too deep to parse")
    rejects: list[int] = []
    gates: list[int] = []
    for function in entries:
        interpreter = Interpreter(module, model_type)
        try:
            interpreter.run(function)
        except Undecidable as error:
            return Decision("undecidable", (error.line,), error.why)
        except RecursionError:
            return Decision("undecidable", (function.lineno,), "nested too deep to follow")
        rejects += interpreter.findings.rejects
        gates += interpreter.findings.gates
    if rejects:
        return Decision("reject", tuple(sorted(set(rejects))))
    if gates:
        return Decision("accept", tuple(sorted(set(gates))))
    return Decision("absent")


PROBE = "\0any model type"
"""A model type no list holds: what the gates decide for it does not matter, only where."""


def decision_sites(tree: ast.Module) -> Iterator[int]:
    """Where the EAGLE-3 path of ``tree`` meets a decision on the target's model type that
    guards a raise, whatever it decides; or where it cannot follow one. The signature behind
    ``not-needed`` and ``ambiguous`` searches the whole tree with this."""
    yield from analysed(tree)[0]


Escape = tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call, tuple[bool, ...], dict[str, bool]]


def decision_escapes(tree: ast.Module) -> list[Escape]:
    """The calls the EAGLE-3 path of ``tree`` hands the target, a model type or a list of
    strings to, where this module's interpreter does not follow them (``Findings.escapes``),
    each with the function that makes it; from every function that names EAGLE-3, entries or
    not (a check moved whole into a helper leaves nothing here to decide)."""
    return analysed(tree)[1]


ANALYSED: weakref.WeakKeyDictionary[ast.Module, tuple[list[int], list[Escape]]] = (
    weakref.WeakKeyDictionary()
)


def analysed(tree: ast.Module) -> tuple[list[int], list[Escape]]:
    """Each function naming EAGLE-3 run once with the probe model type: the sites of the
    entries (``decision_sites``) and the escapes of all (``decision_escapes``); kept for the
    module (``python_ast`` hands the same tree for the same text)."""
    held = ANALYSED.get(tree)
    if held is not None:
        return held
    module = Module(tree)
    entries = set(module.entries())
    sites: list[int] = []
    escapes: list[Escape] = []
    for function in module.mentioning():
        if function in entries:
            interpreter = Interpreter(module, PROBE)
            try:
                interpreter.run(function)
            except Undecidable as error:
                sites.append(error.line)
            except RecursionError:
                sites.append(function.lineno)
            else:
                sites += interpreter.findings.gates
                sites += interpreter.findings.rejects
        # the escapes, with the path followed past each refusal: a type the first gate lets
        # through meets what comes after it
        interpreter = Interpreter(module, PROBE, through=True)
        with contextlib.suppress(Undecidable, RecursionError):  # an entry's is a site above
            interpreter.run(function)
        escapes += [
            (enclosing(module, escape[0]) or function, *escape)
            for escape in interpreter.findings.escapes
        ]
    ANALYSED[tree] = (sites, escapes)
    MENTIONING[tree] = tuple(module.mentioning())
    return sites, escapes


MENTIONING: weakref.WeakKeyDictionary[
    ast.Module, tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]
] = weakref.WeakKeyDictionary()


def eagle3_functions(tree: ast.Module) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]:
    """The functions of ``tree``, at any depth, that name EAGLE-3 (``Module.mentioning``),
    worked out with the module's analysis (``analysed``)."""
    if tree not in MENTIONING:
        analysed(tree)
    return MENTIONING[tree]


def enclosing(module: Module, call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function of ``module`` holding ``call`` (an inlined helper's, not the
    entry's): where its names, local imports included, are bound."""
    if module._enclosing is None:
        module._enclosing = {}
        for node in ast.walk(module.tree):
            if isinstance(node, FUNCTIONS):
                for inner in walk_body(node.body):
                    if isinstance(inner, ast.Call):
                        module._enclosing[inner] = node
    return module._enclosing.get(call)
