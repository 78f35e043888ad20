"""eagle3-interface on before/after snippets of a DeepSeek-style model and its wrapper."""

from __future__ import annotations

import textwrap

from conftest import rerun, run

from patcher.codemods.base import Status
from patcher.codemods.eagle3_interface import Eagle3Interface

TEXT = "vllm/model_executor/models/deepseek_v2.py"
WRAPPER = "vllm/model_executor/models/kimi_k25.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"

OPTIONS = {
    "text_module": TEXT,
    "text_class": "DeepseekV2ForCausalLM",
    "backbone_class": "DeepseekV2Model",
    "backbone_attribute": "model",
    "wrapper_module": WRAPPER,
    "wrapper_class": "KimiK25ForConditionalGeneration",
    "wrapper_attribute": "language_model",
}

DEEPSEEK = """
from .interfaces import MixtureOfExperts, SupportsPP


class DeepseekV2Model(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)  # the decoder layers

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states


class DeepseekV2ForCausalLM(nn.Module, SupportsPP, MixtureOfExperts):
    def __init__(self, config):
        self.model = DeepseekV2Model(config)
"""

KIMI = """
from vllm.model_executor.models.interfaces import (
    SupportsMultiModal,
    SupportsPP,
)


class KimiK25ForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsPP):
    def __init__(self, config):
        self.language_model = init_vllm_registered_model(config)
"""

FILES = {TEXT: DEEPSEEK, WRAPPER: KIMI, INTERFACES: "class SupportsEagle3(Protocol):\n    pass\n"}

EXPECTED_DEEPSEEK = """
from .interfaces import MixtureOfExperts, SupportsPP, SupportsEagle3


class DeepseekV2Model(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)  # the decoder layers
        self.aux_hidden_state_layers: tuple[int, ...] = ()

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None
        aux_hidden_states = []
        for idx, layer in enumerate(
            islice(self.layers, self.start_layer, self.end_layer),
            start=self.start_layer,
        ):
            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class DeepseekV2ForCausalLM(nn.Module, SupportsPP, MixtureOfExperts, SupportsEagle3):
    def __init__(self, config):
        self.model = DeepseekV2Model(config)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)
"""

EXPECTED_KIMI = """
from vllm.model_executor.models.interfaces import (
    SupportsMultiModal,
    SupportsPP,
    SupportsEagle3,
)


class KimiK25ForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsPP, SupportsEagle3):
    def __init__(self, config):
        self.language_model = init_vllm_registered_model(config)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        return self.language_model.get_eagle3_aux_hidden_state_layers()
"""


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_text_model_and_wrapper_gain_the_interface():
    outcome, after = run(Eagle3Interface, FILES, OPTIONS)
    assert outcome.status is Status.APPLIED, outcome.detail
    assert after[TEXT] == dedent(EXPECTED_DEEPSEEK)
    assert after[WRAPPER] == dedent(EXPECTED_KIMI)


def test_reapplying_is_a_no_op():
    _, first = run(Eagle3Interface, FILES, OPTIONS)
    outcome, second = rerun(Eagle3Interface, FILES, OPTIONS)
    assert outcome.status is Status.PRESENT
    assert first == second


def test_wrapper_holding_the_backbone_itself_delegates_to_its_fields():
    files = dict(FILES)
    files[WRAPPER] = KIMI.replace("init_vllm_registered_model(config)", "DeepseekV2Model(config)")
    outcome, after = run(Eagle3Interface, files, OPTIONS)
    assert outcome.status is Status.APPLIED
    assert "self.language_model.aux_hidden_state_layers = layers" in after[WRAPPER]
    assert "num_layers = len(self.language_model.layers)" in after[WRAPPER]


def test_slice_loop_shape():
    files = dict(FILES)
    files[TEXT] = DEEPSEEK.replace(
        "islice(self.layers, self.start_layer, self.end_layer)",
        "self.layers[self.start_layer:self.end_layer]",
    )
    outcome, after = run(Eagle3Interface, files, OPTIONS)
    assert outcome.status is Status.APPLIED
    assert "    self.layers[self.start_layer:self.end_layer],\n" in after[TEXT]
    compile(after[TEXT], TEXT, "exec")


def test_without_the_interface_in_vllm_it_is_unsupported():
    files = {k: v for k, v in FILES.items() if k != INTERFACES}
    outcome, after = run(Eagle3Interface, files, OPTIONS)
    assert outcome.status is Status.UNSUPPORTED
    assert after[TEXT] == dedent(DEEPSEEK)


def test_unknown_loop_shape_fails_and_changes_nothing():
    files = dict(FILES)
    files[TEXT] = DEEPSEEK.replace(
        "hidden_states, residual = layer(positions, hidden_states, residual)",
        "hidden_states = layer(positions, hidden_states)",
    )
    outcome, after = run(Eagle3Interface, files, OPTIONS)
    assert outcome.status is Status.FAILED
    assert TEXT in outcome.detail and "nearest candidate" in outcome.detail
    assert after[TEXT] == dedent(files[TEXT])
