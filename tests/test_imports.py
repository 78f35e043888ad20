"""Imports point down: each layer of patcher imports only its own layer and the ones below.

Layers, bottom up: 1 data and codemods; 2 sources and outputs (with the cache, the index, the
venvs); 3 engine and matrix; 4 verify, serving and bench; 5 the CLI. Every layer's modules are
imported in a fresh interpreter, one module after another, and what each brought along is
recorded: no module of a higher layer may come, and layer 1 never brings the network or git.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import patcher
from patcher.cli.overview import COMMANDS

LAYERS: dict[str, int] = {
    # 1: data and codemods: what to change and how, read from the package's data
    "patcher": 1,
    "patcher.errors": 1,
    "patcher.defaults": 1,
    "patcher.files": 1,
    "patcher.distributions": 1,
    "patcher.schema": 1,
    "patcher.checks": 1,
    "patcher.codemods": 1,
    "patcher.patchset": 1,
    "patcher.result": 1,
    "patcher.report": 1,
    "patcher.records": 1,
    "patcher.replica": 1,
    "patcher.replica.spec": 1,
    "patcher.replica.tokenizer": 1,
    "patcher.replica.build": 1,
    "patcher.drafter_ids": 1,
    "patcher.progress": 1,
    # 2: sources and outputs: where vLLM code comes from and where patched code goes
    "patcher.cache": 2,
    "patcher.cache_usage": 2,
    "patcher.index": 2,
    "patcher.pipconfig": 2,
    "patcher.elf": 2,
    "patcher.venvs": 2,
    "patcher.torches": 2,
    "patcher.results_cache": 2,
    "patcher.proofs": 2,
    "patcher.sources": 2,
    "patcher.outputs": 2,
    "patcher.replica.write": 2,
    "patcher.replica.published": 2,
    "patcher.drafter_files": 2,
    "patcher.replica.weights": 2,
    "patcher.wheel_metadata": 2,
    # 3: the engine runs a patchset over a source; the matrix over every release
    "patcher.engine": 3,
    "patcher.matrix": 3,
    "patcher.bundling": 3,
    "patcher.doctor": 3,
    "patcher.scan": 3,
    "patcher.official": 3,
    # 4: what runs vLLM: verify on CPU, serving, the benchmarks
    "patcher.verify": 4,
    "patcher.acceptance": 4,
    "patcher.serving": 4,
    "patcher.bench": 4,
    "patcher.bench_report": 4,
    # 5: the command line
    "patcher.cli": 5,
}
"""A module's layer is its own entry's, else its package's (``patcher.sources.git``: 2)."""

NEVER_IN_LAYER_1 = ("git", "requests", "urllib3", "filelock")
"""Reading a patchset or running a codemod needs neither the network nor git nor locks."""

ROOT = Path(patcher.__file__).parent

SCRIPT = """
import importlib, json, sys
brought = {}
for name in sys.argv[1:]:
    before = set(sys.modules)
    importlib.import_module(name)
    brought[name] = sorted(set(sys.modules) - before)
print(json.dumps(brought))
"""
"""Imports each module named in turn and prints what each one brought along."""


def layer_of(module: str) -> int | None:
    while module:
        if module in LAYERS:
            return LAYERS[module]
        module = module.rpartition(".")[0]
    return None


def all_modules() -> list[str]:
    """Every module of the package, found on disk without importing any."""
    found = ["patcher"]
    for info in pkgutil.walk_packages([str(ROOT)], "patcher.", onerror=lambda name: None):
        if not info.name.endswith(".__main__"):  # runs the command line when imported
            found.append(info.name)
    return sorted(found)


def imported_along(modules: list[str]) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT.parent,
    )
    assert done.returncode == 0, done.stderr
    brought: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    return brought


def test_every_module_has_a_layer() -> None:
    assert [m for m in all_modules() if layer_of(m) is None] == []


@pytest.mark.parametrize("layer", [1, 2, 3, 4, 5])
def test_a_layer_imports_only_itself_and_below(layer: int) -> None:
    modules = [m for m in all_modules() if layer_of(m) == layer]
    brought = imported_along(modules)
    upward = {
        module: higher
        for module, came in brought.items()
        if (higher := [m for m in came if (layer_of(m) or 0) > layer])
    }
    assert upward == {}, f"layer {layer} imports from above it"
    if layer == 1:
        heavy = {
            module: found
            for module, came in brought.items()
            if (found := [m for m in came if m.partition(".")[0] in NEVER_IN_LAYER_1])
        }
        assert heavy == {}, "data and codemods must not bring git, the network or locks"


