"""The outcome of a verify run, as data: the CLI renders it, the matrix report reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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
