"""What a vLLM release feeds an EAGLE-3 drafter, read from the release's own code.

Each model runner has a small function that picks the auxiliary layer ids out of the drafter's
config, and falls back to the target model's default when it finds none. Their fields differ by
release and by runner (issue 19: in 0.33.0 the V2 runner does not read the nested
``eagle_config`` field the V1 runner reads). Rather than a table per version, the function found
in the release is run here over the drafter's config by a small interpreter of the Python it is
written in (names, ``getattr``, ``dict.get``, ``if``, ``for`` over constants, comprehensions):
a shape outside that is reported as unreadable, never guessed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from patcher.codemods.base import Files, decode

V1_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
V1_READER = "_get_eagle3_aux_layers_from_config"
V2_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
V2_READER = "get_eagle3_aux_layers_from_config"
VLLM_CONFIG = "vllm/config/vllm.py"
REGISTRY = "vllm/model_executor/models/registry.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
SPECULATORS_ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
MODELS = "vllm/model_executor/models/"

DEFAULT_METHODS = (
    "get_eagle3_default_aux_hidden_state_layers",
    "get_eagle3_aux_hidden_state_layers",
)
"""The target's method a runner falls back to, by release (renamed with a default in 0.24)."""


class Unreadable(Exception):
    """The release's code has a shape this reader does not follow: said, not guessed."""


@dataclass(frozen=True)
class Traced:
    """A value and the config field it came from (``eagle_config.layer_ids``), if any."""

    value: Any
    field: str | None = None


class Opaque:
    """An object of vLLM's (``self``, the speculative config) the reader does not model."""

    def __bool__(self) -> bool:
        return True


