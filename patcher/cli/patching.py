"""What the commands that patch share (diff, apply, revert, build-wheel, overlay, bundle, matrix):
the status table and its styles, the drift refusal, the harness refusal, the locked
installation. Each command's handler is in its module of ``patcher.cli.commands``, which imports
this module only when it runs, so no ``--help`` pays for libcst or git."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from patcher.cli.terminal import Table, err, new_table, out
from patcher.codemods.base import FAILING, Status, Verdict
from patcher.errors import DriftError, PatcherError
from patcher.outputs import site_packages
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.sources.git import GitSource
from patcher.sources.installation import Installation, find_installation

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


def git_source(args: argparse.Namespace) -> GitSource:
    if not args.ref:
        raise PatcherError("--git needs --ref")
    return GitSource(args.git, args.ref, args.vllm_version)


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


def refuse_harness(patchset: Patchset) -> Patchset:
    """A harness is a stand-in for what a GPU has, for serving proofs; never a user's patch."""
    if patchset.harness:
        raise PatcherError(
            f"{patchset.name} is patcher's CPU serving harness (a stand-in for the GPU runner), "
            "not a patch for users; serving proofs apply it themselves"
        )
    return patchset


@contextmanager
def locked_installation(python: str | None) -> Iterator[Installation]:
    """The vLLM ``python`` imports, held for one apply or revert at a time."""
    installation = find_installation(python)
    with site_packages.locked(installation):
        if note := site_packages.recover(installation):  # an apply or revert killed half way
            say(note)
        yield installation


def say(message: str) -> None:
    out.print(message, markup=False, soft_wrap=True)
