"""The backbone patchsets (GLM-4 MoE and GLM-4.5V's wrapper, GLM-4.7-Flash, Gemma 3 and its
multimodal wrapper, ERNIE 4.5 MoE, Step-3, Mixtral, Qwen2-MoE, Ling 2.0, LongCat-Flash, Step-3.5)
against real releases."""

from __future__ import annotations

import pytest
from backbones import backbone_patchsets
from packaging.version import Version
from test_real_releases import Overlay

from patcher import patchset as patchsets
from patcher.cli.parser import main
from patcher.codemods.base import Model, Status, Tree
from patcher.codemods.eagle3_backbone import BackboneOptions, Eagle3Backbone
from patcher.engine import run_patchset

MODELS = "vllm/model_executor/models"
BACKBONES = {
    "glm4-moe-eagle3": ("glm4_moe.py", "Glm4MoeForCausalLM", "Glm4MoeModel"),
    "gemma3-eagle3": ("gemma3.py", "Gemma3ForCausalLM", "Gemma3Model"),
    "gemma3-mm-eagle3": ("gemma3.py", "Gemma3ForCausalLM", "Gemma3Model"),
    "ernie4.5-moe-eagle3": ("ernie45_moe.py", "Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeModel"),
    "step3-eagle3": ("step3_text.py", "Step3TextForCausalLM", "Step3TextModel"),
    "mixtral-eagle3": ("mixtral.py", "MixtralForCausalLM", "MixtralModel"),
    "qwen2-moe-eagle3": ("qwen2_moe.py", "Qwen2MoeForCausalLM", "Qwen2MoeModel"),
    "glm4-moe-lite-eagle3": ("glm4_moe_lite.py", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteModel"),
    "glm4v-moe-eagle3": ("glm4_moe.py", "Glm4MoeForCausalLM", "Glm4MoeModel"),
    "ling2-eagle3": ("bailing_moe.py", "BailingMoeV2ForCausalLM", "BailingMoeModel"),
    "longcat-flash-eagle3": ("longcat_flash.py", "LongcatFlashForCausalLM", "FlashModel"),
    "step3p5-eagle3": ("step3p5.py", "Step3p5ForCausalLM", "Step3p5Model"),
}
FIRST_RELEASE = {
    "glm4-moe-lite-eagle3": "0.15.0",
    "glm4v-moe-eagle3": "0.11.1",
    "ling2-eagle3": "0.11.0",
    "longcat-flash-eagle3": "0.11.0",
    "step3p5-eagle3": "0.15.1",
}
"""Where a patchset starts after SupportsEagle3 (0.10.1): GLM-4.7-Flash's class came in 0.15.0;
GLM-4.5V's image token needs the proposer's chain of architectures, there from 0.11.1; Ling 2.0's
and LongCat-Flash's classes came in 0.11.0, Step-3.5's in 0.15.1."""
RELEASES = ["0.10.1", "0.15.0", "0.17.1", "0.18.0", "0.25.0", "0.33.0"]
IN_CI = {"0.17.1", "0.33.0"}
"""A release before the model-type gate went (0.22.0) and the newest: CI runs every backbone
patchset on these two; the other four under ``nox -s tests -- -m heavy`` (the six took 1,500 s
of a cold CI's worker time on 2026-12-07)."""
WHITELISTED_BY_SUBSTRING = {"qwen2-moe-eagle3"}
"""Model types the whitelist of releases before 0.22.0 already accepts: "qwen" is on it."""


def test_every_backbone_patchset_is_run_here():
    assert sorted(BACKBONES) == sorted(backbone_patchsets())


@pytest.mark.parametrize(
    ("name", "version"),
    [
        pytest.param(name, version, marks=() if version in IN_CI else pytest.mark.heavy)
        for name in BACKBONES
        for version in RELEASES
        if Version(version) >= Version(FIRST_RELEASE.get(name, "0.10.1"))
    ],
)
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
    # From 0.22.0 the gate is gone: every Python member of the release is read (by range) and
    # searched for it, so its absence is settled.
    assert whitelist is (before_gate if version < "0.22" else Status.NOT_NEEDED)
    module = f"{MODELS}/{BACKBONES[name][0]}"
    assert module in result.changed
    for path, text in result.changed.items():
        compile(text, path, "exec")
    again = run_patchset(patchset, Overlay(source, result.changed))
    assert again.verdict == "upstream" and not again.changed


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


@pytest.mark.network
def test_glm4_moe_lite_is_unsupported_before_its_class_and_needs_the_patch_from_it(release):
    patchset = patchsets.load("glm4-moe-lite-eagle3")
    before = run_patchset(patchset, release("0.14.1"))
    assert before.verdict == "unsupported" and not before.changed
    detail = before.outcomes["eagle3-backbone"].detail
    assert f"no Glm4MoeLiteForCausalLM in {MODELS}/glm4_moe_lite.py" in detail
    first = run_patchset(patchset, release("0.15.0"))
    assert first.verdict == "needs-patch" and not first.drift, first.outcomes
    assert first.outcomes["eagle3-whitelist"].status is Status.APPLIED  # not on the whitelist


@pytest.mark.parametrize("version", ["0.15.0", "0.33.0"])
@pytest.mark.network
def test_glm4_moe_lite_the_target_counts_as_mla_without_a_patch(release, version):
    """MLA needs no patch for the target: every release with the class lists its model type in
    ``is_deepseek_mla``, and the public drafter is a Llama head, not an MLA one."""
    source = release(version)
    config = source.read("vllm/transformers_utils/model_arch_config_convertor.py") or b""
    detect = config.decode().split("def is_deepseek_mla", 1)[1].split("\n    def ", 1)[0]
    target_types, eagle_branch = detect.split('== "eagle"', 1)
    assert '"glm4_moe_lite"' in target_types and '"glm4_moe_lite"' not in eagle_branch
    result = run_patchset(patchsets.load("glm4-moe-lite-eagle3"), source)
    loop = result.changed[f"{MODELS}/glm4_moe_lite.py"]
    assert "hidden_states, residual = layer(positions, hidden_states, residual)" in loop


def wrapper_patched(source, patchset: str, module: str, wrapper: str, methods: str | None):
    """Run a wrapper patchset on a release; check the wrapper class ends with the interface and
    carries the hand-on methods where the release needs them (``methods``), else none; return the
    result and the patched module's text."""
    result = run_patchset(patchsets.load(patchset), source)
    assert result.verdict == "needs-patch" and not result.drift, result.outcomes
    text = result.changed[f"{MODELS}/{module}.py"]
    head = text.split(f"class {wrapper}(", 1)[1].split("):", 1)[0]
    assert head.rstrip().endswith("SupportsEagle3")
    assert (methods in text) if methods else "def set_aux_hidden_state_layers" not in text
    return result, text


@pytest.mark.parametrize(
    ("version", "methods"),
    [
        ("0.17.1", "        self.language_model.set_aux_hidden_state_layers(layers)\n"),
        ("0.32.0", None),  # the mixin protocol's defaults reach language_model.model
        ("0.33.0", None),
    ],
)
@pytest.mark.network
def test_gemma3_mm_gives_the_wrapper_the_interface_the_release_way(release, version, methods):
    result, _ = wrapper_patched(
        release(version), "gemma3-mm-eagle3", "gemma3_mm", "Gemma3ForConditionalGeneration", methods
    )
    assert "Gemma3ForConditionalGeneration subclasses SupportsEagle3" in (
        result.outcomes["eagle3-backbone"].detail
    )


@pytest.mark.parametrize("version", ["0.17.1", "0.32.0", "0.33.0"])
@pytest.mark.network
def test_gemma3_mm_image_token_branch_needs_no_patch(release, version):
    """The proposer's fallback reads ``config.image_token_index``: Gemma3Config's own name."""
    source = release(version)
    text = "".join(
        (source.read(f"vllm/v1/spec_decode/{name}.py") or b"").decode()
        for name in ("eagle", "llm_base_proposer")
    )
    branch = text.split("else:\n                self.model.config.image_token_index = (", 1)
    assert len(branch) == 2
    assert branch[1].lstrip().startswith("target_model.config.image_token_index")
    assert "Gemma3ForConditionalGeneration" not in text  # on none of the branch's named lists


@pytest.mark.parametrize(
    ("version", "methods"),
    [
        ("0.17.1", "        self.language_model.set_aux_hidden_state_layers(layers)\n"),
        ("0.32.0", None),
        ("0.33.0", None),
    ],
)
@pytest.mark.network
def test_glm4v_moe_gives_the_wrapper_the_interface_the_release_way(release, version, methods):
    """GLM-4.5V's class subclasses GLM-4.1V's; only the MoE one gets the interface."""
    _, wrapper = wrapper_patched(
        release(version), "glm4v-moe-eagle3", "glm4_1v", "Glm4vMoeForConditionalGeneration", methods
    )
    dense = wrapper.split("class Glm4vForConditionalGeneration(", 1)[1].split("):", 1)[0]
    assert "SupportsEagle3" not in dense


PROPOSERS = ("eagle", "llm_base_proposer")


@pytest.mark.parametrize("version", ["0.11.1", "0.17.1", "0.32.0", "0.33.0"])
@pytest.mark.network
def test_glm4v_moe_image_token_branch_is_patched_to_image_token_id(release, version):
    """The proposer's fallback reads ``config.image_token_index``, which GLM-4.5V's config has
    not (transformers' Glm4vMoeConfig names it image_token_id): the patch names the class."""
    source = release(version)
    files = {
        f"vllm/v1/spec_decode/{name}.py": source.read(f"vllm/v1/spec_decode/{name}.py")
        for name in PROPOSERS
    }
    text = "".join((data or b"").decode() for data in files.values())
    assert "Glm4vMoeForConditionalGeneration" not in text  # on none of the branch's lists
    result = run_patchset(patchsets.load("glm4v-moe-eagle3"), source)
    assert result.outcomes["mm-image-token"].status is Status.APPLIED
    (path,) = [path for path in files if path in result.changed]
    branch = result.changed[path].split('== "Glm4vMoeForConditionalGeneration":', 1)[1]
    assigned = branch.split("else:", 1)[0].split("elif", 1)[0]
    assert "self.model.config.image_token_index = (" in assigned
    assert "target_model.config.image_token_id" in assigned


@pytest.mark.parametrize("version", ["0.10.1", "0.11.0"])
@pytest.mark.network
def test_glm4v_moe_is_unsupported_where_the_proposer_has_no_chain(release, version):
    result = run_patchset(patchsets.load("glm4v-moe-eagle3"), release(version))
    assert result.verdict == "unsupported" and not result.drift, result.outcomes
    outcome = result.outcomes["mm-image-token"]
    assert outcome.status is Status.UNSUPPORTED
    assert "no architecture chain to extend" in outcome.detail


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
        "(known keys: module, causal_lm, backbone, attribute, wrapper_module, wrapper_class, "
        "wrapper_attribute)",
        f"patcher: error: {bad}: patches[1].backbone: missing",
    ]