class ConfigView:
    """The drafter's hf_config as vLLM builds it: its config.json keys as attributes."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config


class Returned(Exception):
    """A ``return`` of the function run: unwinds to ``Interpreter.run``."""

    def __init__(self, value: Traced) -> None:
        self.value = value


class Broke(Exception):
    """A ``break``: unwinds to its ``for``."""


NOTHING = object()


class Interpreter:
    """Runs one function of the release over a config, in the subset its readers are written in."""

    def __init__(
        self,
        function: ast.FunctionDef,
        arguments: Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.function = function
        self.config = config or {}
        self.names: dict[str, Traced] = {
            arg.arg: Traced(arguments.get(arg.arg, Opaque())) for arg in function.args.args
        }

    def run(self) -> Traced:
        try:
            self.block(self.function.body)
        except Returned as done:
            return done.value
        return Traced(None)

    def block(self, statements: Sequence[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Return):
            raise Returned(self.expr(node.value) if node.value else Traced(None))
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            self.assign(node.targets[0], self.expr(node.value))
            return
        if isinstance(node, ast.If):
            self.block(node.body if self.expr(node.test).value else node.orelse)
            return
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and not node.orelse:
            try:
                for item in self.expr(node.iter).value:
                    self.names[node.target.id] = Traced(item)
                    self.block(node.body)
            except Broke:
                pass
            return
        if isinstance(node, ast.Break):
            raise Broke
        if isinstance(node, ast.Raise):
            raise Unreadable(f"line {node.lineno}: the release's code raises here")
        raise Unreadable(f"line {node.lineno}: {type(node).__name__} is outside what is read")

    def assign(self, target: ast.expr, value: Traced) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
            return
        if isinstance(target, ast.Subscript):
            holder = self.expr(target.value).value
            key = self.expr(target.slice).value
            if isinstance(holder, dict):
                holder[key] = value.value
                return
        raise Unreadable(f"line {target.lineno}: an assignment outside what is read")

    def expr(self, node: ast.expr) -> Traced:
        if isinstance(node, ast.Constant):
            return Traced(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            if node.id in BUILTIN_TYPES:
                return Traced(BUILTIN_TYPES[node.id])
            raise Unreadable(f"line {node.lineno}: the name {node.id!r} is not known here")
        if isinstance(node, ast.Attribute):
            return self.attribute(self.expr(node.value), node.attr, NOTHING, node)
        if isinstance(node, ast.Tuple | ast.List):
            items = [self.expr(e).value for e in node.elts]
            return Traced(tuple(items) if isinstance(node, ast.Tuple) else items)
        if isinstance(node, ast.Dict):
            return Traced(
                {
                    self.expr(k).value: self.expr(v).value
                    for k, v in zip(node.keys, node.values, strict=True)
                    if k is not None
                }
            )
        if isinstance(node, ast.BoolOp):
            result = Traced(None)
            for operand in node.values:
                result = self.expr(operand)
                if bool(result.value) == isinstance(node.op, ast.Or):
                    return result
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Traced(not self.expr(node.operand).value)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return Traced(self.compare(node))
        if isinstance(node, ast.Subscript):
            holder = self.expr(node.value)
            return Traced(holder.value[self.expr(node.slice).value], holder.field)
        if isinstance(node, ast.IfExp):
            return self.expr(node.body if self.expr(node.test).value else node.orelse)
        if isinstance(node, ast.ListComp):
            return self.comprehension(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Unreadable(f"line {node.lineno}: {type(node).__name__} is outside what is read")

    def attribute(self, holder: Traced, name: str, default: Any, node: ast.expr) -> Traced:
        value = holder.value
        if isinstance(value, ConfigView):
            if name in value.config:
                return Traced(value.config[name], name)
            if default is NOTHING:
                raise Unreadable(f"line {node.lineno}: the config has no {name!r} (AttributeError)")
            return Traced(default, name)
        if isinstance(value, Opaque):
            return Traced(ConfigView(self.config) if name == "hf_config" else Opaque())
        raise Unreadable(f"line {node.lineno}: attribute {name!r} of a {type(value).__name__}")

    def binary(self, node: ast.BinOp) -> Traced:
        left, right = self.expr(node.left), self.expr(node.right)
        operations: dict[type, Callable[[Any, Any], Any]] = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.FloorDiv: lambda a, b: a // b,
        }
        operation = operations.get(type(node.op))
        if operation is None:
            raise Unreadable(f"line {node.lineno}: operator {type(node.op).__name__}")
        return Traced(operation(left.value, right.value), left.field or right.field)

    def compare(self, node: ast.Compare) -> bool:
        left, right = self.expr(node.left).value, self.expr(node.comparators[0]).value
        op = node.ops[0]
        if isinstance(op, ast.Eq):
            return bool(left == right)
        if isinstance(op, ast.NotEq):
            return bool(left != right)
        if isinstance(op, ast.In):
            return left in right
        if isinstance(op, ast.NotIn):
            return left not in right
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
        raise Unreadable(f"line {node.lineno}: comparison {type(op).__name__}")

    def comprehension(self, node: ast.ListComp) -> Traced:
        (generator,) = node.generators
        if generator.ifs or not isinstance(generator.target, ast.Name):
            raise Unreadable(f"line {node.lineno}: a comprehension outside what is read")
        source = self.expr(generator.iter)
        results = []
        for item in source.value:
            self.names[generator.target.id] = Traced(item)
            results.append(self.expr(node.elt).value)
        shift = ast.unparse(node.elt).replace(generator.target.id, "id")
        field = f"{source.field} ({shift})" if source.field and shift != "id" else source.field
        return Traced(results, field)

    def call(self, node: ast.Call) -> Traced:
        function = node.func
        args = node.args
        if isinstance(function, ast.Name) and function.id in ("getattr", "hasattr"):
            holder = self.expr(args[0])
            name = self.expr(args[1]).value
            if function.id == "hasattr":
                if isinstance(holder.value, ConfigView):
                    return Traced(name in holder.value.config)
                return Traced(True)
            default = self.expr(args[2]).value if len(args) > 2 else NOTHING
            return self.attribute(holder, name, default, node)
        if isinstance(function, ast.Name) and function.id == "isinstance":
            value, kinds = self.expr(args[0]).value, self.expr(args[1]).value
            return Traced(isinstance(value, kinds))
        if isinstance(function, ast.Name) and function.id in ("tuple", "list", "len"):
            argument = self.expr(args[0])
            converters: dict[str, Callable[[Any], Any]] = {"tuple": tuple, "list": list, "len": len}
            return Traced(converters[function.id](argument.value), argument.field)
        if isinstance(function, ast.Attribute) and function.attr == "get":
            holder = self.expr(function.value)
            if isinstance(holder.value, dict):
                key = self.expr(args[0]).value
                default = self.expr(args[1]).value if len(args) > 1 else None
                field = f"{holder.field}.{key}" if holder.field else key
                return Traced(holder.value.get(key, default), field)
        raise Unreadable(f"line {node.lineno}: the call {ast.unparse(function)}() is not read")


BUILTIN_TYPES: dict[str, Any] = {"list": list, "tuple": tuple, "dict": dict, "int": int, "str": str}
"""The builtins the readers test with ``isinstance``, and ``None``-like names are constants."""


def parse(files: Files, path: str) -> ast.Module | None:
    data = files.read(path)
    if data is None:
        return None
    try:
        return ast.parse(decode(data, path))
    except SyntaxError as error:
        raise Unreadable(f"{path}:{error.lineno}: not valid Python") from error


def find_function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    """A function or method named ``name`` anywhere in ``module``."""
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def fields_read(function: ast.FunctionDef) -> tuple[str, ...]:
    """The config fields a reader names, in order: ``getattr(hf_config, "x")`` gives ``x``,
    ``d.get("k")`` on a ``d = getattr(hf_config, "x")`` gives ``x.k`` (a loop over constant
    names gives one field per name)."""
    loops = {
        node.target.id: [
            e.value
            for e in node.iter.elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        for node in ast.walk(function)
        if isinstance(node, ast.For)
        and isinstance(node.target, ast.Name)
        and isinstance(node.iter, ast.Tuple | ast.List)
    }
    holders: dict[str, list[str]] = {}
    for node in ast.walk(function):
        assigned = assigned_call(node, "getattr")
        if assigned is not None and len(assigned[1].args) > 1:
            target, name = assigned[0], assigned[1].args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                holders[target] = [name.value]
            elif isinstance(name, ast.Name) and name.id in loops:
                holders[target] = loops[name.id]
    found: list[str] = []
    calls = sorted(
        (n for n in ast.walk(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        field = constant_field(call)
        if field is None:
            continue
        named = [field]
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
            named = [f"{prefix}.{field}" for prefix in holders.get(call.func.value.id, [])]
        found += [f for f in named if f not in found]
    return tuple(f for f in found if not any(g.startswith(f"{f}.") for g in found))


def assigned_call(node: ast.AST, builtin: str) -> tuple[str, ast.Call] | None:
    """``name = builtin(...)``: the name and the call."""
    if (
        isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == builtin
    ):
        return node.targets[0].id, node.value
    return None


def constant_field(node: ast.expr) -> str | None:
    """``getattr(hf_config, "x", ...)``, ``hasattr(...)`` or ``d.get("x")``: ``x``."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    function = node.func
    if (
        isinstance(function, ast.Name)
        and function.id in ("getattr", "hasattr")
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    if isinstance(function, ast.Attribute) and function.attr == "get":
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


@dataclass(frozen=True)
class Found:
    """The ids a runner takes from a config, and the field they came from; None: the default."""

    ids: tuple[int, ...] | None
    field: str | None


@dataclass(frozen=True)
class RunnerReader:
    """One model runner's id-reading function as the release ships it."""

    runner: str
    path: str
    function: ast.FunctionDef
    default_method: str | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.function.name}"

    @property
    def fields(self) -> tuple[str, ...]:
        return fields_read(self.function)

    def read(self, config: Mapping[str, Any]) -> Found:
        """Run the release's function over ``config``; Unreadable if its shape is not followed."""
        interpreter = Interpreter(self.function, {}, config)
        try:
            result = interpreter.run()
        except (TypeError, KeyError, IndexError, AttributeError, ValueError) as error:
            raise Unreadable(f"{self.where} fails on this config ({error})") from error
        if result.value is None:
            return Found(None, None)
        if not isinstance(result.value, tuple | list):
            raise Unreadable(f"{self.where} returned a {type(result.value).__name__}")
        return Found(tuple(result.value), result.field)


