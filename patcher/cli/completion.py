"""``patcher completion bash|zsh|fish``: a completion script written from the parser itself, so
it names every command, subcommand, option and choice there is (no third-party completion
package). Values are completed too: an option's choices, the patchset names ``patcher list``
gives (read when the script is written), the distributions for ``--package``, files after an
option that takes a file, folders after one that takes a folder, and nothing (never the options)
after one that takes free text.

bash and zsh share the script's tables, plain shell functions (``_patcher_flags``,
``_patcher_sub``, ``_patcher_takes``, ``_patcher_value``, ``_patcher_words``) that each shell's
own driver reads; fish gets its ``complete`` lines.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from patcher.cli.overview import COMMANDS

FILE_METAVARS = {"FILE", "PATH"}
DIR_METAVARS = {"DIR", "MODEL_DIR", "OUT", "REPO"}


@dataclass
class Level:
    """One parser: the top, a command, or a subcommand (``cache clean``)."""

    path: str
    """The words that reach it: "" for the top, "diff", "cache clean"."""
    parser: argparse.ArgumentParser
    summary: str = ""
    flags: list[str] = field(default_factory=list)
    values: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """Each option that takes a value: its kind (words, file, dir, text) and its words."""
    subs: dict[str, str] = field(default_factory=dict)
    """Its subcommands, with their summaries."""
    words: tuple[str, ...] = ()
    """What its positional argument takes, where it has one with choices."""


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a user types, without the hidden ones."""
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def value(action: argparse.Action) -> tuple[str, tuple[str, ...]]:
    """What an option's value is completed with."""
    from patcher import distributions
    from patcher import patchset as patchsets

    if action.choices:
        return "words", tuple(str(c) for c in action.choices)
    if completes := getattr(action, "completes", None):  # the words of a comma list
        return "words", tuple(completes)
    if action.dest == "patchset":
        names = tuple(patchsets.available())
        if "all" in str(action.metavar):
            return "words", (*names, "all")
        return "patchset", names  # a name, or a patchset file
    if action.dest == "package":
        return "words", distributions.DISTRIBUTIONS
    metavar = str(action.metavar or "")
    if metavar in FILE_METAVARS:
        return "file", ()
    if metavar in DIR_METAVARS:
        return "dir", ()
    return "text", ()


def levels(parser: argparse.ArgumentParser) -> list[Level]:
    """Every parser under ``parser``, the top first, each with what completes it."""
    found: list[Level] = []

    def visit(path: str, parser: argparse.ArgumentParser, summary: str) -> None:
        level = Level(path, parser, summary)
        found.append(level)
        for action in options(parser):
            level.flags += action.option_strings
            if action.nargs != 0:
                for flag in action.option_strings:
                    level.values[flag] = value(action)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    if path == "" and name in COMMANDS:
                        helps[name] = COMMANDS[name].summary
                    level.subs[name] = helps.get(name, "")
                    visit(f"{path} {name}".strip(), sub, helps.get(name, ""))
            elif not action.option_strings and action.choices:
                level.words = tuple(str(c) for c in action.choices)

    visit("", parser, "")
    return found


def case_line(path: str, body: str) -> str:
    return f'        "{path}") {body} ;;'


def tables(found: list[Level]) -> str:
    """The shell functions bash and zsh both read: plain POSIX-like ``case`` tables."""
    flags = [case_line(lv.path, f'echo "{" ".join(lv.flags)}"') for lv in found]
    subs = [
        case_line(lv.path, f'case " {" ".join(lv.subs)} " in *" $2 "*) return 0 ;; esac')
        for lv in found
        if lv.subs
    ]
    takes = [
        case_line(lv.path, f'case " {" ".join(lv.values)} " in *" $2 "*) return 0 ;; esac')
        for lv in found
        if lv.values
    ]
    values = []
    for lv in found:
        for flag, (kind, choices) in lv.values.items():
            values.append(
                case_line(f"{lv.path} {flag}".strip(), f'echo "{kind} {" ".join(choices)}"')
            )
    words = [
        case_line(lv.path, f'echo "{" ".join([*lv.subs, *lv.words])}"')
        for lv in found
        if lv.subs or lv.words
    ]
    nl = "\n"
    return f"""\
_patcher_flags() {{  # the options of a command path
    case "$1" in
{nl.join(flags)}
    esac
}}
_patcher_sub() {{  # whether $2 is a subcommand of the command path $1
    case "$1" in
{nl.join(subs)}
    esac
    return 1
}}
_patcher_takes() {{  # whether the option $2 of the command path $1 takes a value
    case "$1" in
{nl.join(takes)}
    esac
    return 1
}}
_patcher_value() {{  # what completes the value of the option $2: its kind, then its words
    case "$1 $2" in
{nl.join(values)}
        *) echo "text" ;;
    esac
}}
_patcher_words() {{  # what a positional word of the command path $1 can be
    case "$1" in
{nl.join(words)}
    esac
}}
_patcher_walk() {{  # the command path of the words given, and whether the last takes a value
    _patcher_path="" _patcher_pending=""
    local word
    for word in "$@"; do
        if [ -n "$_patcher_pending" ]; then
            _patcher_pending=""
            continue
        fi
        case "$word" in
            --*=*) ;;
            -*) _patcher_takes "$_patcher_path" "$word" && _patcher_pending="$word" ;;
            *) _patcher_sub "$_patcher_path" "$word" \\
                   && _patcher_path="${{_patcher_path:+$_patcher_path }}$word" ;;
        esac
    done
}}
"""