NEW_BACKBONES = {
    # patchset: (the state kept where the release's models use the mixin, and where they do not)
    "ling2-eagle3": (
        "aux_hidden_states, idx + 1, hidden_states, residual",
        "aux_hidden_states.append(hidden_states + residual)",
    ),
    "longcat-flash-eagle3": (
        "aux_hidden_states, idx + 1, hidden_states, residual",
        "aux_hidden_states.append(hidden_states + residual)",
    ),
    "step3p5-eagle3": (
        "aux_hidden_states, i + 1, hidden_states, None",
        "aux_hidden_states.append(hidden_states)",
    ),
}
"""Ling 2.0's and LongCat-Flash's blocks defer their residual add, as Llama's layers do:
hidden_states + residual between blocks is the residual stream. Step-3.5's layers add their own
residual and return one tensor: that tensor is the stream."""


@pytest.mark.parametrize(
    ("name", "version"),
    [
        pytest.param(name, version, marks=() if version in IN_CI else pytest.mark.heavy)
        for name in NEW_BACKBONES
        for version in ("0.17.1", "0.33.0", "0.34.0")
    ],
)
@pytest.mark.network
def test_the_class_refuses_before_and_has_the_interface_and_the_capture_after(
    release, name, version
):
    module, causal_lm, backbone = BACKBONES[name]
    source = release(version)
    before = (source.read(f"{MODELS}/{module}") or b"").decode()
    head = before.split(f"class {causal_lm}(", 1)[1].split("):", 1)[0]
    assert "SupportsEagle3" not in head and "aux_hidden_states" not in before
    result = run_patchset(patchsets.load(name), source)
    assert result.verdict == "needs-patch" and not result.drift, result.outcomes
    after = result.changed[f"{MODELS}/{module}"]
    assert after.split(f"class {causal_lm}(", 1)[1].split("):", 1)[0].endswith("SupportsEagle3")
    forward = after.split(f"class {backbone}(", 1)[1].split("\nclass ", 1)[0]
    mixin, methods = NEW_BACKBONES[name]
    assert (mixin if version >= "0.18" else methods) in forward
    assert "return hidden_states, aux_hidden_states" in forward
