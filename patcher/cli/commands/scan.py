"""which architectures of a release have EAGLE-3, or can get it

patcher scan --vllm 0.33.0
patcher scan --vllm 0.33.0 --write-patchset MixtralForCausalLM > mixtral.toml
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from patcher.cli.terminal import Table
    from patcher.scan import Scan
    from patcher.sources.base import Source

FORMATS = ("table", "json", "markdown")


def arguments(parser) -> None:
    from patcher.cli.shared import SINCE, add_release_options
    from patcher.cli.terminal import add_format_option, path_argument

    add_release_options(parser)
    add_format_option(parser, FORMATS, "table (default), json, or the docs page")
    parser.add_argument(
        "--write-patchset",
        metavar="CLASS",
        help="print a patchset TOML for this architecture or class, if the codemod patches it",
    )
    SINCE.add(parser)  # with --write-patchset and --vllm: its [[expect]] measured on them
    parser.add_argument(
        "--page",
        type=path_argument,
        metavar="FILE",
        help="with --format markdown: write the table between the page's markers, signed",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_scan(args)


PAGE_BLOCK = "architectures"
"""The docs page's generated block that ``--page`` writes (see patcher.generated)."""


def read_page(path: Path) -> str:
    """The page ``--page`` writes into: read, and its markers found, before the scan, so a page
    without them costs one line, not a scan."""
    from patcher import generated
    from patcher.errors import PatcherError
    from patcher.files import read_regular
    from patcher.outputs.named import STDOUT

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
    import sys

    from patcher import generated, report
    from patcher.cli.wheels import open_release, say_if_unchecked
    from patcher.errors import PatcherError
    from patcher.outputs.named import write_file
    from patcher.progress import step
    from patcher.scan import markdown, scan, write_patchset

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
    from patcher import report

    data = result.to_json()
    del data["release"], data["version"]  # the row names the release, as every document does
    row = report.release_row(source.distribution, str(source.version))
    return report.document("scan", releases=[row], description=result.release, **data)


def measured_patchset(args: argparse.Namespace, source: Source) -> str:
    """``--write-patchset``'s TOML with its ``[[expect]]`` ranges as the matrix measures the
    written patchset over the releases since ``--since``, of the scanned release's package."""
    from patcher import patchset as patchsets
    from patcher.index import PackageIndex
    from patcher.matrix import build_matrix, select_releases
    from patcher.progress import step
    from patcher.scan import expectations, measured_expectations, patchset_toml, writable

    text = patchset_toml(writable(source, args.write_patchset))
    written = patchsets.parse((text + expectations(str(source.version))).encode(), "written")
    index = PackageIndex(args.index_url, distribution=source.distribution)
    releases = select_releases(index, None, args.since)
    with step(f"running the written patchset over {len(releases)} releases"):
        rows = build_matrix([written], index, releases, args.platform)[written.name]
    return text + measured_expectations([(str(row.version), row.verdict) for row in rows])


def show(result: Scan) -> None:
    """The table on stdout, without markup: vLLM's code in a detail (``[:n_in]``) is text."""
    from patcher.cli.terminal import out

    out.print(scan_table(result), markup=False)


def scan_table(result: Scan) -> Table:
    """A row per architecture; printed without markup, so vLLM's code in a detail is text."""
    from patcher.cli.terminal import new_table

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
