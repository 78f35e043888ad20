"""patched modules served at import by a small wheel

patcher overlay --vllm 0.16.0
patcher overlay --installed --patchset glm4-moe-eagle3 --dist wheels
"""


def arguments(parser) -> None:
    from patcher.cli.shared import add_source_options
    from patcher.cli.terminal import add_folder_option

    add_source_options(parser, source_dir=False, installed=True)
    add_folder_option(parser, "--dist", "dist", "the folder the overlay wheel goes into")
    parser.add_argument(
        "--local-label",
        metavar="LABEL",
        help="the PEP 440 local version label (default: the patchset's)",
    )
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="write the overlay even where the release's verdict is not the one the patchset "
        "declares for it",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a file at the overlay's name in --dist that holds other bytes",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    """The overlay wheel of the patchset's run over the official files, its path on stdout;
    install it beside that vLLM (``pip install dist/vllm_patcher_overlay-*.whl``)."""
    from patcher import patchset as patchsets
    from patcher.cli.patching import refuse_drift, refuse_harness, status_table
    from patcher.cli.terminal import context, out
    from patcher.cli.wheels import open_named_wheel
    from patcher.codemods.base import Verdict
    from patcher.engine import run_patchset
    from patcher.errors import PatcherError
    from patcher.official import first_run, settled_run
    from patcher.outputs.overlay import OverlayPlan, build_overlay, overlay_plan
    from patcher.outputs.wheel import local_version, writable_folder
    from patcher.result import PatchResult
    from patcher.sources.base import Source
    from patcher.sources.installation import InstalledSource, find_installation

    patchset = refuse_harness(patchsets.load(args.patchset))
    label = args.local_label
    if label is not None:
        local_version("0", label)  # a bad label: refused before anything is read
    writable_folder(args.dist, "--dist")

    def plan_of(result: PatchResult, source: Source) -> OverlayPlan:
        context(status_table(result))
        if result.verdict is not Verdict.NEEDS_PATCH:
            raise PatcherError(
                f"{result.distribution} {result.version} is {result.verdict} for "
                f"{patchset.name}: an overlay holds patched modules, and there are none"
            )
        refuse_drift(result, args.allow_drift)
        return overlay_plan(result, source, label)

    if args.installed:
        installation = find_installation(args.python)
        if (provenance := installation.provenance()) is not None:
            raise PatcherError(
                f"{installation.description} is patched in place with {provenance.patchset}: "
                "an overlay is made from the official files (patcher revert first)"
            )
        with InstalledSource(installation) as source:
            plan = plan_of(run_patchset(patchset, source), source)
    else:
        with open_named_wheel(args) as named:
            first = first_run(named, patchset)
            with settled_run(named, patchset, first) as official:
                plan = plan_of(official.result, official.wheel)
    out.print(str(build_overlay(plan, args.dist, args.force)), markup=False, soft_wrap=True)
    return 0
