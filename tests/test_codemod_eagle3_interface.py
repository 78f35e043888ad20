"""eagle3-interface on literal before/after snippets of a text model and its Kimi-K2.5 wrapper."""
# ruff: noqa: E501 - an after snippet keeps the long class line the codemod writes

from __future__ import annotations

import pytest
from codemod_helpers import UNCHANGED, assert_codemod
from decoder_snippets import BACKBONE, CAUSAL_LM, DECODER, DECODER_METHODS_STYLE, DECODER_PATH

from patcher.codemods.base import Status
from patcher.codemods.eagle3_interface import Eagle3Interface

TEXT = DECODER_PATH
WRAPPER = "vllm/model_executor/models/kimi_k25.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"

OPTIONS = {
    "text_module": TEXT,
    "text_class": CAUSAL_LM,
    "backbone_class": BACKBONE,
    "backbone_attribute": "model",
    "wrapper_module": WRAPPER,
    "wrapper_class": "KimiK25ForConditionalGeneration",
    "wrapper_attribute": "language_model",
}

KIMI = """
from vllm.model_executor.models.interfaces import (
    SupportsMultiModal,
    SupportsPP,
)


class KimiK25ForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsPP):
    def __init__(self, config):
        self.language_model = init_vllm_registered_model(config)
"""

KIMI_PATCHED = """
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

PROTOCOL = """
class SupportsEagle3(Protocol):
    pass
