"""``patcher scan``'s command line: the table, JSON and Markdown of a release's architectures,
and ``--write-patchset``; only ``patcher.cli`` imports this."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from patcher import generated, report
from patcher import patchset as patchsets
from patcher.cli.terminal import Table, new_table, out
from patcher.cli.wheels import open_release, say_if_unchecked
from patcher.errors import PatcherError
from patcher.files import read_regular
from patcher.index import PackageIndex
from patcher.matrix import build_matrix, select_releases
from patcher.outputs.named import STDOUT, write_file
from patcher.progress import step
from patcher.scan import (
    Scan,
    expectations,
    markdown,
    measured_expectations,
    patchset_toml,
    scan,
    writable,
    write_patchset,
)
from patcher.sources.base import Source

PAGE_BLOCK = "architectures"
"""The docs page's generated block that ``--page`` writes (see patcher.generated)."""


def read_page(path: Path) -> str:
    """The page ``--page`` writes into: read, and its markers found, before the scan, so a page
    without them costs one line, not a scan."""
    if path == STDOUT:
        raise PatcherError("--page cannot be -: the table is written into the file's text")
    data = read_regular(path, "--page")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PatcherError(f"{path}: not UTF-8 text (byte {error.start}) (--page)") from error
    generated.splice(text, PAGE_BLOCK, "check", "")  # the markers are there, or one line
    return text


def command_scan(args: argparse.Namespace) -> int:
    if args.write_patchset is not None and args.format != "table":
        raise PatcherError("--write-patchset prints TOML; --format goes with the scan only")
    if args.since is not None and (args.write_patchset is None or not args.vllm):
        raise PatcherError("--since goes with --write-patchset and --vllm only")
    if args.page is not None and args.format != "markdown":
        raise PatcherError("--page goes with --format markdown")
    page = read_page(args.page) if args.page is not None else None
    with open_release(args) as source:
        if args.write_patchset is not None:
            if args.since is None:
                sys.stdout.write(write_patchset(source, args.write_patchset))
            else:
                sys.stdout.write(measured_patchset(args, source))
            say_if_unchecked(source)
            return 0
        with step(f"scanning the model registry of {source.description}"):
            result = scan(source)
    if args.format == "json":
        sys.stdout.write(report.text(scan_document(result, source)))
    elif args.format == "markdown" and page is not None:
        writer = f"patcher scan --vllm {args.vllm} --format markdown --page {args.page}"
        text = generated.splice(page, PAGE_BLOCK, writer, markdown([result]))
        write_file(args.page, text.encode(), "--page")
    elif args.format == "markdown":
        sys.stdout.write(markdown([result]))
    else:
        show(result)
    say_if_unchecked(source)
    return 0


def scan_document(result: Scan, source: Source) -> dict[str, object]:
    """``scan --format json`` (``patcher.report``): the release read as a row, then the totals
    and each architecture's finding, as the scan's own data (``Scan.to_json``, kept as the
    results cache stores it) says them."""
    data = result.to_json()
    del data["release"], data["version"]  # the row names the release, as every document does
    row = report.release_row(source.distribution, str(source.version))
    return report.document("scan", releases=[row], description=result.release, **data)


def measured_patchset(args: argparse.Namespace, source: Source) -> str:
    """``--write-patchset``'s TOML with its ``[[expect]]`` ranges as the matrix measures the
    written patchset over the releases since ``--since``, of the scanned release's package."""
    text = patchset_toml(writable(source, args.write_patchset))
    written = patchsets.parse((text + expectations(str(source.version))).encode(), "written")
    index = PackageIndex(args.index_url, distribution=source.distribution)
    releases = select_releases(index, None, args.since)
    with step(f"running the written patchset over {len(releases)} releases"):
        rows = build_matrix([written], index, releases, args.platform)[written.name]
    return text + measured_expectations([(str(row.version), row.verdict) for row in rows])


def show(result: Scan) -> None:
    """The table on stdout, without markup: vLLM's code in a detail (``[:n_in]``) is text."""
    out.print(scan_table(result), markup=False)


def scan_table(result: Scan) -> Table:
    """A row per architecture; printed without markup, so vLLM's code in a detail is text."""
    table = new_table(f"EAGLE-3 across the model registry of {result.release}")
    for column in ("architecture", "section", "fit", "image token", "detail"):
        table.add_column(column, overflow="fold")
    for finding in result.findings:
        table.add_row(
            finding.entry.architecture,
            finding.entry.section,
            str(finding.fit),
            (finding.image_token or "") if finding.multimodal else "",
            finding.detail,
        )
    table.caption = ", ".join(f"{n} {fit}" for fit, n in result.totals().items() if n)
    return table
