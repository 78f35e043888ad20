"""``patcher completion``: its declaration; what it runs is in ``patcher.cli.completion``."""

from __future__ import annotations

from patcher.cli.command import Command

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser: argparse.ArgumentParser) -> None:
    from patcher.cli.completion import SHELLS, command_completion

    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    parser.set_defaults(run=command_completion)


COMMAND = Command(
    "completion",
    "a shell completion script, written from the parser",
    arguments,
    "patcher completion bash > ~/.local/share/bash-completion/completions/patcher",
    'eval "$(patcher completion zsh)"',
    "patcher completion fish > ~/.config/fish/completions/patcher.fish",
)
