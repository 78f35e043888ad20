"""patch an installed vLLM, a source tree, or a new git branch

patcher apply --installed
patcher apply --installed --python /opt/venv/bin/python --require-patch
patcher apply --source ~/vllm
patcher apply --git ~/vllm --ref v0.16.0 --branch kimi-eagle3
"""


def arguments(parser) -> None:
    from patcher.cli.modes import only_with
    from patcher.cli.shared import add_patchset_option, add_python_option
    from patcher.cli.terminal import path_argument

    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--source", dest="tree", type=path_argument, metavar="DIR", help="patch this tree in place"
    )
    target.add_argument(
        "--git", type=path_argument, metavar="REPO", help="commit onto a new branch"
    )
    target.add_argument(
        "--installed",
        action="store_true",
        help="patch the vLLM installed for --python in place (RECORD kept true; see revert)",
    )
    only_with(
        parser.add_argument("--ref", help="with --git: the tag, branch or commit to patch"), "--git"
    )
    only_with(parser.add_argument("--branch", help="with --git: the new branch to create"), "--git")
    only_with(
        parser.add_argument(
            "--vllm-version", metavar="VERSION", help="override the version the tree declares"
        ),
        "--source",
        "--git",
    )
    only_with(
        parser.add_argument(
            "--force",
            action="store_true",
            help="with --source: patch read-only files, and symlinked ones where they point",
        ),
        "--source",
    )
    add_python_option(parser, modes=("--installed",))
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="write the patch where the release's verdict is not the one the patchset declares",
    )
    only_with(
        parser.add_argument(
            "--require-patch",
            action="store_true",
            help="with --installed: fail where the release needs no patch (for image builds)",
        ),
        "--installed",
    )
    add_patchset_option(parser)
    parser.set_defaults(run=run, vllm=None, wheel=None)


def run(args) -> int:
    from patcher.cli.patching import command_apply

    return command_apply(args)