def runner_readers(files: Files) -> list[RunnerReader]:
    """The V1 and the V2 runner's readers, those the release has."""
    readers = []
    for runner, path, name in (("V1", V1_RUNNER, V1_READER), ("V2", V2_UTILS, V2_READER)):
        module = parse(files, path)
        function = find_function(module, name) if module else None
        if module is not None and function is not None:
            readers.append(RunnerReader(runner, path, function, fallback_method(module, name)))
    return readers


def fallback_method(module: ast.Module, reader: str) -> str | None:
    """The target's method that the function calling ``reader`` falls back to."""
    for node in ast.walk(module):
        if not isinstance(node, ast.FunctionDef) or node.name == reader:
            continue
        calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
        names = {c.func.attr for c in calls if isinstance(c.func, ast.Attribute)}
        names |= {c.func.id for c in calls if isinstance(c.func, ast.Name)}
        if reader in names:
            for method in DEFAULT_METHODS:
                if method in names:
                    return method
    return None


@dataclass(frozen=True)
class Default:
    """The ids a target falls back to, and the code that says so."""

    ids: tuple[int, ...] | None
    formula: str
    where: str


def registry(files: Files) -> dict[str, tuple[str, str]]:
    """The model registry's literal entries: architecture -> (module, class)."""
    module = parse(files, REGISTRY)
    entries: dict[str, tuple[str, str]] = {}
    if module is None:
        return entries
    for node in ast.walk(module):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and isinstance(value, ast.Tuple)
                and len(value.elts) == 2
                and all(isinstance(e, ast.Constant) for e in value.elts)
            ):
                module_name, class_name = (e.value for e in value.elts)  # type: ignore[attr-defined]
                entries.setdefault(key.value, (f"{MODELS}{module_name}.py", class_name))
    return entries


