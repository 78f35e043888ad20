"""eagle3-backbone on before/after snippets of a GLM-4-MoE-style decoder, in both styles."""

from __future__ import annotations

import textwrap

import pytest
from conftest import rerun, run

from patcher.codemods.base import Status
from patcher.codemods.eagle3_backbone import BackboneOptions, Eagle3Backbone, read_protocol

MODEL = "vllm/model_executor/models/glm4_moe.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
OPTIONS = {"module": MODEL, "causal_lm": "Glm4MoeForCausalLM", "backbone": "Glm4MoeModel"}

# interfaces.py as vLLM 0.10.1 to 0.17.1 declare it: two methods, no defaults, no mixin.
METHODS_PROTOCOL = """
class SupportsEagle3(Protocol):
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        ...

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        ...
"""

# As vLLM 0.18.0 on declare it: a mixin collecting the states, a protocol with defaults.
MIXIN_PROTOCOL = """
class EagleModelMixin:
    def _maybe_add_hidden_state(self, aux_hidden_states, layer_idx, hidden_states, residual):
        ...


class SupportsEagle3(Protocol):
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        ...

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        ...
"""

GLM = """
from .interfaces import MixtureOfExperts, SupportsPP


class Glm4MoeModel(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)

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

EXPECTED_MIXIN = """
from .interfaces import MixtureOfExperts, SupportsPP, EagleModelMixin, SupportsEagle3


class Glm4MoeModel(nn.Module, EagleModelMixin):
    def __init__(self, config):
        self.layers = make_layers(config)

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None

        aux_hidden_states = self._maybe_add_hidden_state(
            [], self.start_layer, hidden_states, residual
        )
        for idx, layer in enumerate(
            islice(self.layers, self.start_layer, self.end_layer),
            start=self.start_layer,
        ):
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(
                aux_hidden_states, idx + 1, hidden_states, residual
            )

        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class Glm4MoeForCausalLM(nn.Module, SupportsPP, MixtureOfExperts, SupportsEagle3):
    def __init__(self, config):
        self.model = Glm4MoeModel(config)
"""

EXPECTED_METHODS = """
from .interfaces import MixtureOfExperts, SupportsPP, SupportsEagle3


class Glm4MoeModel(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)
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

RANGE_LOOP = """
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states, residual = layer(positions, hidden_states, residual)
"""


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def files(protocol: str, model: str = GLM) -> dict[str, str]:
    return {MODEL: model, INTERFACES: protocol}


def with_range_loop(model: str) -> str:
    return model.replace(
        "\n        for layer in islice(self.layers, self.start_layer, self.end_layer):\n"
        "            hidden_states, residual = layer(positions, hidden_states, residual)\n",
        RANGE_LOOP,
    )


def test_mixin_protocol_backbone_inherits_the_mixin_and_collects_after_each_layer():
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL), OPTIONS)
    assert outcome.status is Status.APPLIED, outcome.detail
    assert after[MODEL] == dedent(EXPECTED_MIXIN)
    assert "EagleModelMixin style" in outcome.detail


def test_methods_protocol_causal_lm_implements_setter_and_getter():
    outcome, after = run(Eagle3Backbone, files(METHODS_PROTOCOL), OPTIONS)
    assert outcome.status is Status.APPLIED, outcome.detail
    assert after[MODEL] == dedent(EXPECTED_METHODS)


def test_range_loop_keeps_its_counter():
    outcome, after = run(Eagle3Backbone, files(METHODS_PROTOCOL, with_range_loop(GLM)), OPTIONS)
    assert outcome.status is Status.APPLIED, outcome.detail
    assert (
        "        for i in range(self.start_layer, self.end_layer):\n"
        "            layer = self.layers[i]\n"
        "            if i in self.aux_hidden_state_layers:\n"
        "                aux_hidden_states.append(hidden_states + residual)\n"
        "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
    ) in after[MODEL]
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL, with_range_loop(GLM)), OPTIONS)
    assert (
        "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
        "            self._maybe_add_hidden_state(\n"
        "                aux_hidden_states, i + 1, hidden_states, residual\n"
        "            )\n"
    ) in after[MODEL]


