"""eagle3-v2-nested-ids on literal before/after snippets of the V2 runner's id reader."""

from __future__ import annotations

from types import SimpleNamespace

from codemod_helpers import UNCHANGED, MemorySource, assert_codemod, dedent

from patcher.codemods import _signatures as signatures
from patcher.codemods.base import Status, python_ast
from patcher.codemods.eagle3_v2_nested_ids import Eagle3V2NestedIds

PATH = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"

READER = """
def get_eagle3_aux_layers_from_config(
    spec_config: SpeculativeConfig,
) -> tuple[int, ...] | None:
    if not (spec_config and spec_config.draft_model_config):
        return None
    hf_config = spec_config.draft_model_config.hf_config
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        target_layer_ids = getattr(hf_config, "target_layer_ids", None)
        if target_layer_ids:
            layer_ids = [i + 1 for i in target_layer_ids]
    if not layer_ids:
        for config_name in ("dflash_config", "eagle_config"):
            drafter_config = getattr(hf_config, config_name, None)
            if drafter_config and isinstance(drafter_config, dict):
                layer_ids = drafter_config.get("layer_ids")
                if layer_ids:
                    break
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
"""

READER_PATCHED = """
def get_eagle3_aux_layers_from_config(
    spec_config: SpeculativeConfig,
) -> tuple[int, ...] | None:
    if not (spec_config and spec_config.draft_model_config):
        return None
    hf_config = spec_config.draft_model_config.hf_config
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        target_layer_ids = getattr(hf_config, "target_layer_ids", None)
        if target_layer_ids:
            layer_ids = [i + 1 for i in target_layer_ids]
    if not layer_ids:
        for config_name in ("dflash_config", "eagle_config"):
            drafter_config = getattr(hf_config, config_name, None)
            if drafter_config and isinstance(drafter_config, dict):
                layer_ids = drafter_config.get("layer_ids")
                if layer_ids:
                    break
    if not layer_ids:
        eagle_config = getattr(hf_config, "eagle_config", None)
        if eagle_config and isinstance(eagle_config, dict):
            nested_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
            if nested_ids and isinstance(nested_ids, (list, tuple)):
                return tuple(nested_ids)
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
"""

TOP_LEVEL_ONLY = """
def get_eagle3_aux_layers_from_config(spec_config):
    if not (spec_config and spec_config.draft_model_config):
        return None
    hf_config = spec_config.draft_model_config.hf_config
    if not hasattr(hf_config, "eagle_aux_hidden_state_layer_ids"):
        return None
    layer_ids = hf_config.eagle_aux_hidden_state_layer_ids
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
"""

TOP_LEVEL_ONLY_PATCHED = """
def get_eagle3_aux_layers_from_config(spec_config):
    if not (spec_config and spec_config.draft_model_config):
        return None
    hf_config = spec_config.draft_model_config.hf_config
    if not getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None):
        eagle_config = getattr(hf_config, "eagle_config", None)
        if eagle_config and isinstance(eagle_config, dict):
            nested_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
            if nested_ids and isinstance(nested_ids, (list, tuple)):
                return tuple(nested_ids)
    if not hasattr(hf_config, "eagle_aux_hidden_state_layer_ids"):
        return None
    layer_ids = hf_config.eagle_aux_hidden_state_layer_ids
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
"""


def reader(source: str):
    """The reader in ``source``, compiled and run as the release would run it."""
    namespace: dict = {"SpeculativeConfig": object}
    exec(compile(dedent(source), PATH, "exec"), namespace)
    return namespace["get_eagle3_aux_layers_from_config"]


def spec(**config):
    """A stand-in for SpeculativeConfig: the reader reads only draft_model_config.hf_config."""
    return SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=SimpleNamespace(**config)))


NESTED = spec(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
BOTH = spec(
    eagle_aux_hidden_state_layer_ids=[2, 30, 58],
    eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "layer_ids": [3]},
)


def test_the_reader_falls_back_to_eagle_configs_ids_before_its_final_return():
    outcome = assert_codemod(
        Eagle3V2NestedIds, {PATH: READER}, {PATH: READER_PATCHED}, Status.APPLIED
    )
    assert "eagle_config's eagle_aux_hidden_state_layer_ids" in outcome.detail


def test_reapplying_is_a_no_op():
    assert_codemod(Eagle3V2NestedIds, {PATH: READER_PATCHED}, UNCHANGED, Status.PRESENT)