def class_methods(module: ast.Module, class_name: str) -> Iterator[ast.FunctionDef]:
    """The methods of ``class_name`` and of its bases defined in the same module, nearest first."""
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    pending, seen = [class_name], set()
    while pending:
        name = pending.pop(0)
        if name in seen or name not in classes:
            continue
        seen.add(name)
        yield from (n for n in classes[name].body if isinstance(n, ast.FunctionDef))
        pending += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]


def target_default(files: Files, method: str, architecture: str, layers: int) -> Default | None:
    """What ``method`` returns for a target of ``layers`` decoder layers: the class's own
    override, else the interface's; None where neither defines it (the target lacks EAGLE-3)."""
    known = registry(files)
    candidates: list[tuple[str, str]] = []
    if architecture in known:
        candidates.append(known[architecture])
    candidates.append((INTERFACES, "SupportsEagle3"))
    for path, class_name in candidates:
        module = parse(files, path)
        if module is None:
            continue
        for function in class_methods(module, class_name):
            if function.name == method:
                where = f"{path}:{class_name}.{method}"
                return Default(evaluate_default(function, layers), default_formula(function), where)
    return None


def default_formula(function: ast.FunctionDef) -> str:
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value]
    return ast.unparse(returns[-1].value) if returns else "?"  # type: ignore[arg-type]


