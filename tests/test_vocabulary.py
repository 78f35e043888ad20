"""One vocabulary (issue 29): an option name means one thing in every command, with one metavar
and one help, from one declaration (``patcher/cli/shared.py``); the old spellings that meant
something else still work, hidden, and say what to type instead."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from conftest import one_error_line

import patcher
from patcher.cli.overview import COMMANDS
from patcher.cli.parser import build_parser, main, subcommand
from patcher.cli.shared import SHARED

CLI = Path(patcher.__file__).parent / "cli"
NAMES = [option.flags[0] for option in SHARED]


def shown_options() -> dict[str, list[tuple[str, str | None, str | None]]]:
    """Per shared option: (command, metavar, help) wherever a command shows it."""
    parser = build_parser()
    found: dict[str, list[tuple[str, str | None, str | None]]] = {name: [] for name in NAMES}
    for command in COMMANDS:
        for action in subcommand(parser, command)._actions:
            for flag in action.option_strings:
                if flag in found and action.help != argparse.SUPPRESS:
                    metavar = action.metavar if isinstance(action.metavar, str) else None
                    found[flag].append((command, metavar, action.help))
    return found


@pytest.mark.parametrize("flag", NAMES)
def test_a_shared_option_has_one_metavar_and_one_help(flag):
    uses = shown_options()[flag]
    assert len(uses) >= 2 or flag == "--since", uses
    assert len({(metavar, help) for _, metavar, help in uses}) == 1, uses


def test_no_command_declares_a_shared_option_itself():
    """The flags are written in shared.py alone (a hidden deprecated alias names an old one)."""
    written = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "shared.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in NAMES
            ):
                written.append(f"{path.name}: {node.args[0].value}")
    assert written == []


def test_replica_s_kind_python_and_release_have_names_of_their_own():
    replica = subcommand(build_parser({"replica"}), "replica")
    shown = {f for a in replica._actions if a.help != argparse.SUPPRESS for f in a.option_strings}
    assert {"--drafter-kind", "--transformers-python", "--transformers-venv"} <= shown
    assert not {"--drafter", "--python", "--vllm"} & shown


def test_an_old_spelling_works_and_says_what_to_type(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["replica", f"--out={out}", "--patchset=glm4-moe-eagle3", "--drafter", "llama"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "patcher: --drafter is deprecated here: use --drafter-kind" in err
    assert (out / "drafter" / "config.json").is_file()
    assert main(["replica", f"--out={tmp_path / 's'}", "--python", "/nonexistent/python"]) == 2
    assert "--transformers-python and --transformers-venv" in one_error_line(capsys)