@pytest.mark.parametrize("protocol", [METHODS_PROTOCOL, MIXIN_PROTOCOL])
def test_reapplying_is_present_and_changes_nothing(protocol):
    _, first = run(Eagle3Backbone, files(protocol), OPTIONS)
    outcome, second = rerun(Eagle3Backbone, files(protocol), OPTIONS)
    assert outcome.status is Status.PRESENT
    assert first == second


def test_a_class_that_inherits_the_interface_through_a_local_base_is_present():
    model = GLM.replace(
        "class Glm4MoeForCausalLM(nn.Module, SupportsPP, MixtureOfExperts):",
        "class Base(nn.Module, SupportsEagle3):\n    pass\n\n\nclass Glm4MoeForCausalLM(Base):",
    )
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL, model), OPTIONS)
    assert outcome.status is Status.PRESENT
    assert after[MODEL] == dedent(model)


def test_backbone_under_another_attribute_gets_explicit_methods_with_the_mixin():
    model = GLM.replace("self.model = Glm4MoeModel", "self.decoder = Glm4MoeModel")
    options = {**OPTIONS, "attribute": "decoder"}
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL, model), options)
    assert outcome.status is Status.APPLIED
    assert "        self.decoder._set_aux_hidden_state_layers(layers)\n" in after[MODEL]
    assert "    def get_eagle3_default_aux_hidden_state_layers(self)" in after[MODEL]
    compile(after[MODEL], MODEL, "exec")


@pytest.mark.parametrize(
    ("missing", "detail"),
    [
        (INTERFACES, f"{INTERFACES} has no SupportsEagle3 protocol"),
        (MODEL, f"no {MODEL} in this release"),
    ],
)
def test_a_missing_file_is_unsupported_naming_it(missing, detail):
    tree = {k: v for k, v in files(MIXIN_PROTOCOL).items() if k != missing}
    outcome, _ = run(Eagle3Backbone, tree, OPTIONS)
    assert (outcome.status, outcome.detail) == (Status.UNSUPPORTED, detail)


def test_a_missing_class_is_unsupported_naming_it():
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL), {**OPTIONS, "backbone": "Nope"})
    assert outcome.status is Status.UNSUPPORTED
    assert outcome.detail == f"{MODEL} has no class Nope"
    assert after[MODEL] == dedent(GLM)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (
            (
                "hidden_states, residual = layer(positions, hidden_states, residual)",
                "hidden_states = layer(positions, hidden_states)",
            ),
            "expected `hidden_states, residual = layer(...)` in the loop",
        ),
        (
            ("for layer in islice(self.layers,", "for layer in islice(self.blocks,"),
            "expected one loop over self.layers, found 0",
        ),
        (
            ("        return hidden_states\n", "        return hidden_states, residual\n"),
            "expected it to end in `return hidden_states`",
        ),
    ],
)
def test_an_unknown_loop_shape_fails_naming_file_line_and_candidate(change, what):
    model = GLM.replace(*change)
    outcome, after = run(Eagle3Backbone, files(MIXIN_PROTOCOL, model), OPTIONS)
    assert outcome.status is Status.FAILED
    where = f"{MODEL}: {what} in Glm4MoeModel.forward; nearest candidate: "
    assert outcome.detail.startswith(where)
    assert f"{MODEL}:" in outcome.detail.split("nearest candidate: ")[1]
    assert after[MODEL] == dedent(model)


def test_the_protocol_is_read_from_interfaces():
    methods = read_protocol(dedent(METHODS_PROTOCOL))
    mixin = read_protocol(dedent(MIXIN_PROTOCOL))
    assert methods is not None and mixin is not None
    assert (methods.getter, methods.mixin) == ("get_eagle3_aux_hidden_state_layers", False)
    assert (mixin.getter, mixin.mixin) == ("get_eagle3_default_aux_hidden_state_layers", True)
    assert read_protocol("class SupportsEagle(Protocol):\n    pass\n") is None


def test_the_module_option_must_be_a_python_path():
    with pytest.raises(ValueError, match=r"module must be a \.py path in the tree, got 'glm4_moe'"):
        BackboneOptions(module="glm4_moe", causal_lm="A", backbone="B")