APART: dict[str, str] = {"patcher.sources": "patcher.outputs"}
"""Packages of one layer that never import each other: where vLLM code comes from knows
nothing of where it goes (what both need, RECORD, is ``patcher.records`` beneath them)."""


@pytest.mark.parametrize(("package", "apart"), APART.items())
def test_packages_kept_apart_import_nothing_of_each_other(package: str, apart: str) -> None:
    brought = imported_along([m for m in all_modules() if m.startswith(f"{package}.")])
    crossing = {
        module: found
        for module, came in brought.items()
        if (found := [m for m in came if m == apart or m.startswith(f"{apart}.")])
    }
    assert crossing == {}, f"{package} imports {apart}"


STARTUP_SCRIPT = """
import contextlib, importlib, io, json, sys
before = set(sys.modules)  # the interpreter's own start, and coverage's when it measures
module, *argv = sys.argv[1:]
main = importlib.import_module(module).main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(argv)
print(json.dumps(sorted(set(sys.modules) - before)))
"""
"""What ``module.main(argv)`` loads."""

NOT_AT_STARTUP = ("libcst", "rich", "git", "requests", "urllib3", "filelock", "packaging", "typing")
"""The third-party stacks (and typing, a few milliseconds) that only commands need."""


def loaded_by(module: str, *argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", STARTUP_SCRIPT, module, *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_the_console_script_answers_version_and_help_without_a_parser(argv) -> None:
    """issue 21: ``patcher --version`` imported the whole program (0.39 s against 0.034 s for
    ``python3 -c pass``). argparse and re alone take as long as Python's start."""
    loaded = loaded_by("patcher.cli.main", *argv)
    ours = [m for m in loaded if m.startswith("patcher")]
    declared = [m for m in ours if m.startswith("patcher.cli.commands")]
    assert [m for m in ours if m not in declared] == [
        "patcher",
        "patcher.cli",
        "patcher.cli.command",
        "patcher.cli.main",
        "patcher.cli.overview",
    ]
    # --help reads each command's declaration (light modules); --version none of them
    assert (declared != []) == (argv == ["--help"])
    assert "argparse" not in loaded and "re" not in loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["nope"]])
def test_the_parser_imports_no_command_module(argv) -> None:
    """``import patcher.cli`` and its parser, without a command chosen: no command's module,
    none of the stacks they bring."""
    loaded = loaded_by("patcher.cli.parser", *argv)
    assert [m for m in loaded if m.partition(".")[0] in NOT_AT_STARTUP] == []
    ours = [
        m for m in loaded if m.startswith("patcher") and not m.startswith("patcher.cli.commands")
    ]
    assert ours == [
        "patcher",
        "patcher.cli",
        "patcher.cli.command",
        "patcher.cli.modes",
        "patcher.cli.overview",
        "patcher.cli.parser",
        "patcher.cli.terminal",
        "patcher.errors",
    ]


HELP_MODULES = {
    "patcher",
    "patcher.cli",
    "patcher.cli.command",
    "patcher.cli.main",
    "patcher.cli.modes",
    "patcher.cli.overview",
    "patcher.cli.parser",
    "patcher.cli.shared",
    "patcher.cli.terminal",
    "patcher.defaults",
    "patcher.distributions",
    "patcher.errors",
}
"""What a command's options are declared from, beside its own module of ``patcher.cli.commands``:
modules that import no stack, so its ``--help`` costs about what ``patcher --help`` does."""

COMMAND_HELPS = [[name, "--help"] for name in COMMANDS] + [
    ["cache", sub, "--help"] for sub in ("dir", "size", "clean")
]


@pytest.mark.parametrize("argv", COMMAND_HELPS, ids=" ".join)
def test_a_commands_help_loads_only_its_options(argv) -> None:
    """issue 39: ``patcher matrix --help`` took 347 ms against 23 ms for ``patcher --help``:
    building a command's options imported what it runs (rich, libcst, git, the network stack,
    the patchsets). They are declared from light modules (``HELP_MODULES``), and what the
    command runs is imported when it runs (its module's ``run``)."""
    loaded = loaded_by("patcher.cli.main", *argv)
    assert [m for m in loaded if m.partition(".")[0] in NOT_AT_STARTUP] == []
    ours = {m for m in loaded if m.startswith("patcher") and ".cli.commands" not in m}
    assert sorted(ours - HELP_MODULES) == []


