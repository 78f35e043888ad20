"""``patcher revert``: its declaration; what it runs is in ``patcher.cli.patching``."""

from __future__ import annotations

from patcher.cli.command import Command

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser: argparse.ArgumentParser) -> None:
    from patcher.cli.patching import add_python_option, command_revert

    parser.add_argument(
        "--installed", action="store_true", required=True, help="the vLLM installed for --python"
    )
    add_python_option(parser)
    parser.set_defaults(run=command_revert)


COMMAND = Command(
    "revert",
    "restore an installed vLLM patched by apply, byte for byte",
    arguments,
    "patcher revert --installed",
    "patcher revert --installed --python /opt/venv/bin/python",
)
