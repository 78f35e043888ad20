"""What users of uv, ruff, gh and pip expect of a command line (issue 29): ``-q`` and ``-v``
before or after the command, the exit status and the environment in ``patcher --help``, shell
completion written from the parser."""

from __future__ import annotations

import argparse
import io
import subprocess

import pytest
from commandline import PATCHER

from patcher import cache, index
from patcher.cli.overview import COMMANDS, EPILOG
from patcher.cli.parser import build_parser, subcommand
from patcher.cli.terminal import SIGINT_STATUS, SIGTERM_STATUS, Console, LineDisplay
from patcher.errors import DriftError, NetworkError, OutputClosed, PatcherError


@pytest.mark.parametrize(
    ("argv", "quiet", "verbose"),
    [
        (["list"], False, False),
        (["-q", "list"], True, False),
        (["list", "-q"], True, False),
        (["--quiet", "list", "--format", "json"], True, False),
        (["-v", "list"], False, True),
        (["list", "--verbose"], False, True),
        (["-q", "list", "-v"], True, True),
    ],
)
def test_quiet_and_verbose_go_before_or_after_the_command(argv, quiet, verbose):
    args = build_parser({"list"}).parse_args(argv)
    assert (args.quiet, args.verbose) == (quiet, verbose)


def test_the_help_gives_the_exit_status_the_errors_carry():
    codes = {int(line.split()[0]) for line in EPILOG.splitlines() if line[:3].strip().isdigit()}
    carried = {
        0,
        PatcherError.exit_code,
        DriftError.exit_code,
        NetworkError.exit_code,
        OutputClosed.exit_code,
        SIGINT_STATUS,
        SIGTERM_STATUS,
    }
    assert codes == carried == {0, 1, 2, 3, 130, 141, 143}
    shown = subprocess.run([PATCHER, "--help"], capture_output=True, text=True, check=True)
    assert "exit status:" in shown.stdout and "141  stdout closed" in shown.stdout


def test_the_help_names_the_environment_read():
    for name in (cache.CACHE_ENV, index.TIMEOUT_ENV, "PIP_INDEX_URL", "NO_COLOR"):
        assert f"  {name} " in EPILOG, name


def test_a_verbose_step_is_one_line_with_its_size():
    stream = io.StringIO()
    console = Console(stderr=True)
    console.file = stream
    with LineDisplay(console).step("downloading vllm-0.16.0.whl", 486_000_000) as advance:
        advance(1000)
    assert stream.getvalue() == "patcher: downloading vllm-0.16.0.whl (486 MB)\n"


def completed(script: str, *words: str) -> list[str]:
    """What bash offers after ``patcher WORDS`` (the last word the one being typed)."""
    line = " ".join(f"'{w}'" for w in ("patcher", *words))
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _patcher\n"
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.fixture(scope="module")
def bash_script() -> str:
    done = subprocess.run([PATCHER, "completion", "bash"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bash_completes_commands_options_and_choices(bash_script):
    assert completed(bash_script, "") == list(COMMANDS)
    assert completed(bash_script, "se") == ["serve-bench"]
    assert completed(bash_script, "-q", "di") == ["diff"]
    assert completed(bash_script, "diff", "--pla") == ["--platform"]
    assert completed(bash_script, "diff", "--platform", "") == ["x86_64", "aarch64"]
    assert completed(bash_script, "serve-bench", "--drafter-k") == ["--drafter-kind"]
    assert completed(bash_script, "completion", "") == ["bash", "zsh", "fish"]


def test_every_option_of_every_command_is_in_the_bash_completion(bash_script):
    parser = build_parser()
    for name in COMMANDS:
        for action in subcommand(parser, name)._actions:
            if action.help == argparse.SUPPRESS:  # a deprecated spelling: not offered
                continue
            for flag in action.option_strings:
                assert flag in completed(bash_script, name, flag), (name, flag)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_the_other_shells_scripts_name_every_command(shell):
    done = subprocess.run([PATCHER, "completion", shell], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in COMMANDS:
        assert f" {name}" in done.stdout, name