def bash(found: list[Level]) -> str:
    return f"""\
# patcher's completion for bash, written from its parser: source it, or save it as
# ~/.local/share/bash-completion/completions/patcher
{tables(found)}
_patcher() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" option="" spec kind
    _patcher_walk "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"
    option="$_patcher_pending"
    if [[ "$cur" == --*=* ]]; then  # --patchset=NAME, where = is no word break
        option="${{cur%%=*}}"
        cur="${{cur#*=}}"
        _patcher_takes "$_patcher_path" "$option" || option=""
    fi
    COMPREPLY=()
    if [[ -n "$option" ]]; then
        spec="$(_patcher_value "$_patcher_path" "$option")"
        kind="${{spec%% *}}"
        case "$kind" in
            words) COMPREPLY=($(compgen -W "${{spec#* }}" -- "$cur")) ;;
            patchset)
                COMPREPLY=($(compgen -W "${{spec#* }}" -- "$cur") $(compgen -f -- "$cur"))
                compopt -o filenames 2>/dev/null ;;
            file) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null ;;
            dir) COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null ;;
        esac
        return 0
    fi
    local words="$(_patcher_words "$_patcher_path")"
    if [[ "$cur" == -* || -z "$words" ]]; then
        COMPREPLY=($(compgen -W "$(_patcher_flags "$_patcher_path")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}}
complete -F _patcher patcher
"""


def zsh(found: list[Level]) -> str:
    return f"""\
# patcher's completion for zsh, written from its parser: after compinit, in ~/.zshrc,
#   eval "$(patcher completion zsh)"
{tables(found)}
_patcher() {{
    local cur="${{words[CURRENT]}}" option spec kind
    _patcher_walk "${{(@)words[2,CURRENT-1]}}"
    option="$_patcher_pending"
    if [[ "$cur" == --*=* ]]; then
        option="${{cur%%=*}}"
        compset -P '*='
        _patcher_takes "$_patcher_path" "$option" || option=""
    fi
    if [[ -n "$option" ]]; then
        spec="$(_patcher_value "$_patcher_path" "$option")"
        kind="${{spec%% *}}"
        case "$kind" in
            words) compadd -- ${{=spec#* }} ;;
            patchset) compadd -- ${{=spec#* }}; _files ;;
            file) _files ;;
            dir) _files -/ ;;
        esac
        return 0
    fi
    local choices="$(_patcher_words "$_patcher_path")"
    if [[ "$cur" == -* || -z "$choices" ]]; then
        compadd -- ${{=$(_patcher_flags "$_patcher_path")}}
    else
        compadd -- ${{=choices}}
    fi
}}
if (( $+functions[compdef] )); then
    compdef _patcher patcher
else
    print -u2 "patcher: zsh completion needs compinit first: autoload -U compinit && compinit"
fi
"""


def quoted(text: str) -> str:
    """``text`` in fish's single quotes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def described(action: argparse.Action) -> str:
    first = (action.help or "").split(";")[0].split(" (")[0]
    return quoted(first.replace("%(default)s", str(action.default)))


def fish_options(condition: str, level: Level) -> list[str]:
    lines = []
    for action in options(level.parser):
        names = [
            f"-s {flag[1:]}" if len(flag) == 2 else f"-l {flag[2:]}"
            for flag in action.option_strings
        ]
        completes = ""
        if action.nargs != 0:
            kind, words = level.values[action.option_strings[0]]
            completes = {
                "words": f" -x -a {quoted(' '.join(words))}",
                "patchset": f" -r -F -a {quoted(' '.join(words))}",
                "file": " -r -F",
                "dir": " -x -a '(__fish_complete_directories)'",
                "text": " -x",
            }[kind]
        lines.append(
            f"complete -c patcher -n {condition} {' '.join(names)}{completes}"
            f" -d {described(action)}"
        )
    return lines


def fish_condition(path: str, subs: dict[str, str]) -> str:
    """True where the words typed reach ``path`` and no subcommand of it yet."""
    tests = ["__fish_use_subcommand"] if not path else [
        f"__fish_seen_subcommand_from {word}" for word in path.split()
    ]  # fmt: skip
    if path and subs:
        tests.append(f"not __fish_seen_subcommand_from {' '.join(subs)}")
    return quoted("; and ".join(tests))


def fish(found: list[Level]) -> str:
    lines = [
        "# patcher's completion for fish, written from its parser: save it as",
        "# ~/.config/fish/completions/patcher.fish",
        "complete -c patcher -f",  # no files unless an option takes one
    ]
    for level in found:
        condition = fish_condition(level.path, level.subs)
        lines += fish_options(condition, level)
        for name, summary in level.subs.items():
            lines.append(f"complete -c patcher -n {condition} -f -a {name} -d {quoted(summary)}")
        if level.words:
            lines.append(
                f"complete -c patcher -n {condition} -f -a {quoted(' '.join(level.words))}"
            )
    return "\n".join(lines) + "\n"
