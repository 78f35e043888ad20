"""patch an installed vLLM, a source tree, or a new git branch

patcher apply --installed
patcher apply --installed --python /opt/venv/bin/python --require-patch
patcher apply --source ~/vllm
patcher apply --git ~/vllm --ref v0.16.0 --branch kimi-eagle3
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from patcher.outputs.base import Output
    from patcher.result import PatchResult
    from patcher.sources.base import Source
    from patcher.sources.installation import Installation


def arguments(parser) -> None:
    from patcher.cli.modes import only_with
    from patcher.cli.shared import add_patchset_option, add_python_option
    from patcher.cli.terminal import path_argument

    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--source", dest="tree", type=path_argument, metavar="DIR", help="patch this tree in place"
    )
    target.add_argument(
        "--git", type=path_argument, metavar="REPO", help="commit onto a new branch"
    )
    target.add_argument(
        "--installed",
        action="store_true",
        help="patch the vLLM installed for --python in place (RECORD kept true; see revert)",
    )
    only_with(
        parser.add_argument("--ref", help="with --git: the tag, branch or commit to patch"), "--git"
    )
    only_with(parser.add_argument("--branch", help="with --git: the new branch to create"), "--git")
    only_with(
        parser.add_argument(
            "--vllm-version", metavar="VERSION", help="override the version the tree declares"
        ),
        "--source",
        "--git",
    )
    only_with(
        parser.add_argument(
            "--force",
            action="store_true",
            help="with --source: patch read-only files, and symlinked ones where they point",
        ),
        "--source",
    )
    add_python_option(parser, modes=("--installed",))
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="write the patch where the release's verdict is not the one the patchset declares",
    )
    only_with(
        parser.add_argument(
            "--require-patch",
            action="store_true",
            help="with --installed: fail where the release needs no patch (for image builds)",
        ),
        "--installed",
    )
    add_patchset_option(parser)
    parser.set_defaults(run=run, vllm=None, wheel=None)


def run(args) -> int:
    return command_apply(args)


def apply_target(args: argparse.Namespace) -> tuple[Source, Output]:
    """The tree ``apply`` reads, and where its patch goes: a new branch of ``--git``'s
    repository, or the ``--source`` tree itself."""
    from patcher.cli.patching import git_source
    from patcher.outputs.git_branch import BranchOutput
    from patcher.outputs.tree import TreeOutput
    from patcher.sources.directory import DirectorySource

    if args.git:
        source = git_source(args)
        return source, BranchOutput(source, args.branch)
    return DirectorySource(args.tree, args.vllm_version), TreeOutput(args.tree, args.force)


def refuse_to_apply(result: PatchResult, allow_drift: bool) -> None:
    """What stops ``apply`` before it writes, for a tree and an installed vLLM alike: a failed
    patch, an unsupported release, drift (unless allowed). The status table goes out first."""
    from patcher.cli.patching import refuse_drift, status_table, why_unchanged
    from patcher.cli.terminal import context
    from patcher.codemods.base import Verdict
    from patcher.errors import PatcherError
    from patcher.official import fail_on_errors

    fail_on_errors(result)
    context(status_table(result))
    if result.verdict is Verdict.UNSUPPORTED:
        raise PatcherError(f"nothing applied: {why_unchanged(result)}")
    refuse_drift(result, allow_drift)


def command_apply(args: argparse.Namespace) -> int:
    from patcher import patchset as patchsets
    from patcher.cli.patching import refuse_harness, say, why_unchanged
    from patcher.cli.terminal import out
    from patcher.engine import run_patchset
    from patcher.errors import PatcherError

    refuse_harness(patchsets.load(args.patchset))  # before the tree or the interpreter is read
    if args.installed:
        return apply_installed(args)
    if args.git and not args.branch:
        raise PatcherError("--git needs --branch: the patch goes onto a new branch")
    patchset = patchsets.load(args.patchset)
    source, output = apply_target(args)
    with output.locked(), source:
        result = run_patchset(patchset, source)
        refuse_to_apply(result, args.allow_drift)
        if not result.changed:
            say(f"nothing to patch: {why_unchanged(result)}")
        else:
            out.print(output.write(result))
    return 0


def apply_installed(args: argparse.Namespace) -> int:
    """Patch the vLLM an interpreter imports, in place: RECORD kept true, originals kept."""
    from patcher.cli.patching import locked_installation

    with locked_installation(args.python) as installation:
        return apply_locked(args, installation)


def apply_locked(args: argparse.Namespace, installation: Installation) -> int:
    from patcher import patchset as patchsets
    from patcher.cli.patching import say, why_unchanged
    from patcher.engine import run_patchset
    from patcher.errors import PatcherError
    from patcher.official import fail_on_errors
    from patcher.outputs import site_packages
    from patcher.outputs.overlay import describe as describe_overlay
    from patcher.outputs.overlay import installed_overlay
    from patcher.progress import step
    from patcher.sources.installation import InstalledSource, UnpatchedSource

    patchset = patchsets.load(args.patchset)
    if (overlay := installed_overlay(installation.root)) is not None:
        raise PatcherError(
            f"an overlay ({describe_overlay(overlay)}) is installed beside "
            f"{installation.description}: the two are not stacked; pip uninstall "
            "vllm-patcher-overlay first, or keep the overlay"
        )
    provenance = installation.provenance()
    if provenance is not None:
        if provenance.patchset != patchset.name:
            raise PatcherError(
                f"{installation.description} is patched with {provenance.patchset}; "
                "run patcher revert --installed first"
            )
        if provenance.in_place and (found := site_packages.problems(installation, provenance)):
            raise PatcherError("; ".join(found))
        before = (
            UnpatchedSource(installation, provenance)
            if provenance.in_place
            else InstalledSource(installation)  # a patched wheel: nothing patched in place
        )
        again = run_patchset(patchset, before)
        fail_on_errors(again)
        if differ := site_packages.differences(installation, provenance, again):
            raise PatcherError(
                f"{installation.description} is patched with {patchset.name} "
                f"({provenance.tool}), but the patchset now writes otherwise: "
                f"{', '.join(differ)} differ; run patcher revert --installed first"
            )
        say(
            f"{installation.description} is already patched with {patchset.name} "
            f"({provenance.tool}); nothing changed"
        )
        return 0
    result = run_patchset(patchset, InstalledSource(installation))
    refuse_to_apply(result, args.allow_drift)
    if result.changed:
        with step(f"patching {installation.description}"):
            provenance = site_packages.apply(installation, result)
        say(
            f"patched {len(provenance.files)} file(s) of {installation.description}; RECORD "
            f"updated, originals and provenance in {installation.root / installation.info}"
        )
        return 0
    message = f"nothing to patch in {installation.description}: {why_unchanged(result)}"
    if args.require_patch:
        raise PatcherError(f"{message} (--require-patch)")
    say(message)
    return 0
