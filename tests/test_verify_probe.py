"""The in-venv probe without vLLM: its protocol, its outcomes and its checkpoint shapes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from patcher import checks
from patcher.verify import probe

PROBE = Path(probe.__file__)


def test_the_probe_imports_only_the_standard_library_at_top_level():
    """The venv has vLLM and torch but not patcher: anything else would break the probe."""
    tree = ast.parse(PROBE.read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module.partition(".")[0])
    assert top - {"__future__"} <= sys.stdlib_module_names


def test_one_json_line_on_stdout_even_when_vllm_is_missing(tmp_path):
    done = subprocess.run(
        [sys.executable, "-S", str(PROBE), "speculative-config", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    assert result["check"] == "speculative-config" and result["status"] == "fail"
    assert result["detail"].startswith("error: ModuleNotFoundError: No module named 'vllm'")


def test_every_check_has_a_runner_and_entry_modules():
    assert set(probe.RUNNERS) == set(probe.ENTRY_MODULES) == set(probe.CHECKS)
    assert probe.CHECKS == checks.CHECKS and probe.MODEL_CHECKS == checks.MODEL_CHECKS
    assert probe.CHECKS[:4] == (
        "speculative-config",
        "eagle3-interface",
        "mm-image-token",
        "aux-hidden-states",
    )
    assert all(m.startswith("vllm.") for ms in probe.ENTRY_MODULES.values() for m in ms)


@pytest.mark.parametrize(
    ("raised", "status", "detail"),
    [
        (probe.Barrier("Eagle3 is only supported for ['llama']"), "fail", "barrier: Eagle3"),
        (probe.Skip("no MLA drafter class"), "skip", "no MLA drafter class"),
        (probe.ProbeError("target is not kimi_k2"), "fail", "error: ProbeError: target is not"),
        (KeyError("layers"), "fail", "error: KeyError: 'layers' (at test_verify_probe.py:"),
    ],
)
def test_outcomes(monkeypatch, tmp_path, raised, status, detail):
    def check(workdir: Path) -> str:
        raise raised

    monkeypatch.setitem(probe.RUNNERS, "aux-hidden-states", check)
    result = probe.run("aux-hidden-states", tmp_path)
    assert result["status"] == status and result["detail"].startswith(detail)


def test_a_passing_check_reports_its_text_and_time(monkeypatch, tmp_path):
    monkeypatch.setitem(probe.RUNNERS, "eagle3-interface", lambda workdir: "all good")
    result = probe.run("eagle3-interface", tmp_path)
    assert result == {
        "check": "eagle3-interface",
        "status": "pass",
        "detail": "all good",
        "seconds": result["seconds"],
    }


def test_pydantic_wrapping_is_trimmed_from_the_barrier_line():
    text = (
        "1 validation error for SpeculativeConfig\n"
        "  Value error, Eagle3 is only supported for ['llama'] models. Got x='kimi_k2' "
        "[type=value_error, input_value=ArgsKwargs((), {})]"
    )
    assert probe._matching_line(text, "only supported for") == (
        "Eagle3 is only supported for ['llama'] models. Got x='kimi_k2'"
    )
    assert probe._matching_line("something else", "only supported for") is None


def test_the_target_is_kimi_shaped_without_an_image_token_index(tmp_path):
    path = Path(probe.write_checkpoint(tmp_path, "kimi", probe.KIMI_K25_CONFIG))
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert config["model_type"] == "kimi_k25"
    assert config["text_config"]["model_type"] == "kimi_k2"
    assert config["media_placeholder_token_id"] == 163605
    assert "image_token_index" not in json.dumps(config)
    assert sorted(p.name for p in path.iterdir()) == ["config.json"]


def test_the_drafters_are_eagle3_heads_one_of_them_with_mla():
    assert probe.EAGLE3_DRAFTER_CONFIG["architectures"] == ["LlamaForCausalLMEagle3"]
    mla = probe.MLA_DRAFTER_CONFIG
    assert mla["architectures"] == ["Eagle3DeepseekV3ForCausalLM"]
    assert mla["model_type"] == "kimi_k2" and mla["kv_lora_rank"]
    assert mla["num_hidden_layers"] == 1


def test_a_model_check_without_its_model_cannot_run(tmp_path):
    result = probe.run("eagle3-backbone", tmp_path)
    assert result["status"] == "fail"
    assert result["detail"] == (
        "error: ProbeError: eagle3-backbone needs --model "
        "MODULE:CAUSAL_LM:BACKBONE:ATTRIBUTE[:WRAPPER_MODULE:WRAPPER]"
        f" (at probe.py:{result['detail'].rsplit(':', 1)[1]}"
    )


def test_one_line_per_check_in_order_from_one_process(tmp_path):
    done = subprocess.run(
        [sys.executable, "-S", str(PROBE), "mla-drafter", "speculative-config", "--workdir", "w"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert [json.loads(line)["check"] for line in done.stdout.splitlines()] == [
        "mla-drafter",
        "speculative-config",
    ]


class Held:
    pass


class Wrapper:
    def __init__(self, config):
        self.config = config
        if config:
            self.language_model = Held(
                config,
            )


def test_the_class_a_wrapper_holds_is_read_from_its_own_init():
    assert probe._assigned_class(Wrapper, "language_model") is Held
    with pytest.raises(probe.ProbeError, match=r"cannot tell what Wrapper\.__init__ assigns"):
        probe._assigned_class(Wrapper, "vision_tower")


def test_a_replaced_module_attribute_is_put_back_after_the_check(monkeypatch):
    def check(workdir):
        probe.replace(json, "dumps", None)
        probe.replace(json, "not_there", 1)
        raise probe.Barrier("seen")

    monkeypatch.setitem(probe.RUNNERS, "speculative-config", check)
    dumps = json.dumps
    assert probe.run("speculative-config", Path("."))["detail"] == "barrier: seen"
    assert json.dumps is dumps and not hasattr(json, "not_there")


def _module_with(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def test_pipeline_state_is_single_rank_where_the_inherited_method_looks_it_up(monkeypatch):
    """vLLM 0.33.0's EagleProposer inherits load_model from llm_base_proposer, whose
    get_pp_group the probe must replace; replacing only eagle's left a real process-group
    lookup ('pipeline model parallel group is not initialized')."""

    def uninitialised():
        raise AssertionError("pipeline model parallel group is not initialized")

    base = _module_with("fake_vllm_base_proposer", get_pp_group=uninitialised)
    leaf = _module_with("fake_vllm_eagle")  # imports no get_pp_group, like 0.33.0's eagle.py
    exec(
        "class Base:\n    def load_model(self):\n        return get_pp_group().world_size\n",
        base.__dict__,
    )
    leaf.Proposer = type("Proposer", (base.Base,), {"__module__": leaf.__name__})
    for module in (base, leaf):
        monkeypatch.setitem(sys.modules, module.__name__, module)

    def check(workdir):
        replaced = probe._single_rank_for(leaf.Proposer)
        return f"{replaced} world size {leaf.Proposer().load_model()}"

    monkeypatch.setitem(probe.RUNNERS, "mm-image-token", check)
    result = probe.run("mm-image-token", Path("."))
    assert result["detail"] == "['fake_vllm_base_proposer'] world size 1"
    assert base.get_pp_group is uninitialised and not hasattr(leaf, "get_pp_group")


def test_a_proposer_whose_modules_import_no_pipeline_state_cannot_be_probed(monkeypatch):
    leaf = _module_with("fake_vllm_eagle_alone")
    leaf.Proposer = type("Proposer", (), {"__module__": leaf.__name__})
    monkeypatch.setitem(sys.modules, leaf.__name__, leaf)
    with pytest.raises(probe.ProbeError, match="no module of Proposer's classes imports"):
        probe._single_rank_for(leaf.Proposer)


def test_a_release_without_a_checked_module_skips_and_a_broken_import_still_fails(
    tmp_path, monkeypatch
):
    """vLLM 0.34.0 has no V1 GPU runner and so no ``vllm.v1.spec_decode.eagle``: the
    multimodal-branch check does not apply there. A module that is there but cannot import what
    it needs (0.34.0's model code without xgrammar) is a failure, not a skip."""
    monkeypatch.setattr(probe, "_vllm_version", lambda: "0.34.0")  # no vLLM in the test venv
    with pytest.raises(probe.Skip, match=r"0\.34\.0 has no patcher_absent_release\.eagle \(its"):
        probe._release_module("patcher_absent_release.eagle", "its proposer")
    (tmp_path / "present_but_broken.py").write_text("import patcher_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="patcher_absent_dependency"):
        probe._release_module("present_but_broken", "a module")