WHOLE_PARSER_SCRIPT = """
import json, sys
before = set(sys.modules)  # the interpreter's own start, and coverage's when it measures
from patcher.cli.parser import build_parser
from patcher.cli.reference import markdown
markdown(build_parser())
print(json.dumps(sorted(set(sys.modules) - before)))
"""
"""What building every command's options, and rendering each one's help, loads."""


def test_building_every_commands_options_loads_no_stack() -> None:
    """The docs' reference and the completion scripts build the whole parser: no command's
    options import what it runs."""
    done = subprocess.run(
        [sys.executable, "-c", WHOLE_PARSER_SCRIPT], capture_output=True, text=True, check=True
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert [m for m in loaded if m.partition(".")[0] in NOT_AT_STARTUP] == []
    ours = {m for m in loaded if m.startswith("patcher") and ".cli.commands" not in m}
    assert sorted(ours - HELP_MODULES - {"patcher.cli.reference"}) == []


def test_no_package_reexports() -> None:
    """An ``__init__.py`` holds its package's docstring and nothing that loads a module."""
    eager = {
        str(init.relative_to(ROOT.parent)): [
            ast.unparse(node)
            for node in ast.parse(init.read_text()).body
            if isinstance(node, ast.Import | ast.ImportFrom)
            and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        ]
        for init in ROOT.rglob("__init__.py")
    }
    assert {path: imports for path, imports in eager.items() if imports} == {}


def module_file(module: str) -> Path | None:
    """The file of ``patcher.X.Y``: its module, or its package's ``__init__.py``."""
    path = ROOT.parent.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(module: str) -> set[str]:
    """Every module of patcher that ``module`` imports, read from its source: at the top, in a
    function, or under ``if TYPE_CHECKING`` alike (each is an arrow of the structure)."""
    path = module_file(module)
    assert path is not None, module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:  # from package import module: the module, if it is one
                child = f"{base}.{alias.name}"
                found.add(child if module_file(child) else base)
    return {name for name in found if name.partition(".")[0] == "patcher"} - {module}


def import_graph() -> dict[str, set[str]]:
    return {module: imports_of(module) for module in all_modules()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_circle() -> None:
    """issue 29: ``cli`` -> ``cli_main`` -> ``terminal`` -> ``cli_main`` and ``codemods.base``
    <-> ``codemods.registry`` were circles; every import statement counts, lazy ones too."""
    assert circles(import_graph()) == []


def package_of(module: str) -> str:
    """The package a module's arrows count for: ``patcher.verify.command``: ``patcher.verify``;
    a module right under ``patcher`` (``patcher.engine``) stands for itself."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module folded into its package, an arrow inside one package left out."""
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        package = package_of(module)
        packages.setdefault(package, set()).update(package_of(t) for t in targets)
    return {package: targets - {package} for package, targets in packages.items()}


def test_the_package_import_graph_has_no_circle() -> None:
    """issue 39: ``patcher.serving`` imported ``patcher.verify`` (the patched wheel's build,
    the wheel's METADATA) and ``patcher.verify`` imported ``patcher.serving`` (the aux-states
    check's venvs): no module circle, but two packages that needed each other. What both need
    is below them (``patcher.official``, ``patcher.wheel_metadata``)."""
    assert circles(package_graph(import_graph())) == []


def test_no_import_statement_points_up_a_layer() -> None:
    """The layers read from the source: an import inside a function is an arrow too, though
    ``test_a_layer_imports_only_itself_and_below`` cannot see it until the function runs."""
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if (layer_of(target) or 0) > (layer_of(module) or 0)
    )
    assert upward == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    folded = {"patcher.a.x": {"patcher.b.y", "patcher.a.z"}, "patcher.b.y": {"patcher.a"}}
    assert circles(package_graph(folded)) == [["patcher.a", "patcher.b"]]


def test_every_package_is_in_the_wheel() -> None:
    """pyproject lists patcher's packages by hand: a package left out is missing from the wheel
    (and only from the wheel: the source tree and an editable install still have it)."""
    import tomllib

    tree = Path(__file__).parent.parent  # the source tree: the suite may run an installed wheel
    config = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(tree).parts)
        for init in (tree / "patcher").rglob("__init__.py")
    }
    assert found - listed == set()
