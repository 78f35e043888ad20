"""restore an installed vLLM patched by apply, byte for byte

patcher revert
patcher revert --python /opt/venv/bin/python
"""


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
    from patcher.cli.patching import command_revert

    return command_revert(args)
