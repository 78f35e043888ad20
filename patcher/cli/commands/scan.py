"""which architectures of a release have EAGLE-3, or can get it

patcher scan --vllm 0.33.0
patcher scan --vllm 0.33.0 --write-patchset MixtralForCausalLM > mixtral.toml
"""

FORMATS = ("table", "json", "markdown")


def arguments(parser) -> None:
    from patcher.cli.shared import SINCE, add_release_options
    from patcher.cli.terminal import add_format_option, path_argument

    add_release_options(parser)
    add_format_option(parser, FORMATS, "table (default), json, or the docs page")
    parser.add_argument(
        "--write-patchset",
        metavar="CLASS",
        help="print a patchset TOML for this architecture or class, if the codemod patches it",
    )
    SINCE.add(parser)  # with --write-patchset and --vllm: its [[expect]] measured on them
    parser.add_argument(
        "--page",
        type=path_argument,
        metavar="FILE",
        help="with --format markdown: write the table between the page's markers, signed",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.scan import command_scan

    return command_scan(args)
