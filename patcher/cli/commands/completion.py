"""a shell completion script, written from the parser

patcher completion bash > ~/.local/share/bash-completion/completions/patcher
eval "$(patcher completion zsh)"
patcher completion fish > ~/.config/fish/completions/patcher.fish
"""

SHELLS = ("bash", "zsh", "fish")


def arguments(parser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.completion import command_completion

    return command_completion(args)
