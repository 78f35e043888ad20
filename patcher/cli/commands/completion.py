"""a shell completion script, written from the parser

patcher completion bash > ~/.local/share/bash-completion/completions/patcher
eval "$(patcher completion zsh)"
patcher completion fish > ~/.config/fish/completions/patcher.fish
"""


def arguments(parser) -> None:
    from patcher.cli.completion import SHELLS, command_completion

    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    parser.set_defaults(run=command_completion)