"""


def test_text_model_and_wrapper_gain_the_interface():
    assert_codemod(
        Eagle3Interface,
        {TEXT: DECODER, WRAPPER: KIMI, INTERFACES: PROTOCOL},
        {TEXT: DECODER_METHODS_STYLE, WRAPPER: KIMI_PATCHED},
        Status.APPLIED,
        options=OPTIONS,
    )


def test_reapplying_is_a_no_op():
    patched = {TEXT: DECODER_METHODS_STYLE, WRAPPER: KIMI_PATCHED, INTERFACES: PROTOCOL}
    assert_codemod(Eagle3Interface, patched, UNCHANGED, Status.PRESENT, options=OPTIONS)


def test_wrapper_holding_the_backbone_itself_delegates_to_its_fields():
    wrapper = """
    from vllm.model_executor.models.interfaces import (
        SupportsMultiModal,
        SupportsPP,
    )


    class KimiK25ForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsPP):
        def __init__(self, config):
            self.language_model = Glm4MoeModel(config)
    """
    wrapper_patched = """
    from vllm.model_executor.models.interfaces import (
        SupportsMultiModal,
        SupportsPP,
        SupportsEagle3,
    )


    class KimiK25ForConditionalGeneration(nn.Module, SupportsMultiModal, SupportsPP, SupportsEagle3):
        def __init__(self, config):
            self.language_model = Glm4MoeModel(config)

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.language_model.aux_hidden_state_layers = layers

        def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
            num_layers = len(self.language_model.layers)
            return (2, num_layers // 2, num_layers - 3)
    """
    assert_codemod(
        Eagle3Interface,
        {TEXT: DECODER, WRAPPER: wrapper, INTERFACES: PROTOCOL},
        {TEXT: DECODER_METHODS_STYLE, WRAPPER: wrapper_patched},
        Status.APPLIED,
        options=OPTIONS,
    )


def test_slice_loop_shape():
    text = """
    from .interfaces import SupportsPP


    class Glm4MoeModel(nn.Module):
        def __init__(self, config):
            self.layers = make_layers(config)

        def forward(self, input_ids, positions):
            hidden_states, residual = self.embed(input_ids), None
            for layer in self.layers[self.start_layer:self.end_layer]:
                hidden_states, residual = layer(positions, hidden_states, residual)
            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states


    class Glm4MoeForCausalLM(nn.Module, SupportsPP):
        def __init__(self, config):
            self.model = Glm4MoeModel(config)
    """
    text_patched = """
    from .interfaces import SupportsPP, SupportsEagle3


    class Glm4MoeModel(nn.Module):
        def __init__(self, config):
            self.layers = make_layers(config)
            self.aux_hidden_state_layers: tuple[int, ...] = ()

        def forward(self, input_ids, positions):
            hidden_states, residual = self.embed(input_ids), None
            aux_hidden_states = []
            for idx, layer in enumerate(
                self.layers[self.start_layer:self.end_layer],
                start=self.start_layer,
            ):
                if idx in self.aux_hidden_state_layers:
                    aux_hidden_states.append(hidden_states + residual)
                hidden_states, residual = layer(positions, hidden_states, residual)
            hidden_states, _ = self.norm(hidden_states, residual)

            if len(aux_hidden_states) > 0:
                return hidden_states, aux_hidden_states
            return hidden_states


    class Glm4MoeForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
        def __init__(self, config):
            self.model = Glm4MoeModel(config)

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.model.aux_hidden_state_layers = layers

        def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
            num_layers = len(self.model.layers)
            return (2, num_layers // 2, num_layers - 3)
    """
    assert_codemod(
        Eagle3Interface,
        {TEXT: text, WRAPPER: KIMI, INTERFACES: PROTOCOL},
        {TEXT: text_patched, WRAPPER: KIMI_PATCHED},
        Status.APPLIED,
        options=OPTIONS,
    )


def test_without_the_interface_in_vllm_it_is_unsupported():
    before = {TEXT: DECODER, WRAPPER: KIMI}
    assert_codemod(Eagle3Interface, before, UNCHANGED, Status.UNSUPPORTED, options=OPTIONS)


def test_unknown_loop_shape_fails_and_changes_nothing():
    text = """
    from .interfaces import SupportsPP


    class Glm4MoeModel(nn.Module):
        def __init__(self, config):
            self.layers = make_layers(config)

        def forward(self, input_ids, positions):
            hidden_states, residual = self.embed(input_ids), None
            for layer in islice(self.layers, self.start_layer, self.end_layer):
                hidden_states = layer(positions, hidden_states)
            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states


    class Glm4MoeForCausalLM(nn.Module, SupportsPP):
        def __init__(self, config):
            self.model = Glm4MoeModel(config)
    """
    before = {TEXT: text, WRAPPER: KIMI, INTERFACES: PROTOCOL}
    outcome = assert_codemod(Eagle3Interface, before, UNCHANGED, Status.FAILED, options=OPTIONS)
    assert TEXT in outcome.detail and "nearest candidate" in outcome.detail


def test_forward_that_only_names_aux_hidden_states_is_not_taken_as_patched():
    """``forward`` mentions ``aux_hidden_states`` but neither collects nor returns them: the
    other edits alone would be a false ``applied`` (issue 28). Failed, nothing written."""
    decoder = DECODER.replace(
        "        hidden_states, residual = self.embed(input_ids), None\n",
        "        hidden_states, residual = self.embed(input_ids), None\n"
        "        aux_hidden_states = None  # not collected here\n",
    )
    outcome = assert_codemod(
        Eagle3Interface,
        {TEXT: decoder, WRAPPER: KIMI, INTERFACES: PROTOCOL},
        UNCHANGED,
        Status.FAILED,
        options=OPTIONS,
    )
    assert "uses the name aux_hidden_states but does not both append" in outcome.detail


# A second hostile pass: wrappers whose class vLLM loads would still lack the interface after a
# patch said applied. Each comes out failed, and nothing is written.
WRAPPER_SHAPES = {
    "attribute-renamed": KIMI.replace("self.language_model =", "self.text_model ="),
    "stub-methods": KIMI.replace("SupportsPP,\n)", "SupportsPP,\n    SupportsEagle3,\n)").replace(
        "SupportsPP):", "SupportsPP, SupportsEagle3):"
    )
    + "\n    def set_aux_hidden_state_layers(self, layers):\n        raise NotImplementedError\n"
    + "\n    def get_eagle3_aux_hidden_state_layers(self):\n"
    + '        """Not yet."""\n        raise NotImplementedError\n',
    "one-line-stubs": KIMI.replace("SupportsPP,\n)", "SupportsPP,\n    SupportsEagle3,\n)").replace(
        "SupportsPP):", "SupportsPP, SupportsEagle3):"
    )
    + "\n    def set_aux_hidden_state_layers(self, layers): raise NotImplementedError\n"
    + "\n    def get_eagle3_aux_hidden_state_layers(self): ...\n",
    "rebound-later": KIMI + "\n\nKimiK25ForConditionalGeneration = _LegacyKimiK25\n",
    "redefined-later": KIMI + "\n\nclass KimiK25ForConditionalGeneration(nn.Module):\n    pass\n",
    "methods-deleted": KIMI
    + '\n\nfor _name in ("set_aux_hidden_state_layers",):\n'
    + "    delattr(KimiK25ForConditionalGeneration, _name)\n",
}


@pytest.mark.parametrize("wrapper", list(WRAPPER_SHAPES.values()), ids=list(WRAPPER_SHAPES))
def test_a_wrapper_that_would_still_lack_the_interface_is_failed_not_applied(wrapper):
    outcome = assert_codemod(
        Eagle3Interface,
        {TEXT: DECODER, WRAPPER: wrapper, INTERFACES: PROTOCOL},
        UNCHANGED,
        Status.FAILED,
        options=OPTIONS,
    )
    assert WRAPPER in outcome.detail, outcome.detail