def evaluate_default(function: ast.FunctionDef, layers: int) -> tuple[int, ...] | None:
    """The default's ids: its return over the name it binds to ``len(...layers)``."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value]
    if not returns or not isinstance(returns[-1].value, ast.Tuple):
        return None
    names = {
        assigned[0]: layers
        for node in ast.walk(function)
        if (assigned := assigned_call(node, "len")) is not None
    }
    interpreter = Interpreter(function, {})
    interpreter.names.update({name: Traced(value) for name, value in names.items()})
    try:
        value = interpreter.expr(returns[-1].value).value
    except (Unreadable, TypeError):
        return None
    return tuple(value) if isinstance(value, tuple) else None


def model_modules(files: Files, architectures: Sequence[str]) -> list[str]:
    """The modules the registry names for ``architectures``, in order, each once."""
    known = registry(files)
    paths: list[str] = []
    for architecture in architectures:
        if architecture in known and known[architecture][0] not in paths:
            paths.append(known[architecture][0])
    return paths


def collects_layer_count(files: Files, paths: Sequence[str]) -> str | None:
    """Where the target's forward collects the state after its last layer (id == n), if it does:
    ``_maybe_add_hidden_state(..., idx + 1, ...)`` after each layer, or ``self.end_layer in
    self.aux_hidden_state_layers`` after the loop."""
    for path in paths:
        module = parse(files, path)
        if module is None:
            continue
        for node in ast.walk(module):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_maybe_add_hidden_state"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.BinOp)
                and isinstance(node.args[1].op, ast.Add)
            ):
                return f"{path}:{node.lineno}"
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.ops[0], ast.In)
                and ast.unparse(node.comparators[0]).endswith("aux_hidden_state_layers")
                and ast.unparse(node.left).endswith(("end_layer", "len(self.layers)"))
            ):
                return f"{path}:{node.lineno}"
    return None


def config_attributes(files: Files, paths: Sequence[str]) -> frozenset[str]:
    """Every config attribute the modules read: ``config.x``, ``getattr(config, "x")``,
    ``config.get("x")`` on anything named like a config."""
    found: set[str] = set()
    for path in paths:
        module = parse(files, path)
        if module is None:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Attribute) and ast.unparse(node.value).endswith("config"):
                found.add(node.attr)
            elif isinstance(node, ast.Call) and (field := constant_field(node)):
                found.add(field)
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                found.add(node.slice.value)
    return frozenset(found)


def imported_models(files: Files, path: str) -> list[str]:
    """The model modules ``path`` imports from (``from .llama import ...``), one level deep."""
    module = parse(files, path)
    paths: list[str] = []
    if module is None:
        return paths
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            name = node.module
            if node.level == 1:
                name = f"vllm.model_executor.models.{name}"
            if name.startswith("vllm.model_executor.models."):
                paths.append(name.replace(".", "/") + ".py")
    return paths


def v2_choice(files: Files) -> list[str]:
    """When ``use_v2_model_runner`` picks a runner, in the release's own words: each early
    return's condition and what it returns, in order."""
    module = parse(files, VLLM_CONFIG)
    function = find_function(module, "use_v2_model_runner") if module else None
    if function is None:
        return []
    rules = []
    for node in function.body:
        if isinstance(node, ast.If):
            returns = [n for n in node.body if isinstance(n, ast.Return) and n.value]
            if returns:
                said = ast.unparse(returns[-1].value)  # type: ignore[arg-type]
                runner = {"True": "V2", "False": "V1"}.get(said, said)
                rules.append(f"if {ast.unparse(node.test)}: {runner}")
        elif isinstance(node, ast.Return) and node.value is not None:
            said = ast.unparse(node.value)
            rules.append(f"otherwise: {({'True': 'V2', 'False': 'V1'}).get(said, said)}")
    return rules


def default_v2_architectures(files: Files) -> frozenset[str] | None:
    """``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` where the release limits V2 to a list."""
    module = parse(files, VLLM_CONFIG)
    if module is None:
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if (
                isinstance(target, ast.Name)
                and target.id == "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"
            ):
                value = node.value
                if isinstance(value, ast.Call) and len(value.args) == 1:
                    value = value.args[0]  # frozenset({...})
                try:
                    return frozenset(ast.literal_eval(value))  # type: ignore[arg-type]
                except ValueError:
                    return None
    return None


