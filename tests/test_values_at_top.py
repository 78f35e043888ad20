"""The command line turns its options into values once, at the top (issue 16, item 4).

The commands in ``patcher/cli/`` read an ``argparse.Namespace``; what they call takes the
values resolved from it. build-wheel opens the ``--wheel`` it is given as a zip once.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from packaging.version import Version
from test_build_wheel import build, small_wheel

import patcher

PACKAGE = Path(patcher.__file__).parent

RESOLVERS = {"open_named_wheel", "open_release"}
"""The functions of ``patcher.cli.wheels`` that turn a command's options into values; the run
over the wheel they name is ``patcher.official``'s."""


def parameters(tree: ast.Module) -> list[tuple[str, str, str]]:
    """(function, parameter, annotation) for every annotated parameter in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                if argument.annotation is not None:
                    found.append((node.name, argument.arg, ast.unparse(argument.annotation)))
    return found


def module_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_no_module_below_the_command_line_takes_a_namespace():
    offenders = [
        f"{path.relative_to(PACKAGE)}: {function}({name}: {annotation})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if PACKAGE / "cli" not in path.parents
        for function, name, annotation in parameters(module_tree(path))
        if "Namespace" in annotation
    ]
    assert offenders == []


SCRIPTS = {
    "verify/probe.py",
    "verify/aux_reference.py",
    "replica/seeded.py",
    "acceptance/train.py",
    "acceptance/train_gpu.py",
    "acceptance/gpu_proof.py",
    "outputs/bundle_install.py",
}
"""Files another interpreter runs as scripts (``<venv>/bin/python -I FILE``): patcher is not
installed there, so each reads its own few arguments."""


def imported_modules(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_only_the_command_line_imports_argparse():
    """issue 29: options are parsed in ``patcher/cli/`` alone (``python -m patcher.bench`` was
    the last parser below it, now ``patcher.cli.bench``)."""
    parsing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if PACKAGE / "cli" not in path.parents and "argparse" in imported_modules(module_tree(path))
    )
    assert set(parsing) <= SCRIPTS, parsing


def test_the_scripts_another_interpreter_runs_import_nothing_of_patcher():
    """What makes them scripts: they run where patcher is not installed."""
    ours = {
        script: sorted(m for m in imported_modules(module_tree(PACKAGE / script)) if "patcher" in m)
        for script in SCRIPTS
    }
    assert {script: found for script, found in ours.items() if found} == {}


def test_the_shared_wheel_steps_take_values_not_options_or_callbacks():
    """Only the resolvers read the Namespace; the run over the wheel takes no refusal callback."""
    taken = [
        found
        for path in (PACKAGE / "cli" / "wheels.py", PACKAGE / "official.py")
        for found in parameters(module_tree(path))
    ]
    namespaces = sorted({f for f, _, annotation in taken if "Namespace" in annotation})
    callbacks = sorted({f"{f}({n})" for f, n, annotation in taken if "Callable" in annotation})
    assert set(namespaces) <= RESOLVERS, namespaces
    assert callbacks == []


def test_build_wheel_opens_the_given_wheel_as_a_zip_once(tmp_path, capsys):
    """Counted by Python's own ``open`` audit events, by the module that opens the file: the zip
    is opened once (the hash of its bytes and the raw copy of its members read it as a file)."""
    wheel = small_wheel(tmp_path)
    opens: list[str] = []

    def count(event: str, args: tuple) -> None:
        path = args[0] if event == "open" else None
        if isinstance(path, str | bytes | Path) and os.fsdecode(path) == str(wheel):
            opens.append(Path(sys._getframe(1).f_code.co_filename).name)

    sys.addaudithook(count)  # hooks cannot be removed: it only counts this test's wheel
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 0
    built = capsys.readouterr().out.strip()
    assert Path(built).is_file()
    assert opens.count("zipfile.py") == 1, opens


def test_build_wheel_computes_its_local_version_once(tmp_path, capsys, monkeypatch):
    """The version checked before the download is the one the plan carries; counted wherever
    ``local_version`` is called from (the command, the wheel output)."""
    from patcher.outputs import wheel as wheel_output

    calls: list[tuple[str, str]] = []
    real = wheel_output.local_version

    def counted(version: str, label: str) -> Version:
        calls.append((version, label))
        return real(version, label)

    monkeypatch.setattr(wheel_output, "local_version", counted)  # the command imports it late
    assert build(small_wheel(tmp_path), tmp_path / "dist", "--allow-noop") == 0
    assert Path(capsys.readouterr().out.strip()).is_file()
    assert len(calls) == 1, calls
