"""verify end to end: real wheels, real venvs, real pip installs, vLLM's own code on CPU.

A cold run downloads each official wheel, builds the patched one and the two venvs
(patcher/venvs.py). Later runs reuse wheels and venvs from the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher.cli.parser import main
from patcher.index import PackageIndex, machine_platform
from patcher.sources.download import download_wheel
from patcher.verify.report import VerifyReport
from patcher.verify.runner import verify_wheels

pytestmark = [pytest.mark.slow, pytest.mark.network]

KIMI_CHECKS = ("speculative-config", "eagle3-interface", "mm-image-token", "aux-hidden-states")
BARRIERS = {  # the same words on 0.15.0 and 0.16.0
    "speculative-config": "Eagle3 is only supported for",
    "eagle3-interface": "supports_eagle3() is False for KimiK25ForConditionalGeneration",
    "mm-image-token": "AttributeError: 'KimiK25Config' object has no attribute 'image_token_index'",
    "aux-hidden-states": "DeepseekV2Model.forward returned one Tensor",
}
MLA_PATCHSET = "kimi-k2.5-eagle3-mla"
MLA_CHECKS = (*KIMI_CHECKS, "mla-drafter")
"""kimi-k2.5-eagle3-mla's checks: the Kimi ones and the drafter's (not eagle3-aux-ids-v2's,
which fails on every wheel but its own patchset's)."""
MLA_BARRIER = "before: barrier: drafter use_mla False (drafter model type eagle, inner kimi_k2)"


def official(version: str) -> Path:
    index = PackageIndex()
    wheel = index.release(version).wheel_for(machine_platform())
    assert wheel is not None
    return download_wheel(wheel, index.client)


def patched(wheel: Path, dist: Path, name: str | None = None) -> Path:
    extra = [] if name is None else ["--patchset", name]
    assert main(["build-wheel", "--wheel", str(wheel), "--dist", str(dist), *extra]) == 0
    (built,) = dist.glob("*.whl")
    return built


def by_name(report: VerifyReport) -> dict[str, dict]:
    return {c["name"]: c for c in report.to_json()["checks"]}


@pytest.mark.parametrize(
    ("version", "held"), [("0.15.0", "DeepseekV2Model"), ("0.16.0", "DeepseekV2ForCausalLM")]
)
def test_every_barrier_fails_before_and_passes_after(tmp_path, version, held):
    """0.15.x Kimi holds the bare backbone: the stand-ins follow, and so must the patch."""
    wheel = official(version)
    report = verify_wheels(wheel, patched(wheel, tmp_path), version, MLA_CHECKS)
    checks = by_name(report)
    for name, barrier in BARRIERS.items():
        assert (checks[name]["before"], checks[name]["after"]) == ("fail", "pass"), checks[name]
        assert f"before: barrier: {barrier}" in checks[name]["detail"]
    assert f"shared the embedding of the {held} Kimi holds" in checks["mm-image-token"]["detail"]
    assert (checks["mla-drafter"]["before"], checks["mla-drafter"]["after"]) == ("skip", "skip")
    assert "no MLA EAGLE-3 drafter class" in checks["mla-drafter"]["detail"]
    assert report.ok


def test_0_18_0_upstream_has_the_kimi_fixes_and_the_mla_patch_adds_the_drafter(tmp_path):
    wheel = official("0.18.0")
    report = verify_wheels(wheel, patched(wheel, tmp_path, MLA_PATCHSET), "0.18.0", MLA_CHECKS)
    checks = by_name(report)
    for name in KIMI_CHECKS:
        assert (checks[name]["before"], checks[name]["after"]) == ("pass", "pass"), checks[name]
    assert (checks["mla-drafter"]["before"], checks["mla-drafter"]["after"]) == ("fail", "pass")
    assert MLA_BARRIER in checks["mla-drafter"]["detail"]
    assert report.ok


def test_0_33_0_mla_drafter_fails_before_and_passes_after(tmp_path):
    wheel = official("0.33.0")
    report = verify_wheels(wheel, patched(wheel, tmp_path, MLA_PATCHSET), "0.33.0", MLA_CHECKS)
    checks = by_name(report)
    assert (checks["mla-drafter"]["before"], checks["mla-drafter"]["after"]) == ("fail", "pass")
    assert MLA_BARRIER in checks["mla-drafter"]["detail"]
    assert all(checks[name]["after"] == "pass" for name in KIMI_CHECKS), checks
    assert report.ok


def test_0_33_0_v2_runner_reads_nested_ids_only_once_patched(tmp_path):
    wheel = official("0.33.0")
    name = "eagle3-aux-ids-v2"
    report = verify_wheels(wheel, patched(wheel, tmp_path, name), "0.33.0", ["v2-nested-aux-ids"])
    check = by_name(report)["v2-nested-aux-ids"]
    assert (check["before"], check["after"]) == ("fail", "pass"), check
    assert "before: barrier: get_eagle3_aux_layers_from_config returned None" in check["detail"]
    assert "returned (1, 29, 57) for eagle_config's ids" in check["detail"]
    assert report.ok


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_eagle3_across_pipeline_stages_is_refused_officially_and_relayed_patched(tmp_path, version):
    wheel = official(version)
    name = "deepseek-pp-eagle3"
    report = verify_wheels(wheel, patched(wheel, tmp_path, name), version, ["pp-aux-relay"])
    check = by_name(report)["pp-aux-relay"]
    assert (check["before"], check["after"]) == ("fail", "pass"), check
    assert (
        "before: barrier: DeepseekV3ForCausalLM does not support eagle3 with pipeline parallelism"
        in check["detail"]
    )
    assert "relayed ['aux_hidden_states_0'] into the slots" in check["detail"]
    assert "returned the 3 aux states for ids (1, 2, 4)" in check["detail"]
    assert report.ok