def speculators_config(files: Files, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """A speculators-format config as vLLM turns it into the drafter's hf_config: the release's
    own updater for its ``speculators_model_type`` run over it. None if it is not one."""
    algorithm = config.get("speculators_model_type")
    if "speculators_config" not in config or not isinstance(algorithm, str):
        return None
    module = parse(files, SPECULATORS_ALGOS)
    if module is None:
        raise Unreadable(f"this release has no {SPECULATORS_ALGOS}: no speculators format")
    updater = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and decorator.args
                    and isinstance(decorator.args[0], ast.Constant)
                    and decorator.args[0].value == algorithm
                ):
                    updater = node
    if updater is None:
        raise Unreadable(f"this release has no speculators updater for {algorithm!r}")
    layer = config.get("transformer_layer_config")
    built: dict[str, Any] = dict(layer) if isinstance(layer, dict) else {}
    names = [a.arg for a in updater.args.args]
    Interpreter(updater, dict(zip(names, (dict(config), built), strict=False))).run()
    return built


LAYOUTS: tuple[tuple[str, Callable[[int], list[int]]], ...] = (
    ("vLLM's default (2, n // 2, n - 3)", lambda n: [2, n // 2, n - 3]),
    ("SpecForge's default [1, n//2-1, n-4]", lambda n: [1, n // 2 - 1, n - 4]),
)
"""Id layouts of a depth ``n`` that trainers and vLLM name: a drafter's ids that are one of them
for the full depth are that layout for the shrunk one, so a doctor of the shrunk pair sees the
same evidence (SpecForge's default is its suspicion of the output-of convention)."""


def shrunk_ids(ids: Sequence[int], depth: int, shrunk: int) -> tuple[list[int], str]:
    """A drafter's aux layer ids for a target of ``depth`` layers, mapped onto the same target
    cut to ``shrunk`` layers, in the numbering they have (a convention is never converted here:
    ``patcher doctor`` says which it is), and how.

    A named layout (``LAYOUTS``) is kept as that layout. Otherwise each id keeps its position
    relative to the nearer end: an id within ``shrunk // 2`` of the first layer keeps its
    number, one within that of the last layer keeps its distance from ``depth`` (``depth``
    itself, the last layer's output, stays the last layer's output), and one between them is
    scaled with the depth; ids that then meet are moved apart, in order. Refused (one line)
    where an id is past the depth, or more ids than the shrunk depth can hold apart."""
    if any(not isinstance(i, int) or isinstance(i, bool) for i in ids):
        raise ValueError(f"aux layer ids {list(ids)!r:.120} are not all whole numbers")
    past = [i for i in ids if not 0 <= i <= depth]
    if past:
        raise ValueError(
            f"aux layer ids {past} are past the model's depth: it has {depth} layers, "
            f"so ids 0..{depth} (id {depth} is the last layer's output)"
        )
    for name, layout in LAYOUTS:
        if list(ids) == layout(depth) and layout(shrunk) == sorted(set(layout(shrunk))):
            return layout(shrunk), f"{name} for n = {depth}, as that layout for n = {shrunk}"
    near = shrunk // 2
    mapped = []
    for i in ids:
        if i < near and i <= depth - i:
            mapped.append(i)
        elif depth - i < near:
            mapped.append(shrunk - (depth - i))
        else:
            mapped.append(min(shrunk, max(0, round(i * shrunk / depth))))
    if list(ids) == sorted(set(ids)):  # distinct and increasing: kept so
        top = shrunk if depth in ids else shrunk - 1
        mapped[-1] = min(mapped[-1], top) if mapped else top
        for k in range(1, len(mapped)):
            mapped[k] = max(mapped[k], mapped[k - 1] + 1)
        for k in range(len(mapped) - 2, -1, -1):
            mapped[k] = min(mapped[k], mapped[k + 1] - 1)
        if mapped and (mapped[0] < 0 or mapped[-1] > top):
            raise ValueError(
                f"aux layer ids {list(ids)}: {len(ids)} ids do not fit apart in a replica of "
                f"{shrunk} layers"
            )
    how = (
        f"each kept at its distance from the first or the last of {depth} layers within "
        f"{near} of it, else scaled to {shrunk}"
    )
    return mapped, how
