"""``patcher completion bash|zsh|fish``: a completion script written from the parser itself, so
it names every command, option and choice there is (no third-party completion package)."""

from __future__ import annotations

import argparse
import sys

from patcher.cli.overview import COMMANDS

SHELLS = ("bash", "zsh", "fish")


def command_completion(args: argparse.Namespace) -> int:
    from patcher.cli.parser import build_parser, subcommand

    parser = build_parser()
    commands = {name: subcommand(parser, name) for name in COMMANDS}
    write = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell]
    sys.stdout.write(write(parser, commands))
    return 0


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a user types, without the hidden ones."""
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def flags(parser: argparse.ArgumentParser) -> str:
    return " ".join(flag for action in options(parser) for flag in action.option_strings)


def bash(parser: argparse.ArgumentParser, commands: dict[str, argparse.ArgumentParser]) -> str:
    cases = [f'        "") options="{flags(parser)}"; words="{" ".join(commands)}" ;;']
    values = []
    for name, command in commands.items():
        words = " ".join(
            str(choice)
            for action in command._actions
            if not action.option_strings and action.choices
            for choice in action.choices
        )
        cases.append(f'        {name}) options="{flags(command)}"; words="{words}" ;;')
        for action in options(command):
            if action.choices and action.nargs != 0:
                choices = " ".join(str(c) for c in action.choices)
                for flag in action.option_strings:
                    values.append(f'        "{name} {flag}") words="{choices}"; options="" ;;')
    return f"""\
# patcher's completion for bash, written from its parser: source it, or save it as
# ~/.local/share/bash-completion/completions/patcher
_patcher() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local command="" word options="" words=""
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$word" in -*) ;; *) command="$word"; break ;; esac
    done
    case "$command" in
{chr(10).join(cases)}
    esac
    case "$command $prev" in
{chr(10).join(values)}
    esac
    if [[ "$cur" == -* || -z "$words" ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}}
complete -o default -F _patcher patcher
"""


def zsh(parser: argparse.ArgumentParser, commands: dict[str, argparse.ArgumentParser]) -> str:
    return (
        "# patcher's completion for zsh, through its bash completion: eval it in ~/.zshrc\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser, commands)
    )


def quoted(text: str) -> str:
    """``text`` in fish's single quotes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def described(action: argparse.Action) -> str:
    first = (action.help or "").split(";")[0].split(" (")[0]
    return quoted(first.replace("%(default)s", str(action.default)))


def fish_options(condition: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in options(parser):
        names = [
            f"-s {flag[1:]}" if len(flag) == 2 else f"-l {flag[2:]}"
            for flag in action.option_strings
        ]
        value = ""
        if action.nargs != 0:
            value = " -r"
            if action.choices:
                value = f" -x -a {quoted(' '.join(str(c) for c in action.choices))}"
        lines.append(
            f"complete -c patcher -n {condition} {' '.join(names)}{value} -d {described(action)}"
        )
    return lines


def fish(parser: argparse.ArgumentParser, commands: dict[str, argparse.ArgumentParser]) -> str:
    lines = [
        "# patcher's completion for fish, written from its parser: save it as",
        "# ~/.config/fish/completions/patcher.fish",
        *fish_options("__fish_use_subcommand", parser),
    ]
    for name, command in commands.items():
        summary = quoted(COMMANDS[name].summary)
        lines.append(f"complete -c patcher -n __fish_use_subcommand -f -a {name} -d {summary}")
        condition = quoted(f"__fish_seen_subcommand_from {name}")
        lines += fish_options(condition, command)
        for action in command._actions:
            if not action.option_strings and action.choices:
                words = quoted(" ".join(str(c) for c in action.choices))
                lines.append(f"complete -c patcher -n {condition} -a {words}")
    return "\n".join(lines) + "\n"
