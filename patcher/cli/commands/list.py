"""the patchsets and the replica architectures

patcher list
patcher list --format json
"""


def arguments(parser) -> None:
    from patcher.cli.terminal import add_format_option

    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_list

    return command_list(args)
