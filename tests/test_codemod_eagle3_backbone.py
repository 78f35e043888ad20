"""eagle3-backbone on literal before/after snippets of a GLM-4-MoE-style decoder, in both styles."""

from __future__ import annotations

import pytest
from codemod_helpers import UNCHANGED, assert_codemod, dedent
from decoder_snippets import BACKBONE, CAUSAL_LM, DECODER, DECODER_METHODS_STYLE, DECODER_PATH

from patcher import schema
from patcher.codemods.base import Status
from patcher.codemods.eagle3_backbone import BackboneOptions, Eagle3Backbone, read_protocol

MODEL = DECODER_PATH
INTERFACES = "vllm/model_executor/models/interfaces.py"
OPTIONS = {"module": MODEL, "causal_lm": CAUSAL_LM, "backbone": BACKBONE}

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

DECODER_MIXIN_STYLE = """
from .interfaces import MixtureOfExperts, SupportsPP, EagleModelMixin, SupportsEagle3


class Glm4MoeModel(nn.Module, EagleModelMixin):
    def __init__(self, config):
        self.layers = make_layers(config)  # the decoder layers

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

# vLLM 0.10.1's GLM-4 MoE loops over a range of indices.
RANGE_LOOP = """
from .interfaces import SupportsPP


class Glm4MoeModel(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states


class Glm4MoeForCausalLM(nn.Module, SupportsPP):
    def __init__(self, config):
        self.model = Glm4MoeModel(config)
"""

RANGE_LOOP_METHODS_STYLE = """
from .interfaces import SupportsPP, SupportsEagle3


class Glm4MoeModel(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)
        self.aux_hidden_state_layers: tuple[int, ...] = ()

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None
        aux_hidden_states = []
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            if i in self.aux_hidden_state_layers:
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

RANGE_LOOP_MIXIN_STYLE = """
from .interfaces import SupportsPP, EagleModelMixin, SupportsEagle3


class Glm4MoeModel(nn.Module, EagleModelMixin):
    def __init__(self, config):
        self.layers = make_layers(config)

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed(input_ids), None
        aux_hidden_states = self._maybe_add_hidden_state(
            [], self.start_layer, hidden_states, residual
        )
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states, residual = layer(positions, hidden_states, residual)
            self._maybe_add_hidden_state(
                aux_hidden_states, i + 1, hidden_states, residual
            )
        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class Glm4MoeForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, config):
        self.model = Glm4MoeModel(config)
"""


def test_mixin_protocol_backbone_inherits_the_mixin_and_collects_after_each_layer():
    outcome = assert_codemod(
        Eagle3Backbone,
        {MODEL: DECODER, INTERFACES: MIXIN_PROTOCOL},
        {MODEL: DECODER_MIXIN_STYLE},
        Status.APPLIED,
        options=OPTIONS,
    )
    assert "EagleModelMixin style" in outcome.detail


def test_methods_protocol_causal_lm_implements_setter_and_getter():
    assert_codemod(
        Eagle3Backbone,
        {MODEL: DECODER, INTERFACES: METHODS_PROTOCOL},
        {MODEL: DECODER_METHODS_STYLE},
        Status.APPLIED,
        options=OPTIONS,
    )


@pytest.mark.parametrize(
    ("protocol", "after"),
    [(METHODS_PROTOCOL, RANGE_LOOP_METHODS_STYLE), (MIXIN_PROTOCOL, RANGE_LOOP_MIXIN_STYLE)],
)
def test_range_loop_keeps_its_counter(protocol, after):
    before = {MODEL: RANGE_LOOP, INTERFACES: protocol}
    assert_codemod(Eagle3Backbone, before, {MODEL: after}, Status.APPLIED, options=OPTIONS)


@pytest.mark.parametrize(
    ("protocol", "patched"),
    [(METHODS_PROTOCOL, DECODER_METHODS_STYLE), (MIXIN_PROTOCOL, DECODER_MIXIN_STYLE)],
)
def test_reapplying_is_present_and_changes_nothing(protocol, patched):
    before = {MODEL: patched, INTERFACES: protocol}
    assert_codemod(Eagle3Backbone, before, UNCHANGED, Status.PRESENT, options=OPTIONS)


def test_a_class_that_inherits_the_interface_through_a_local_base_is_present():
    model = """
    from .interfaces import SupportsEagle3


    class Glm4MoeModel(nn.Module):
        def forward(self, input_ids, positions):
            return self.embed(input_ids)


    class Base(nn.Module, SupportsEagle3):
        pass


    class Glm4MoeForCausalLM(Base):
        def __init__(self, config):
            self.model = Glm4MoeModel(config)
    """
    before = {MODEL: model, INTERFACES: MIXIN_PROTOCOL}
    assert_codemod(Eagle3Backbone, before, UNCHANGED, Status.PRESENT, options=OPTIONS)


def test_backbone_under_another_attribute_gets_explicit_methods_with_the_mixin():
    model = """
    from .interfaces import SupportsPP


    class Glm4MoeModel(nn.Module):
        def forward(self, input_ids, positions):
            hidden_states, residual = self.embed(input_ids), None
            for layer in islice(self.layers, self.start_layer, self.end_layer):
                hidden_states, residual = layer(positions, hidden_states, residual)
            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states


    class Glm4MoeForCausalLM(nn.Module, SupportsPP):
        def __init__(self, config):
            self.decoder = Glm4MoeModel(config)
    """
    patched = """
    from .interfaces import SupportsPP, EagleModelMixin, SupportsEagle3


    class Glm4MoeModel(nn.Module, EagleModelMixin):
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


    class Glm4MoeForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
        def __init__(self, config):
            self.decoder = Glm4MoeModel(config)

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.decoder._set_aux_hidden_state_layers(layers)

        def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
            num_layers = len(self.decoder.layers)
            return (2, num_layers // 2, num_layers - 3)
    """
    assert_codemod(
        Eagle3Backbone,
        {MODEL: model, INTERFACES: MIXIN_PROTOCOL},
        {MODEL: patched},
        Status.APPLIED,
        options={**OPTIONS, "attribute": "decoder"},
    )


@pytest.mark.parametrize(
    ("missing", "detail"),
    [
        (INTERFACES, f"{INTERFACES} has no SupportsEagle3 protocol"),
        (MODEL, f"no {MODEL} in this release"),
    ],
)
def test_a_missing_file_is_unsupported_naming_it(missing, detail):
    before = {k: v for k, v in {MODEL: DECODER, INTERFACES: MIXIN_PROTOCOL}.items() if k != missing}
    outcome = assert_codemod(Eagle3Backbone, before, UNCHANGED, Status.UNSUPPORTED, options=OPTIONS)
    assert outcome.detail == detail


def test_a_missing_class_is_unsupported_naming_it():
    before = {MODEL: DECODER, INTERFACES: MIXIN_PROTOCOL}
    options = {**OPTIONS, "backbone": "Nope"}
    outcome = assert_codemod(Eagle3Backbone, before, UNCHANGED, Status.UNSUPPORTED, options=options)
    assert outcome.detail == f"{MODEL} has no class Nope"


@pytest.mark.parametrize(
    ("model", "what"),
    [
        (
            """
            class Glm4MoeModel(nn.Module):
                def forward(self, input_ids, positions):
                    hidden_states, residual = self.embed(input_ids), None
                    for layer in islice(self.layers, self.start_layer, self.end_layer):
                        hidden_states = layer(positions, hidden_states)
                    hidden_states, _ = self.norm(hidden_states, residual)
                    return hidden_states


            class Glm4MoeForCausalLM(nn.Module):
                pass
            """,
            "expected `hidden_states, residual = layer(...)` in the loop",
        ),
        (
            """
            class Glm4MoeModel(nn.Module):
                def forward(self, input_ids, positions):
                    hidden_states, residual = self.embed(input_ids), None
                    for layer in islice(self.blocks, self.start_layer, self.end_layer):
                        hidden_states, residual = layer(positions, hidden_states, residual)
                    hidden_states, _ = self.norm(hidden_states, residual)
                    return hidden_states


            class Glm4MoeForCausalLM(nn.Module):
                pass
            """,
            "expected one loop over self.layers, found 0",
        ),
        (
            """
            class Glm4MoeModel(nn.Module):
                def forward(self, input_ids, positions):
                    hidden_states, residual = self.embed(input_ids), None
                    for layer in islice(self.layers, self.start_layer, self.end_layer):
                        hidden_states, residual = layer(positions, hidden_states, residual)
                    return hidden_states, residual


            class Glm4MoeForCausalLM(nn.Module):
                pass
            """,
            "expected it to end in `return hidden_states`",
        ),
    ],
)
def test_an_unknown_loop_shape_fails_naming_file_line_and_candidate(model, what):
    before = {MODEL: model, INTERFACES: MIXIN_PROTOCOL}
    outcome = assert_codemod(Eagle3Backbone, before, UNCHANGED, Status.FAILED, options=OPTIONS)
    where = f"{MODEL}: {what} in Glm4MoeModel.forward; nearest candidate: "
    assert outcome.detail.startswith(where)
    assert f"{MODEL}:" in outcome.detail.split("nearest candidate: ")[1]


def test_the_protocol_is_read_from_interfaces():
    methods = read_protocol(dedent(METHODS_PROTOCOL))
    mixin = read_protocol(dedent(MIXIN_PROTOCOL))
    assert methods is not None and mixin is not None
    assert (methods.getter, methods.mixin) == ("get_eagle3_aux_hidden_state_layers", False)
    assert (mixin.getter, mixin.mixin) == ("get_eagle3_default_aux_hidden_state_layers", True)
    assert read_protocol("class SupportsEagle(Protocol):\n    pass\n") is None


def test_the_module_option_must_be_a_python_path():
    """The field's parser refuses it as a patchset is read: the one place that checks it."""
    problems: list[str] = []
    raw = {"module": "glm4_moe", "causal_lm": "A", "backbone": "B"}
    assert schema.read(BackboneOptions, raw, "patches[0]", problems) is None
    assert problems == [
        "patches[0].module: 'glm4_moe' is not a .py path inside the tree like "
        "'vllm/config/model.py'"
    ]


WRAPPER = "vllm/model_executor/models/glm4_moe_mm.py"
WRAPPER_OPTIONS = {**OPTIONS, "wrapper_module": WRAPPER, "wrapper_class": "Glm4MoeMmModel"}
# A multimodal wrapper holding the causal LM from the registry, as Gemma 3's does.
WRAPPER_BEFORE = """
from .interfaces import SupportsMultiModal


class Glm4MoeMmModel(nn.Module, SupportsMultiModal):
    def __init__(self, vllm_config):
        self.language_model = init_vllm_registered_model(vllm_config=vllm_config)
"""


def test_a_wrapper_with_the_mixin_only_subclasses_the_interface():
    """The mixin protocol's defaults find the backbone through ``language_model``."""
    assert_codemod(
        Eagle3Backbone,
        {MODEL: DECODER, INTERFACES: MIXIN_PROTOCOL, WRAPPER: WRAPPER_BEFORE},
        {
            MODEL: DECODER_MIXIN_STYLE,
            WRAPPER: """
from .interfaces import SupportsMultiModal, SupportsEagle3


class Glm4MoeMmModel(nn.Module, SupportsMultiModal, SupportsEagle3):
    def __init__(self, vllm_config):
        self.language_model = init_vllm_registered_model(vllm_config=vllm_config)
""",
        },
        Status.APPLIED,
        options=WRAPPER_OPTIONS,
    )


def test_a_wrapper_without_the_mixin_delegates_setter_and_getter():
    assert_codemod(
        Eagle3Backbone,
        {MODEL: DECODER, INTERFACES: METHODS_PROTOCOL, WRAPPER: WRAPPER_BEFORE},
        {
            MODEL: DECODER_METHODS_STYLE,
            WRAPPER: """
from .interfaces import SupportsMultiModal, SupportsEagle3


class Glm4MoeMmModel(nn.Module, SupportsMultiModal, SupportsEagle3):
    def __init__(self, vllm_config):
        self.language_model = init_vllm_registered_model(vllm_config=vllm_config)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        return self.language_model.get_eagle3_aux_hidden_state_layers()
""",
        },
        Status.APPLIED,
        options=WRAPPER_OPTIONS,
    )


def test_a_wrapper_lacking_the_interface_over_a_supported_causal_lm_is_still_patched():
    outcome = assert_codemod(
        Eagle3Backbone,
        {MODEL: DECODER_MIXIN_STYLE, INTERFACES: MIXIN_PROTOCOL, WRAPPER: WRAPPER_BEFORE},
        {
            WRAPPER: WRAPPER_BEFORE.replace(
                "import SupportsMultiModal\n", "import SupportsMultiModal, SupportsEagle3\n"
            ).replace("SupportsMultiModal):", "SupportsMultiModal, SupportsEagle3):")
        },
        Status.APPLIED,
        options=WRAPPER_OPTIONS,
    )
    assert outcome.detail == "Glm4MoeMmModel subclasses SupportsEagle3"


def test_a_missing_wrapper_class_is_unsupported_naming_it():
    before = {MODEL: DECODER, INTERFACES: MIXIN_PROTOCOL, WRAPPER: "class Other:\n    pass\n"}
    outcome = assert_codemod(
        Eagle3Backbone, before, UNCHANGED, Status.UNSUPPORTED, options=WRAPPER_OPTIONS
    )
    assert f"{WRAPPER} has no class Glm4MoeMmModel" in outcome.detail


def test_a_wrapper_module_without_its_class_is_a_bad_option():
    with pytest.raises(ValueError, match="wrapper_module and wrapper_class go together"):
        BackboneOptions(**OPTIONS, wrapper_module=WRAPPER)


# Step-3.5's backbone: its layers add their own residual and return one tensor, and no residual
# is carried anywhere in the forward; the norm is the causal LM's compute_logits'.
SINGLE_STATE = """
from .interfaces import SupportsPP


class Step3p5Model(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)

    def forward(self, input_ids, positions):
        hidden_states = self.embed(input_ids)
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states = layer(positions, hidden_states)
        return hidden_states


class Step3p5ForCausalLM(nn.Module, SupportsPP):
    def __init__(self, config):
        self.model = Step3p5Model(config)
"""

SINGLE_STATE_METHODS_STYLE = """
from .interfaces import SupportsPP, SupportsEagle3


class Step3p5Model(nn.Module):
    def __init__(self, config):
        self.layers = make_layers(config)
        self.aux_hidden_state_layers: tuple[int, ...] = ()

    def forward(self, input_ids, positions):
        hidden_states = self.embed(input_ids)
        aux_hidden_states = []
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            if i in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states)
            hidden_states = layer(positions, hidden_states)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class Step3p5ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, config):
        self.model = Step3p5Model(config)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)
"""

SINGLE_STATE_MIXIN_STYLE = """
from .interfaces import SupportsPP, EagleModelMixin, SupportsEagle3


class Step3p5Model(nn.Module, EagleModelMixin):
    def __init__(self, config):
        self.layers = make_layers(config)

    def forward(self, input_ids, positions):
        hidden_states = self.embed(input_ids)
        aux_hidden_states = self._maybe_add_hidden_state(
            [], self.start_layer, hidden_states, None
        )
        for i in range(self.start_layer, self.end_layer):
            layer = self.layers[i]
            hidden_states = layer(positions, hidden_states)
            self._maybe_add_hidden_state(
                aux_hidden_states, i + 1, hidden_states, None
            )

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class Step3p5ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def __init__(self, config):
        self.model = Step3p5Model(config)
"""

SINGLE_STATE_OPTIONS = {
    "module": MODEL,
    "causal_lm": "Step3p5ForCausalLM",
    "backbone": "Step3p5Model",
}


@pytest.mark.parametrize(
    ("protocol", "after"),
    [
        (METHODS_PROTOCOL, SINGLE_STATE_METHODS_STYLE),
        (MIXIN_PROTOCOL, SINGLE_STATE_MIXIN_STYLE),
    ],
)
def test_a_loop_of_one_state_keeps_that_state_its_residual_added(protocol, after):
    before = {MODEL: SINGLE_STATE, INTERFACES: protocol}
    options = SINGLE_STATE_OPTIONS
    assert_codemod(Eagle3Backbone, before, {MODEL: after}, Status.APPLIED, options=options)
    again = {MODEL: after, INTERFACES: protocol}
    assert_codemod(Eagle3Backbone, again, UNCHANGED, Status.PRESENT, options=options)
