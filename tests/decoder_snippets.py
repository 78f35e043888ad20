"""One decoder module in vLLM's shape, before and after it implements ``SupportsEagle3`` the way
vLLM 0.10.1 to 0.17.1 declare it (two methods on the causal LM, the backbone collecting states).

eagle3-backbone (on such a release) and eagle3-interface write the same code here, so the tests
of both compare against this one literal pair. The names are GLM-4 MoE's; eagle3-interface
takes the classes it patches as options, so it patches this module behind a Kimi-K2.5 wrapper.
"""

from __future__ import annotations

DECODER_PATH = "vllm/model_executor/models/glm4_moe.py"
CAUSAL_LM = "Glm4MoeForCausalLM"
BACKBONE = "Glm4MoeModel"

DECODER = """
from .interfaces import MixtureOfExperts, SupportsPP


class Glm4MoeModel(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)  # the decoder layers

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None

        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)

        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states


class Glm4MoeForCausalLM(nn.Module, SupportsPP, MixtureOfExperts):
    def __init__(self, config):
        self.model = Glm4MoeModel(config)
"""

DECODER_METHODS_STYLE = """
from .interfaces import MixtureOfExperts, SupportsPP, SupportsEagle3


class Glm4MoeModel(nn.Module):
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


class Glm4MoeForCausalLM(nn.Module, SupportsPP, MixtureOfExperts, SupportsEagle3):
    def __init__(self, config):
        self.model = Glm4MoeModel(config)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)
"""
