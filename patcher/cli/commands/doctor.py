"""what a release feeds a drafter, and what costs acceptance

patcher doctor --drafter /models/eagle3 --model /models/kimi-k2.5 --vllm 0.16.0
patcher doctor --drafter eagle3 --model kimi --installed --trained-with sglang --fix fixed
"""


def arguments(parser) -> None:
    from patcher.cli.shared import DRAFTER, JSON, add_release_options
    from patcher.cli.terminal import add_format_option, path_argument
    from patcher.defaults import CONVENTIONS

    DRAFTER.add(parser, type=path_argument, required=True)
    parser.add_argument(
        "--model", type=path_argument, metavar="DIR", help="the target's config.json"
    )
    add_release_options(parser)
    parser.add_argument(
        "--trained-with", choices=CONVENTIONS, help="the trainer's layer numbering, for --fix"
    )
    parser.add_argument(
        "--fix", type=path_argument, metavar="OUT", help="write a corrected drafter folder"
    )
    JSON.add(parser, type=path_argument)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.doctor import command_doctor

    return command_doctor(args)
