"""``patcher doctor``'s command line and its printed report; ``patcher.cli`` imports this only to
run doctor or show its help."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from patcher.cli.terminal import check_outputs, json_document, out, write_document
from patcher.cli.wheels import open_release, say_if_unchecked
from patcher.doctor import Diagnosis, Feed, diagnose, physical, read_inputs, write_fix
from patcher.errors import PatcherError
from patcher.report import document, release_row


def command_doctor(args: argparse.Namespace) -> int:
    inputs = read_inputs(args.drafter, args.model)
    if args.fix and (args.fix.exists() or args.fix.is_symlink()):
        raise PatcherError(f"{args.fix} exists: --fix writes a new folder")
    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    with open_release(args) as source:
        diagnosis = diagnose(source, inputs, args.trained_with)
    print_diagnosis(diagnosis, say)
    row = release_row(source.distribution, str(source.version))
    data = document("doctor", releases=[row], **diagnosis.to_json())
    write_document(data, args.json, args.format)
    if args.fix:
        for change in write_fix(diagnosis, args.fix):
            say(f"fix: {change}")
    say_if_unchecked(source)
    return 1 if diagnosis.failed else 0


def say(message: str) -> None:
    """One line of the report: a newline from a config is shown escaped, as ``out.print``
    shows any control character."""
    out.print(message, markup=False, soft_wrap=True)


def feeding(feed: Feed, layers: int | None) -> str:
    if feed.ids:
        return f"feeds {physical(feed.ids, layers)}, from {feed.found_in}"
    if feed.default and feed.found_in.startswith("default") and layers is None:
        return f"feeds the target's {feed.found_in} (--model gives the numbers)"
    return f"feeds nothing: {feed.found_in}"


def print_diagnosis(diagnosis: Diagnosis, print_line: Callable[[str], None]) -> None:
    """The diagnosis as plain lines: the runners, then each finding with evidence and fix."""
    layers = diagnosis.target.layers if diagnosis.target else None
    form = (
        " (speculators format, read through the release's updater)" if diagnosis.speculators else ""
    )
    print_line(f"doctor: {diagnosis.drafter} on {diagnosis.release}{form}")
    for feed in diagnosis.feeds:
        where = feed.where.rpartition("/")[2]
        fields = ", ".join(feed.fields) or "nothing"
        print_line(f"  {feed.runner} runner ({where}) reads {fields}: {feeding(feed, layers)}")
    print_line(f"  on GPU by default: {diagnosis.gpu_choice}")
    if diagnosis.gpu_rules:
        print_line(f"    use_v2_model_runner: {'; '.join(diagnosis.gpu_rules)}")
    if not diagnosis.findings:
        print_line("  no findings")
    for finding in diagnosis.findings:
        print_line(f"  {finding.severity} [{finding.kind}]: {finding.message}")
        print_line(f"    evidence: {finding.evidence}")
        print_line(f"    fix: {finding.fix}")
