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
    import sys

    from patcher.cli.completion import bash, fish, levels, zsh
    from patcher.cli.parser import build_parser

    write = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell]
    sys.stdout.write(write(levels(build_parser())))
    return 0
