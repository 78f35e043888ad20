"""One meaning per option (issue 41, item 5): no abbreviations (``--vers`` is not
``--versions``), ``status`` and ``revert`` without ``--installed``, and ``--installed`` reads the
activated venv (``VIRTUAL_ENV``) when ``--python`` is not given, saying which interpreter."""

from __future__ import annotations

import argparse
import venv

import pytest
from conftest import one_error_line

from patcher.cli.parser import build_parser, main, subcommand


@pytest.mark.parametrize(
    "argv",
    [
        ["matrix", "--vers", "0.16.0"],
        ["matrix", "--sin", "0.16.0"],
        ["diff", "--vllm", "0.16.0", "--patch", "kimi-k2.5-eagle3"],
        ["--verb", "list"],
    ],
)
def test_an_abbreviated_option_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "unrecognized arguments: --" in capsys.readouterr().err


def test_no_parser_takes_abbreviations():
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert parser.allow_abbrev is False
    assert [n for n, p in commands.choices.items() if p.allow_abbrev] == []


@pytest.mark.parametrize("command", ["status", "revert"])
def test_status_and_revert_need_no_installed(command):
    parser = build_parser({command})
    assert parser.parse_args([command]).installed is True
    assert parser.parse_args([command, "--installed"]).installed is True  # still taken
    assert "--installed" in subcommand(parser, command).format_help()


@pytest.fixture
def empty_venv(tmp_path):
    venv.create(tmp_path / "empty", symlinks=True)
    return tmp_path / "empty"


@pytest.mark.parametrize("argv", [["status"], ["status", "--installed"], ["revert"]])
def test_installed_reads_the_activated_venv_and_says_so(argv, empty_venv, monkeypatch, capsys):
    """pipx installs patcher in a venv of its own: the activated venv is the one meant."""
    monkeypatch.setenv("VIRTUAL_ENV", str(empty_venv))
    python = str(empty_venv / "bin" / "python")
    assert main(argv) == 2
    shown = capsys.readouterr().err
    assert f"patcher: reading the vLLM of {python} ($VIRTUAL_ENV)" in shown
    assert f"{python} -m pip install vllm==VERSION" in shown.splitlines()[-1]


def test_python_wins_over_the_activated_venv(empty_venv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "elsewhere"))
    python = str(empty_venv / "bin" / "python")
    assert main(["status", "--python", python]) == 2
    error = one_error_line(capsys)
    assert f"{python} -m pip install vllm==VERSION" in error
    assert "elsewhere" not in error


def test_an_activated_venv_without_python_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "gone"))
    assert main(["status"]) == 2
    assert "$VIRTUAL_ENV" in one_error_line(capsys)


def test_patchers_own_venv_activated_is_not_announced(monkeypatch, capsys):
    """The activated venv is patcher's own (a nox session): the default, said by no line."""
    import sys

    from patcher.cli import parser

    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    args = build_parser({"status"}).parse_args(["status"])
    assert parser.activated_python(args) is None
    assert capsys.readouterr().err == ""
