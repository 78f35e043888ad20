"""restore an installed vLLM patched by apply, byte for byte

patcher revert
patcher revert --python /opt/venv/bin/python
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser) -> None:
    from patcher.cli.shared import add_python_option

    parser.add_argument(
        "--installed",
        action="store_true",
        default=True,
        help="the vLLM installed for --python: the only mode, so the default (kept for scripts)",
    )
    add_python_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_revert(args)


def command_revert(args: argparse.Namespace) -> int:
    from patcher.cli.patching import locked_installation, say
    from patcher.outputs import site_packages
    from patcher.sources.installation import ORIGINALS, ProvenanceMissing

    with locked_installation(args.python) as installation:
        try:
            provenance = installation.provenance()
            how = ""
        except ProvenanceMissing:
            provenance = site_packages.recovered(installation)
            how = f" (its provenance was deleted: rebuilt from {ORIGINALS}/ and RECORD)"
        if provenance is None:
            say(f"{installation.description} is not patched; nothing to revert")
            return 0
        restored = site_packages.revert(installation, provenance)
    say(
        f"restored {len(restored)} file(s) of {installation.description} and its RECORD "
        f"to the bytes from before {provenance.patchset}{how}"
    )
    return 0