def test_the_patched_reader_reads_nested_ids_and_keeps_every_earlier_precedence():
    official, patched = reader(READER), reader(READER_PATCHED)
    assert official(NESTED) is None
    assert patched(NESTED) == (1, 29, 57)
    assert official(BOTH) == patched(BOTH) == (2, 30, 58)
    layer_ids = spec(eagle_config={"eagle_aux_hidden_state_layer_ids": [1], "layer_ids": [3]})
    assert official(layer_ids) == patched(layer_ids) == (3,)
    assert official(spec()) is patched(spec()) is None


def test_the_older_reader_that_gives_up_without_the_top_level_field_is_patched_before_it():
    """0.17.0 to 0.23.0: ``if not hasattr(...): return None``, while the V1 runner of 0.23.0
    already reads the nested ids (the doctor shows the runners disagree there)."""
    assert_codemod(
        Eagle3V2NestedIds, {PATH: TOP_LEVEL_ONLY}, {PATH: TOP_LEVEL_ONLY_PATCHED}, Status.APPLIED
    )
    official, patched = reader(TOP_LEVEL_ONLY), reader(TOP_LEVEL_ONLY_PATCHED)
    assert official(NESTED) is None
    assert patched(NESTED) == (1, 29, 57)
    assert official(BOTH) == patched(BOTH) == (2, 30, 58)
    assert_codemod(Eagle3V2NestedIds, {PATH: TOP_LEVEL_ONLY_PATCHED}, UNCHANGED, Status.PRESENT)


def test_no_reader_is_unsupported():
    assert_codemod(Eagle3V2NestedIds, {PATH: "import torch\n"}, UNCHANGED, Status.UNSUPPORTED)


def test_a_reader_moved_to_another_module_is_failed_at_its_line():
    moved = "vllm/v1/worker/gpu/spec_decode/eagle3_ids.py"
    outcome = assert_codemod(
        Eagle3V2NestedIds, {PATH: "import torch\n", moved: READER}, UNCHANGED, Status.FAILED
    )
    assert outcome.detail.startswith(f"{moved}:1: the V2 runner's EAGLE-3 id reader, without")


def test_a_reader_with_no_final_tuple_return_is_failed():
    odd = READER.replace("return tuple(layer_ids)", "return layer_ids")
    outcome = assert_codemod(Eagle3V2NestedIds, {PATH: odd}, UNCHANGED, Status.FAILED)
    assert "never returns tuple(layer_ids)" in outcome.detail


def test_the_signature_finds_the_unpatched_readers_and_not_the_patched_or_v1s():
    v1 = """
class GPUModelRunner:
    def _get_eagle3_aux_layers_from_config(self):
        hf_config = self.speculative_config.draft_model_config.hf_config
        if not hasattr(hf_config, "eagle_aux_hidden_state_layer_ids"):
            return None
        return tuple(hf_config.eagle_aux_hidden_state_layer_ids)
"""
    texts = MemorySource(
        {
            "a.py": READER,
            "b.py": READER_PATCHED,
            "c.py": v1,
            "d.py": TOP_LEVEL_ONLY,
            "e.py": TOP_LEVEL_ONLY_PATCHED,
        }
    )
    find = signatures.V2_NESTED_IDS_UNREAD.find
    found = {p: list(find(python_ast(texts.files[p]))) for p in texts.files}
    assert found == {"a.py": [1], "b.py": [], "c.py": [], "d.py": [1], "e.py": []}


FINAL_RETURN = (
    "    if layer_ids and isinstance(layer_ids, (list, tuple)):\n        return tuple(layer_ids)"
)


def test_the_key_read_out_of_another_dict_is_not_eagle_configs_ids():
    """The reader takes ``eagle_aux_hidden_state_layer_ids`` out of ``dflash_config``: the
    key, but not eagle_config's. Not ``present`` (issue 28): the nested read is added."""
    other = READER.replace(
        FINAL_RETURN,
        "    if not layer_ids:\n"
        '        dflash_config = getattr(hf_config, "dflash_config", None) or {}\n'
        '        layer_ids = dflash_config.get("eagle_aux_hidden_state_layer_ids")\n'
        + FINAL_RETURN,
    )
    patched = other.replace(
        FINAL_RETURN,
        "    if not layer_ids:\n"
        '        eagle_config = getattr(hf_config, "eagle_config", None)\n'
        "        if eagle_config and isinstance(eagle_config, dict):\n"
        '            nested_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")\n'
        "            if nested_ids and isinstance(nested_ids, (list, tuple)):\n"
        "                return tuple(nested_ids)\n" + FINAL_RETURN,
    )
    assert other != READER
    outcome = assert_codemod(Eagle3V2NestedIds, {PATH: other}, {PATH: patched}, Status.APPLIED)
    assert "falls back to eagle_config's" in outcome.detail
