"""The backbone patchsets (GLM-4 MoE, Gemma 3, ERNIE 4.5 MoE, Step-3, Mixtral, Qwen2-MoE) against
real releases."""

from __future__ import annotations

import pytest
from backbones import backbone_patchsets
from test_real_releases import Overlay

from patcher import patchset as patchsets
from patcher.cli import main
from patcher.codemods.base import Model, Status, Tree
from patcher.codemods.eagle3_backbone import BackboneOptions, Eagle3Backbone
from patcher.engine import run_patchset

MODELS = "vllm/model_executor/models"
BACKBONES = {
    "glm4-moe-eagle3": ("glm4_moe.py", "Glm4MoeForCausalLM", "Glm4MoeModel"),
    "gemma3-eagle3": ("gemma3.py", "Gemma3ForCausalLM", "Gemma3Model"),
    "ernie4.5-moe-eagle3": ("ernie45_moe.py", "Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeModel"),
    "step3-eagle3": ("step3_text.py", "Step3TextForCausalLM", "Step3TextModel"),
    "mixtral-eagle3": ("mixtral.py", "MixtralForCausalLM", "MixtralModel"),
    "qwen2-moe-eagle3": ("qwen2_moe.py", "Qwen2MoeForCausalLM", "Qwen2MoeModel"),
}
WHITELISTED_BY_SUBSTRING = {"qwen2-moe-eagle3"}
"""Model types the whitelist of releases before 0.22.0 already accepts: "qwen" is on it."""


def test_every_backbone_patchset_is_run_here():
    assert sorted(BACKBONES) == sorted(backbone_patchsets())


@pytest.mark.parametrize("version", ["0.10.1", "0.17.1", "0.18.0", "0.25.0", "0.33.0"])
@pytest.mark.parametrize("name", list(BACKBONES))
@pytest.mark.network
def test_patched_output_compiles_and_reapplying_is_a_no_op(release, name, version):
    source = release(version)
    patchset = patchsets.load(name)
    result = run_patchset(patchset, source)
    assert result.verdict == "needs-patch", result.outcomes
    assert result.outcomes["eagle3-backbone"].status is Status.APPLIED
    # The model-type gate went in 0.22.0; before it, the whitelist patch opens it.
    whitelist = result.outcomes["eagle3-whitelist"].status
    before_gate = Status.PRESENT if name in WHITELISTED_BY_SUBSTRING else Status.APPLIED
    # Read by range, its absence from the rest of the tree is not searched for: unknown.
    assert whitelist is (before_gate if version < "0.22" else Status.UNKNOWN)
    module = f"{MODELS}/{BACKBONES[name][0]}"
    assert module in result.changed
    for path, text in result.changed.items():
        compile(text, path, "exec")
    again = run_patchset(patchset, Overlay(source, result.changed))
    assert again.verdict in ("upstream", "unknown") and not again.changed


@pytest.mark.parametrize(
    ("version", "style", "capture"),
    [
        ("0.17.1", "SupportsEagle3 methods style", "if idx in self.aux_hidden_state_layers:"),
        ("0.33.0", "EagleModelMixin style", "self._maybe_add_hidden_state("),
    ],
)
@pytest.mark.network
def test_each_release_is_patched_the_way_its_own_llama_is_written(release, version, style, capture):
    source = release(version)
    llama = (source.read(f"{MODELS}/llama.py") or b"").decode()
    assert capture in llama  # the shape the codemod copies is this release's own
    result = run_patchset(patchsets.load("glm4-moe-eagle3"), source)
    assert style in result.outcomes["eagle3-backbone"].detail
    assert capture in result.changed[f"{MODELS}/glm4_moe.py"]


@pytest.mark.network
def test_0_10_1_loops_over_a_range_and_keeps_its_counter(release):
    result = run_patchset(patchsets.load("glm4-moe-eagle3"), release("0.10.1"))
    text = result.changed[f"{MODELS}/glm4_moe.py"]
    assert (
        "        for i in range(self.start_layer, self.end_layer):\n"
        "            layer = self.layers[i]\n"
        "            if i in self.aux_hidden_state_layers:\n"
    ) in text


@pytest.mark.parametrize(
    ("version", "detail"),
    [
        ("0.9.2", f"no Glm4MoeForCausalLM in {MODELS}/glm4_moe.py"),
        ("0.10.0", f"no SupportsEagle3 in {MODELS}/interfaces.py"),
    ],
)
@pytest.mark.network
def test_a_release_lacking_what_is_needed_is_unsupported_naming_it(release, version, detail):
    result = run_patchset(patchsets.load("glm4-moe-eagle3"), release(version))
    assert result.verdict == "unsupported"
    outcome = result.outcomes["eagle3-backbone"]
    assert outcome.status is Status.UNSUPPORTED and detail in outcome.detail
    assert not result.changed


@pytest.mark.parametrize(
    ("version", "module", "causal_lm", "backbone"),
    [
        ("0.33.0", "llama.py", "LlamaForCausalLM", "LlamaModel"),
        ("0.18.0", "deepseek_v2.py", "DeepseekV2ForCausalLM", "DeepseekV2Model"),
    ],
)
@pytest.mark.network
def test_a_class_upstream_supports_is_present(release, version, module, causal_lm, backbone):
    options = {"module": f"{MODELS}/{module}", "causal_lm": causal_lm, "backbone": backbone}
    tree = Tree(release(version))
    outcome = Eagle3Backbone(Model(types=("llama",)), BackboneOptions(**options)).run(tree)
    assert outcome.status is Status.PRESENT
    assert not tree.overlay


@pytest.mark.network
def test_a_loop_it_does_not_know_is_failed_naming_file_line_and_candidate(release):
    """Falcon's decoder loops over ``self.h`` and its layers return one tensor, no residual."""
    options = {
        "module": f"{MODELS}/falcon.py",
        "causal_lm": "FalconForCausalLM",
        "backbone": "FalconModel",
        "attribute": "transformer",
    }
    tree = Tree(release("0.33.0"))
    outcome = Eagle3Backbone(Model(types=("falcon",)), BackboneOptions(**options)).run(tree)
    assert outcome.status is Status.FAILED, outcome
    assert outcome.detail == (
        f"{MODELS}/falcon.py: expected one loop over self.layers, found 0 in FalconModel.forward; "
        f"nearest candidate: {MODELS}/falcon.py:418 "
        "`for layer in islice(self.h, self.start_layer, self.end_layer):`"
    )
    assert not tree.overlay


def test_a_patchset_with_bad_backbone_options_is_one_line_per_problem(tmp_path, capsys):
    text = (patchsets.builtin_dir() / "glm4-moe-eagle3.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('backbone = "Glm4MoeModel"\n', 'backbone_class = "X"\n'))
    assert main(["diff", "--vllm", "0.33.0", "--patchset", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"patcher: error: {bad}: patches[1].backbone_class: unknown key "
        "(known keys: module, causal_lm, backbone, attribute)",
        f"patcher: error: {bad}: patches[1].backbone: missing",
    ]
