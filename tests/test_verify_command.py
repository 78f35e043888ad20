"""patcher verify's bookkeeping: what it refuses, and the reports the matrix reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher import official
from patcher import patchset as patchsets
from patcher.cache import CACHE_ENV
from patcher.codemods.base import Outcome, Status
from patcher.errors import PatcherError
from patcher.outputs.wheel import WheelPlan
from patcher.result import PatchResult
from patcher.verify.command import probe_model, verify_release


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    return tmp_path


def result(status: Status, name: str = "kimi-k2.5-eagle3") -> PatchResult:
    patchset = patchsets.load(name)
    return PatchResult("0.14.1", patchset, {p: Outcome(status) for p in patchset.patch_names})


def test_an_unsupported_release_is_refused_before_any_venv(tmp_path):
    with pytest.raises(PatcherError, match="unsupported"):
        verify_release(patchsets.load(), tmp_path / "none.whl", "", result(Status.UNSUPPORTED))


def test_a_patchset_without_checks_is_refused(tmp_path):
    patchset = patchsets.load()
    bare = patchsets.Patchset(**{**patchset.__dict__, "verify": ()})
    with pytest.raises(PatcherError, match="declares no verify checks"):
        verify_release(bare, tmp_path / "none.whl", "", result(Status.APPLIED))


def test_an_unknown_check_in_a_patchset_is_a_clear_error():
    text = (patchsets.builtin_dir() / "kimi-k2.5-eagle3.toml").read_bytes()
    with pytest.raises(PatcherError, match=r"p: verify\[4\]: 'x' is not one of speculative-config"):
        patchsets.parse(text.replace(b'"aux-hidden-states"]', b'"aux-hidden-states", "x"]'), "p")


def test_a_patched_wheel_is_refused_as_the_official_one(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-0.16.0+kimi.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("vllm/__init__.py", "")
        archive.writestr("vllm-0.16.0+kimi.eagle3.dist-info/patcher-provenance.json", "{}")
    with pytest.raises(PatcherError, match="is a patched wheel"):
        verify_release(patchsets.load(), wheel, "", result(Status.APPLIED))


def test_the_probe_model_is_the_patchset_backbone():
    assert probe_model(patchsets.load("glm4-moe-eagle3")) == (
        "vllm.model_executor.models.glm4_moe:Glm4MoeForCausalLM:Glm4MoeModel:model"
    )
    assert probe_model(patchsets.load("kimi-k2.5-eagle3")) is None


def test_the_probe_model_names_a_multimodal_wrapper_after_the_backbone():
    assert probe_model(patchsets.load("gemma3-mm-eagle3")) == (
        "vllm.model_executor.models.gemma3:Gemma3ForCausalLM:Gemma3Model:model"
        ":vllm.model_executor.models.gemma3_mm:Gemma3ForConditionalGeneration"
    )


def test_a_cached_patched_wheel_is_reused_only_for_the_same_patched_texts(tmp_path, monkeypatch):
    """A wheel patched by an older patchset or codemod must not stand in for a newer one."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    built: list[Path] = []

    def build_wheel(plan, dist):
        built.append(dist)
        return dist / plan.output_name()

    monkeypatch.setattr(official, "build_wheel", build_wheel)
    older, newer = result(Status.APPLIED), result(Status.APPLIED)
    older.changed = {"vllm/a.py": "x = 1\n"}
    newer.changed = {"vllm/a.py": "x = 2\n"}
    source = tmp_path / "vllm-0.14.1-py3-none-any.whl"
    official.patched_wheel(WheelPlan.labelled(source, "0" * 64, older, "kimi.eagle3"))
    official.patched_wheel(WheelPlan.labelled(source, "0" * 64, newer, "kimi.eagle3"))
    assert len(set(built)) == 2
