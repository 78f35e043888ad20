"""what a release feeds a drafter, and what costs acceptance

patcher doctor --drafter /models/eagle3 --model /models/kimi-k2.5 --vllm 0.16.0
patcher doctor --drafter eagle3 --model kimi --installed --trained-with sglang --fix fixed
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


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
    return command_doctor(args)


def command_doctor(args: argparse.Namespace) -> int:
    from patcher.cli.doctor import print_diagnosis
    from patcher.cli.terminal import check_outputs, json_document, write_document
    from patcher.cli.wheels import open_release, say_if_unchecked
    from patcher.doctor import diagnose, read_inputs, write_fix
    from patcher.errors import PatcherError
    from patcher.report import document, release_row

    inputs = read_inputs(args.drafter, args.model)
    if args.fix and (args.fix.exists() or args.fix.is_symlink()):
        raise PatcherError(f"{args.fix} exists: --fix writes a new folder")
    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    with open_release(args) as source:
        diagnosis = diagnose(source, inputs, args.trained_with)
    print_diagnosis(diagnosis, say)
    row = release_row(source.distribution, str(source.version))
    data = document("doctor", releases=[row], **diagnosis.to_json())
    write_document(data, args.json, args.format)
    if args.fix:
        for change in write_fix(diagnosis, args.fix):
            say(f"fix: {change}")
    say_if_unchecked(source)
    return 1 if diagnosis.failed else 0


def say(message: str) -> None:
    """One line of the report: a newline from a config is shown escaped, as ``out.print``
    shows any control character."""
    from patcher.cli.terminal import out

    out.print(message, markup=False, soft_wrap=True)
