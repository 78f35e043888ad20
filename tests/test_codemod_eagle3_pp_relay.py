"""eagle3-pp-relay on literal snippets, on the real DeepSeek backbone of every release with the
V2 runner's PP check (0.30.0 to 0.34.0, read from the index), and on mutations of it."""

from __future__ import annotations

import pytest
from codemod_helpers import UNCHANGED, assert_codemod, dedent

from patcher.codemods.base import Status
from patcher.codemods.eagle3_pp_relay import Eagle3PpRelay

MODEL = "vllm/model_executor/models/deepseek_v2.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
RUNNER = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
OPTIONS = {"module": MODEL, "causal_lm": "DeepseekV2ForCausalLM", "backbone": "DeepseekV2Model"}
RELEASES = ("0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
"""Every release whose V2 runner has verify_supports_aux_hidden_states_over_pp."""

RUNNER_CODE = """
def verify_supports_aux_hidden_states_over_pp(model, method):
    inner = _inner_decoder(model)
    if not getattr(inner, "supports_aux_hidden_states_over_pp", False):
        raise ValueError(f"{type(model).__name__} does not support {method} with PP")


def reserve_aux_intermediate_tensor_slots(model):
    pass
"""

MIXIN = """
from bisect import bisect_right


class EagleModelMixin:
    aux_hidden_state_layers = ()
    supports_aux_hidden_states_over_pp = False
    _aux_slot_base_cached = 0
    _aux_upstream_total_cached = 0

    def _set_aux_hidden_state_layers(self, layers):
        self.aux_hidden_state_layers = tuple(sorted(set(layers)))
        self._cache_aux_pp_layout()

    def _cache_aux_pp_layout(self):
        self._aux_slot_base_cached = bisect_right(self.aux_hidden_state_layers, self.start_layer)

    def pack_local_aux_hidden_states(self, aux_hidden_states):
        return {}

    def collect_remote_aux_hidden_states(self, intermediate_tensors):
        return []
"""

BACKBONE = """
from .interfaces import SupportsEagle3, SupportsPP


class DeepseekV2Model(nn.Module):
    fall_back_to_pt_during_load = False

    def __init__(self):
        self.aux_hidden_state_layers = tuple[int, ...]()

    def forward(self, input_ids, positions, intermediate_tensors, inputs_embeds=None):
        h = intermediate_tensors["hidden_states"]
        r = intermediate_tensors["residual"]
        aux = []
        for idx, layer in enumerate(self.layers[self.start_layer :], start=self.start_layer):
            if idx in self.aux_hidden_state_layers:
                aux.append(h + r)
            h, r = layer(positions, h, r)
        if not get_pp_group().is_last_rank:
            return IntermediateTensors(
                {"hidden_states": h, "residual": r}
            )
        if self.end_layer in self.aux_hidden_state_layers:
            aux.append(h + r)
        h, _ = self.norm(h, r)
        if len(aux) > 0:
            return h, aux
        return h


class DeepseekV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = layers
"""

LAYOUT_METHOD = """    def _cache_aux_pp_layout(self) -> None:
        # This backbone takes each aux state at the input of the layer it names, so the state
        # at a stage boundary is the later stage's: the stages before hold the ids below
        # start_layer, where the mixin counts the boundary to them too.
        super()._cache_aux_pp_layout()
        if self._aux_slot_base_cached:
            from bisect import bisect_left

            upstream = bisect_left(self.aux_hidden_state_layers, self.start_layer)
            if self._aux_upstream_total_cached:
                self._aux_upstream_total_cached = upstream
            self._aux_slot_base_cached = upstream

"""
"""The method the patch adds to the backbone, as written into a class."""

BACKBONE_RELAYING = (
    """
from .interfaces import SupportsEagle3, SupportsPP, EagleModelMixin


class DeepseekV2Model(nn.Module, EagleModelMixin):
    fall_back_to_pt_during_load = False
    # Aux states taken on a stage that is not the last travel in its IntermediateTensors.
    supports_aux_hidden_states_over_pp = True

    def __init__(self):
        self.aux_hidden_state_layers = tuple[int, ...]()

    def forward(self, input_ids, positions, intermediate_tensors, inputs_embeds=None):
        h = intermediate_tensors["hidden_states"]
        r = intermediate_tensors["residual"]
        remote_aux_hidden_states = self.collect_remote_aux_hidden_states(intermediate_tensors)
        aux = []
        for idx, layer in enumerate(self.layers[self.start_layer :], start=self.start_layer):
            if idx in self.aux_hidden_state_layers:
                aux.append(h + r)
            h, r = layer(positions, h, r)
        if not get_pp_group().is_last_rank:
            return IntermediateTensors(
                {"hidden_states": h, "residual": r, **self.pack_local_aux_hidden_states(aux)}
            )
        if self.end_layer in self.aux_hidden_state_layers:
            aux.append(h + r)
        h, _ = self.norm(h, r)
        aux = remote_aux_hidden_states + aux
        if len(aux) > 0:
            return h, aux
        return h

"""
    + LAYOUT_METHOD
    + """
class DeepseekV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):
    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model._set_aux_hidden_state_layers(layers)
"""
)


def files(model: str = BACKBONE, mixin: str = MIXIN, runner: str = RUNNER_CODE) -> dict[str, str]:
    return {MODEL: model, INTERFACES: mixin, RUNNER: runner}


def run(before: dict[str, str], after=UNCHANGED, status=Status.FAILED):
    return assert_codemod(Eagle3PpRelay, before, after, status, options=OPTIONS)


def test_the_backbone_relays_as_llama_does_and_counts_a_boundary_state_to_the_later_stage():
    outcome = run(files(), {MODEL: BACKBONE_RELAYING}, Status.APPLIED)
    assert "DeepseekV2Model.supports_aux_hidden_states_over_pp = True" in outcome.detail


def test_reapplying_is_present_and_changes_nothing():
    outcome = run(files(BACKBONE_RELAYING), status=Status.PRESENT)
    assert "relays its aux states already" in outcome.detail


def test_a_runner_without_the_pp_check_is_unsupported():
    outcome = run(files(runner="import torch\n"), status=Status.UNSUPPORTED)
    assert "does not relay aux hidden states across pipeline stages" in outcome.detail


def test_a_pp_check_moved_to_another_module_is_failed_at_its_line():
    moved = "vllm/v1/worker/gpu/pp_checks.py"
    before = {**files(runner="import torch\n"), moved: RUNNER_CODE}
    outcome = run(before)
    assert outcome.detail.startswith(f"{moved}:1: def verify_supports_aux_hidden_states_over_pp")


def test_a_release_without_the_runner_module_is_unsupported():
    before = files()
    del before[RUNNER]
    run(before, status=Status.UNSUPPORTED)


def test_a_missing_backbone_is_unsupported_naming_it():
    outcome = run(files(model="import torch\n"), status=Status.UNSUPPORTED)
    assert outcome.detail == f"{MODEL} has no DeepseekV2Model"


BAD_SHAPES = {
    "capture after the layer (the mixin's convention, without the flag)": (
        MODEL,
        """            if idx in self.aux_hidden_state_layers:
                aux.append(h + r)
            h, r = layer(positions, h, r)
""",
        """            h, r = layer(positions, h, r)
            if idx in self.aux_hidden_state_layers:
                aux.append(h + r)
""",
        "before `hidden_states, residual = layer(...)`",
    ),
    "every stage takes its last layer's output": (
        MODEL,
        """        if not get_pp_group().is_last_rank:
            return IntermediateTensors(
                {"hidden_states": h, "residual": r}
            )
        if self.end_layer in self.aux_hidden_state_layers:
            aux.append(h + r)
""",
        """        if self.end_layer in self.aux_hidden_state_layers:
            aux.append(h + r)
        if not get_pp_group().is_last_rank:
            return IntermediateTensors(
                {"hidden_states": h, "residual": r}
            )
""",
        "would be taken twice",
    ),
    "no IntermediateTensors for the next stage": (
        MODEL,
        'IntermediateTensors(\n                {"hidden_states": h, "residual": r}\n            )',
        "None",
        "expected one `return IntermediateTensors({...})`",
    ),
    "a setter of another shape": (
        MODEL,
        "self.model.aux_hidden_state_layers = layers",
        "self.model.aux_hidden_state_layers = tuple(layers)",
        "expected DeepseekV2ForCausalLM.set_aux_hidden_state_layers to be",
    ),
    "the flag set False": (
        MODEL,
        "    fall_back_to_pt_during_load = False\n",
        "    fall_back_to_pt_during_load = False\n    supports_aux_hidden_states_over_pp = False\n",
        "sets supports_aux_hidden_states_over_pp, but not to True",
    ),
    "a mixin counting the boundary otherwise": (
        INTERFACES,
        "bisect_right(self.aux_hidden_state_layers, self.start_layer)",
        "bisect_left(self.aux_hidden_state_layers, self.start_layer)",
        "does not count the states upstream with bisect_right",
    ),
    "a mixin without the packing": (
        INTERFACES,
        "def pack_local_aux_hidden_states",
        "def pack_aux",
        "EagleModelMixin has no pack_local_aux_hidden_states",
    ),
    "no mixin though the runner checks the flag": (
        INTERFACES,
        "class EagleModelMixin:",
        "class EagleMixin:",
        "no EagleModelMixin, though the runner checks",
    ),
}


@pytest.mark.parametrize("shape", BAD_SHAPES, ids=list(BAD_SHAPES))
def test_a_shape_it_does_not_know_is_failed_and_changes_nothing(shape):
    path, old, new, said = BAD_SHAPES[shape]
    before = files()
    text = dedent(before[path])
    assert text.count(old) == 1, old
    before[path] = text.replace(old, new)
    outcome = run(before)
    assert said in outcome.detail


# The real releases: the files each release ships, and what the patch must make of them.

EDITS: tuple[tuple[str, str], ...] = (
    (
        "    SupportsPP,\n)\nfrom .utils import (",
        "    SupportsPP,\n    EagleModelMixin,\n)\nfrom .utils import (",
    ),
    (
        "class DeepseekV2Model(nn.Module):\n    fall_back_to_pt_during_load = False\n",
        "class DeepseekV2Model(nn.Module, EagleModelMixin):\n"
        "    fall_back_to_pt_during_load = False\n"
        "    # Aux states taken on a stage that is not the last travel in its "
        "IntermediateTensors.\n"
        "    supports_aux_hidden_states_over_pp = True\n",
    ),
    (
        "        aux_hidden_states = []\n        for idx, layer in enumerate(\n",
        "        remote_aux_hidden_states = "
        "self.collect_remote_aux_hidden_states(intermediate_tensors)\n"
        "        aux_hidden_states = []\n        for idx, layer in enumerate(\n",
    ),
    (
        '                {"hidden_states": hidden_states, "residual": residual}\n',
        '                {"hidden_states": hidden_states, "residual": residual, '
        "**self.pack_local_aux_hidden_states(aux_hidden_states)}\n",
    ),
    (
        "        hidden_states, _ = self.norm(hidden_states, residual)\n"
        "        if len(aux_hidden_states) > 0:\n",
        "        hidden_states, _ = self.norm(hidden_states, residual)\n"
        "        aux_hidden_states = remote_aux_hidden_states + aux_hidden_states\n"
        "        if len(aux_hidden_states) > 0:\n",
    ),
    (
        "\n\n\nclass DeepseekV2MixtureOfExperts(",
        "\n\n" + LAYOUT_METHOD + "\nclass DeepseekV2MixtureOfExperts(",
    ),
    (
        "        self.model.aux_hidden_state_layers = layers\n",
        "        self.model._set_aux_hidden_state_layers(layers)\n",
    ),
)


def release_files(release, version: str) -> dict[str, str]:
    source = release(version)
    texts = {}
    for path in (MODEL, INTERFACES, RUNNER):
        data = source.read(path)
        assert data is not None, f"{version}: {path}"
        texts[path] = data.decode()
    return texts


def edited(text: str, edits=EDITS) -> str:
    for old, new in edits:
        assert text.count(old) == 1, f"expected once: {old!r}"
        text = text.replace(old, new)
    return text


@pytest.mark.network
@pytest.mark.parametrize("version", RELEASES)
def test_each_release_with_the_pp_check_gets_the_relay_in_its_own_backbone(release, version):
    before = release_files(release, version)
    after = {MODEL: edited(before[MODEL])}
    outcome = run(before, after, Status.APPLIED)
    assert "DeepseekV2ForCausalLM.set_aux_hidden_state_layers sets them through" in outcome.detail
    run({**before, **after}, status=Status.PRESENT)


@pytest.mark.network
def test_0_29_0_refuses_eagle3_with_pp_for_every_model_and_is_unsupported(release):
    before = release_files(release, "0.29.0")
    outcome = run(before, status=Status.UNSUPPORTED)
    assert "no verify_supports_aux_hidden_states_over_pp" in outcome.detail


def swapped(text: str, first: str, second: str) -> str:
    """``text`` with the adjacent blocks starting at ``first`` and at ``second`` swapped."""
    a, b = text.index(first), text.index(second)
    assert a < b and text.count(first) == text.count(second) == 1
    end = b + len(second)
    end = text.index("\n", text.index(")\n", end) if second.endswith("(\n") else end) + 1
    return text[:a] + text[b:end] + text[a:b] + text[end:]


CAPTURE = "            if idx in self.aux_hidden_state_layers:\n"
LAYER_RUNS = "            hidden_states, residual = layer(\n"
SENDS = "        if not get_pp_group().is_last_rank:\n"
END_CAPTURE = (
    "        if self.end_layer in self.aux_hidden_state_layers:\n"
    "            aux_hidden_states.append(hidden_states + residual)\n"
)
FLAG_AFTER = "class DeepseekV2Model(nn.Module):\n    fall_back_to_pt_during_load = False\n"

MUTATIONS = {
    "the capture after the layer runs": (
        MODEL,
        lambda t: swapped(t, CAPTURE, LAYER_RUNS),
        Status.FAILED,
        "before `hidden_states, residual = layer(...)`",
    ),
    "the last layer's output taken on every stage": (
        MODEL,
        lambda t: edited(t, [(END_CAPTURE, ""), (SENDS, END_CAPTURE + SENDS)]),
        Status.FAILED,
        "would be taken twice",
    ),
    "a second loop over the layers": (
        MODEL,
        lambda t: edited(
            t,
            [
                (
                    "        aux_hidden_states = []\n        for idx",
                    "        for _ in self.layers:\n            pass\n"
                    "        aux_hidden_states = []\n        for idx",
                )
            ],
        ),
        Status.FAILED,
        "expected one loop over self.layers",
    ),
    "no aux states returned on the last stage": (
        MODEL,
        lambda t: edited(
            t, [("return hidden_states, aux_hidden_states\n", "return hidden_states\n")]
        ),
        Status.FAILED,
        "expected one `return ..., aux_hidden_states`",
    ),
    "a setter of another shape": (
        MODEL,
        lambda t: edited(
            t,
            [
                (
                    "self.model.aux_hidden_state_layers = layers\n",
                    "self.model.aux_hidden_state_layers = tuple(layers)\n",
                )
            ],
        ),
        Status.FAILED,
        "expected DeepseekV2ForCausalLM.set_aux_hidden_state_layers to be",
    ),
    "the flag set False": (
        MODEL,
        lambda t: edited(
            t, [(FLAG_AFTER, FLAG_AFTER + "    supports_aux_hidden_states_over_pp = False\n")]
        ),
        Status.FAILED,
        "but not to True",
    ),
    "the flag set True upstream": (
        MODEL,
        lambda t: edited(
            t, [(FLAG_AFTER, FLAG_AFTER + "    supports_aux_hidden_states_over_pp = True\n")]
        ),
        Status.PRESENT,
        "relays its aux states already",
    ),
    "a mixin counting the boundary to the later stage": (
        INTERFACES,
        lambda t: edited(
            t,
            [
                (
                    "bisect_right(\n                self.aux_hidden_state_layers",
                    "bisect_left(\n                self.aux_hidden_state_layers",
                )
            ],
        ),
        Status.FAILED,
        "does not count the states upstream with bisect_right",
    ),
    "a runner without the check": (
        RUNNER,
        lambda t: t.replace("verify_supports_aux_hidden_states_over_pp", "verify_something_else"),
        Status.UNSUPPORTED,
        "no verify_supports_aux_hidden_states_over_pp",
    ),
}


@pytest.mark.network
@pytest.mark.parametrize("mutation", MUTATIONS, ids=list(MUTATIONS))
def test_mutations_of_the_real_0_34_0_files_are_refused_or_seen_relaying(release, mutation):
    path, mutate, status, said = MUTATIONS[mutation]
    before = release_files(release, "0.34.0")
    before[path] = mutate(before[path])
    assert before[path] != release_files(release, "0.34.0")[path]
    outcome = run(before, status=status)
    assert said in outcome.detail
