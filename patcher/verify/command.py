"""``patcher verify``: build the patched wheel if the release needs one, then prove it on CPU.

The report is kept in the cache by patchset and release, so ``patcher matrix`` can show a
``verified`` column for every release verified on this machine.
"""

from __future__ import annotations

from pathlib import Path

from patcher import proofs
from patcher.codemods.base import Verdict
from patcher.errors import PatcherError
from patcher.official import patched_wheel
from patcher.outputs.overlay import cached_overlay, overlay_plan
from patcher.outputs.wheel import PROVENANCE, WheelPlan
from patcher.patchset import Patchset
from patcher.proofs import ProofKind
from patcher.result import PatchResult
from patcher.sources.wheel import WheelSource
from patcher.verify.report import VerifyReport
from patcher.verify.runner import verify_wheels


def check_verifiable(patchset: Patchset, result: PatchResult) -> None:
    """Refuse what verify cannot prove; the CLI asks before it downloads the wheel."""
    if not patchset.verify:
        raise PatcherError(f"patchset {patchset.name} declares no verify checks")
    if result.verdict is Verdict.UNSUPPORTED:
        raise PatcherError(
            f"{result.distribution} {result.version} is unsupported for {patchset.name}"
        )


def verify_release(
    patchset: Patchset, official: Path, sha256: str, result: PatchResult, overlay: bool = False
) -> VerifyReport:
    """Verify the official wheel against the patched one (with ``overlay``, against the official
    wheel with the overlay installed beside it), or alone where upstream has the fix."""
    check_verifiable(patchset, result)
    with WheelSource(official) as wheel:
        patched_already = any(n.endswith(f".dist-info/{PROVENANCE}") for n in wheel.names())
    if patched_already:
        raise PatcherError(f"{official.name} is a patched wheel; verify takes the official one")
    patched = None
    if result.verdict is Verdict.NEEDS_PATCH and overlay:
        patched = overlay_wheel(official, sha256, result)
    elif result.verdict is Verdict.NEEDS_PATCH:
        patched = patched_wheel(WheelPlan.labelled(official, sha256, result, patchset.local_label))
    report = verify_wheels(
        official, patched, result.version, patchset.verify, probe_model(patchset)
    )
    proofs.keep(
        ProofKind.VERIFY,
        patchset,
        str(result.version),
        result.distribution,
        report.ok,
        report.to_json(),
    )
    return report


def probe_model(patchset: Patchset) -> str | None:
    """``MODULE:CAUSAL_LM:BACKBONE:ATTR`` of the patchset's ``eagle3-backbone`` patch, with
    ``:WRAPPER_MODULE:WRAPPER_CLASS`` where it names a multimodal wrapper, for the probe's model
    checks."""
    for patch in patchset.patches:
        if patch.codemod == "eagle3-backbone":
            options = patch.options
            module = options.module.removesuffix(".py").replace("/", ".")
            spec = f"{module}:{options.causal_lm}:{options.backbone}:{options.attribute}"
            if options.wrapper_module is not None:
                wrapper = options.wrapper_module.removesuffix(".py").replace("/", ".")
                spec += f":{wrapper}:{options.wrapper_class}"
            return spec
    return None


def overlay_wheel(official: Path, sha256: str, result: PatchResult) -> Path:
    """The overlay of ``result`` in the cache, beside the patched wheels; its bytes follow its
    inputs, so it is rebuilt only where they differ."""
    with WheelSource(official, sha256) as wheel:
        return cached_overlay(overlay_plan(result, wheel), sha256)
