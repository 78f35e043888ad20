"""The outcome of a verify run, as data: the CLI renders it, the matrix report reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from patcher.codemods.base import Verdict
    from patcher.patchset import Patchset

CheckStatus = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class CheckOutcome:
    """One check on one wheel, as the probe reported it."""

    status: CheckStatus
    detail: str
    seconds: float


@dataclass(frozen=True)
class CheckResult:
    """One check, before (official wheel) and after (patched wheel, if any)."""

    name: str
    before: CheckOutcome
    after: CheckOutcome | None

    @property
    def detail(self) -> str:
        """Both sides' text; one side when they agree or only 'before' ran."""
        if self.after is None or self.after.detail == self.before.detail:
            return self.before.detail
        return f"before: {self.before.detail} | after: {self.after.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "before": self.before.status,
            "after": None if self.after is None else self.after.status,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class VerifyReport:
    """Every requested check for one vLLM release."""

    vllm: str
    wheel: str
    """File name of the wheel under test: the patched one, else the official one."""
    checks: tuple[CheckResult, ...]
    setup_seconds: float
    """Wall time to get the venvs ready: hashing and scanning the wheels, building any missing."""

    @property
    def ok(self) -> bool:
        """No check fails on the wheel under test (after patching, or before if unpatched)."""
        return all(
            (c.after if c.after is not None else c.before).status != "fail" for c in self.checks
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "vllm": self.vllm,
            "wheel": self.wheel,
            "checks": [c.to_json() for c in self.checks],
        }


def verify_document(
    report: VerifyReport,
    patchset: Patchset,
    package: str,
    verdict: Verdict | None = None,
    ok: bool | None = None,
) -> dict[str, Any]:
    """``verify``'s document (``patcher.report``): the release verified, with this machine's
    proofs (this run's ``verified`` among them, where it ran on wheels), whether it passed
    (``ok``: the report's, unless the mode judges otherwise) and each check."""
    from patcher import proofs  # the cache: only where a document is written
    from patcher.report import document, release_row

    found = proofs.found(patchset, report.vllm, package)
    row = release_row(package, report.vllm, patchset.name, verdict, found)
    checks = [c.to_json() for c in report.checks]
    passed = report.ok if ok is None else ok
    return document("verify", releases=[row], wheel=report.wheel, ok=passed, checks=checks)
