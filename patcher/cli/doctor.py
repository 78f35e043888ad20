"""What ``patcher doctor`` and the serving commands (preflight, serve-bench) print of a
diagnosis; doctor's handler is in ``patcher.cli.commands.doctor``."""

from __future__ import annotations

from collections.abc import Callable

from patcher.doctor import Diagnosis, Feed, physical


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
