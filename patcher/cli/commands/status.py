"""the installed vLLM: its distribution, patch and verdict

patcher status
patcher status --python /opt/venv/bin/python --format json
"""


def arguments(parser) -> None:
    from patcher.cli.shared import add_index_options, add_python_option
    from patcher.cli.terminal import add_format_option

    parser.add_argument(
        "--installed",
        action="store_true",
        default=True,
        help="the vLLM installed for --python: the only mode, so the default (kept for scripts)",
    )
    add_python_option(parser)
    add_index_options(parser)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_status

    return command_status(args)
