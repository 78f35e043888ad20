"""eagle3-v2-nested-ids on literal before/after snippets of the V2 runner's id reader."""

from __future__ import annotations

from codemod_helpers import UNCHANGED, MemorySource, assert_codemod

from patcher.codemods import signatures
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
            layer_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
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


def run(source: str) -> dict:
    """The patched reader's namespace, the reader executed as the release would run it."""
    namespace: dict = {"SpeculativeConfig": object}
    exec(compile(source, PATH, "exec"), namespace)
    return namespace


def test_the_reader_falls_back_to_eagle_configs_ids_before_its_final_return():
    outcome = assert_codemod(
        Eagle3V2NestedIds, {PATH: READER}, {PATH: READER_PATCHED}, Status.APPLIED
    )
    assert "eagle_config's eagle_aux_hidden_state_layer_ids" in outcome.detail


def test_reapplying_is_a_no_op():
    assert_codemod(Eagle3V2NestedIds, {PATH: READER_PATCHED}, UNCHANGED, Status.PRESENT)


def test_the_patched_reader_reads_nested_ids_and_keeps_every_earlier_precedence():
    from types import SimpleNamespace

    from codemod_helpers import dedent

    def spec(**config):
        return SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=SimpleNamespace(**config)))

    official = run(dedent(READER))["get_eagle3_aux_layers_from_config"]
    patched = run(dedent(READER_PATCHED))["get_eagle3_aux_layers_from_config"]
    nested = spec(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
    assert official(nested) is None
    assert patched(nested) == (1, 29, 57)
    both = spec(
        eagle_aux_hidden_state_layer_ids=[2, 30, 58],
        eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "layer_ids": [3]},
    )
    assert official(both) == patched(both) == (2, 30, 58)
    layer_ids = spec(eagle_config={"eagle_aux_hidden_state_layer_ids": [1], "layer_ids": [3]})
    assert official(layer_ids) == patched(layer_ids) == (3,)


def test_a_reader_of_the_top_level_field_alone_is_not_needed_and_proven_absent():
    """0.17-0.18's reader, as their V1 runner's: no nested fallback to match; the search of the
    tree finds no reader that falls back to eagle_config without its ids."""
    assert_codemod(Eagle3V2NestedIds, {PATH: TOP_LEVEL_ONLY}, UNCHANGED, Status.NOT_NEEDED)


def test_no_reader_is_unsupported():
    assert_codemod(Eagle3V2NestedIds, {PATH: "import torch\n"}, UNCHANGED, Status.UNSUPPORTED)


def test_a_reader_moved_to_another_module_is_failed_at_its_line():
    moved = "vllm/v1/worker/gpu/spec_decode/eagle3_ids.py"
    outcome = assert_codemod(
        Eagle3V2NestedIds, {PATH: "import torch\n", moved: READER}, UNCHANGED, Status.FAILED
    )
    assert outcome.detail.startswith(f"{moved}:1: def get_eagle3_aux_layers_from_config is here")


def test_a_reader_with_no_final_tuple_return_is_failed():
    odd = READER.replace("return tuple(layer_ids)", "return layer_ids")
    outcome = assert_codemod(Eagle3V2NestedIds, {PATH: odd}, UNCHANGED, Status.FAILED)
    assert "never returns tuple(layer_ids)" in outcome.detail


def test_the_signature_finds_the_unpatched_reader_and_not_the_patched_or_v1s():
    v1 = """
class GPUModelRunner:
    def _get_eagle3_aux_layers_from_config(self):
        hf_config = self.speculative_config.draft_model_config.hf_config
        layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
        if not layer_ids:
            eagle_config = getattr(hf_config, "eagle_config", None)
            if eagle_config and isinstance(eagle_config, dict):
                layer_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
        return layer_ids
"""
    find = signatures.V2_NESTED_IDS_UNREAD.find
    texts = MemorySource({"a.py": READER, "b.py": READER_PATCHED, "c.py": v1, "d.py": TOP_LEVEL_ONLY})
    found = {p: list(find(python_ast(texts.files[p]))) for p in texts.files}
    assert found == {"a.py": [1], "b.py": [], "c.py": [], "d.py": []}
