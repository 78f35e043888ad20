"""``patcher list``: its declaration; what it runs is in ``patcher.cli.patching``."""

from __future__ import annotations

from patcher.cli.command import Command

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser: argparse.ArgumentParser) -> None:
    from patcher.cli.patching import command_list
    from patcher.cli.terminal import add_format_option

    add_format_option(parser)
    parser.set_defaults(run=command_list)


COMMAND = Command(
    "list",
    "the patchsets and the replica architectures",
    arguments,
    "patcher list",
    "patcher list --format json",
)
