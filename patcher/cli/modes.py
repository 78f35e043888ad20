"""Modes: an option that does something in some of a command's modes only says so where it is
added (``only_with``), and any other mode refuses it, so a flag is never silently ignored.

A command's mode is the option of its required mutually exclusive group that was given
(``--git``, ``--installed``), or the value of an option declared as choosing it
(``chooses_mode``: ``--device cpu``).
"""

from __future__ import annotations

import argparse

from patcher.errors import PatcherError


def only_with(action: argparse.Action, *modes: str) -> argparse.Action:
    """Declare that the option ``action`` does something in ``modes`` only."""
    action.modes = modes  # type: ignore[attr-defined]
    return action


def names(action: argparse.Action, *, several: bool) -> argparse.Action:
    """Declare that ``action`` takes names (``several``: a comma list): an empty one is refused
    before any work (``refuse_empty_names``)."""
    action.names = "several" if several else "one"  # type: ignore[attr-defined]
    return action


def refuse_empty_names(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Before any work: an empty name, alone or in a comma list (``--patchset a,,``)."""
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if getattr(action, "names", None) is None or not isinstance(value, str):
            continue
        if "" in (v.strip() for v in value.split(",")):
            what = "an empty name" if "," in value else "no name"
            raise PatcherError(f"{action.option_strings[0]} {value!r} has {what}")


def chooses_mode(action: argparse.Action) -> argparse.Action:
    """Declare that the option ``action``, with its value, is the command's mode."""
    action.chooses_mode = True  # type: ignore[attr-defined]
    return action


def mode_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options whose presence (or value) is the command's mode."""
    chosen = [a for a in parser._actions if getattr(a, "chooses_mode", False)]
    for group in parser._mutually_exclusive_groups:
        if group.required:
            chosen += group._group_actions
    return chosen


def mode_names(parser: argparse.ArgumentParser) -> set[str]:
    """Every mode the command has, spelled as a user gives it."""
    names = set()
    for action in mode_options(parser):
        flag = action.option_strings[0]
        names |= {f"{flag} {c}" for c in action.choices} if action.choices else {flag}
    return names


def mode_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """The mode a command line chose, spelled as its flag: ``--git``, ``--device cpu``."""
    for action in mode_options(parser):
        value = getattr(args, action.dest, None)
        if action.choices is not None:
            return f"{action.option_strings[0]} {value}"
        if value not in (None, False):
            return action.option_strings[0]
    return None


def refuse_misplaced(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Before any work: an option given in a mode it does nothing in."""
    mode = mode_of(args, parser)
    for action in parser._actions:
        modes: tuple[str, ...] | None = getattr(action, "modes", None)
        given = getattr(args, action.dest, None) != parser.get_default(action.dest)
        if modes and given and mode not in modes:
            raise PatcherError(
                f"{action.option_strings[0]} goes with {' or '.join(modes)} only, not with {mode}"
            )
