"""``patcher doctor``: drafter configs in the shapes public drafters ship, read against real
releases (fetched by range from the index, cached), and bad input refused in one line.

The configs and the tiny safetensors files are written here; every answer about what a runner
feeds comes from running the release's own id-reading function (``patcher.drafter_ids``).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher import doctor
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.sources.directory import DirectorySource

KIMI_LAYERS = 61
KIMI = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "num_hidden_layers": KIMI_LAYERS,
        "hidden_size": 7168,
        "vocab_size": 163840,
    },
}
"""Kimi-K2.5's config as far as the doctor reads it (a DeepSeek-V3 text model behind vision)."""

LLAMA_LAYERS = 80
LLAMA_70B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": LLAMA_LAYERS,
    "hidden_size": 8192,
    "vocab_size": 128256,
}
"""Llama-3.3-70B-Instruct, the target of vllm#50170's drafter."""

MLA_DRAFTER = {
    "architectures": ["Eagle3DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "hidden_size": 7168,
    "vocab_size": 163840,
    "num_hidden_layers": 1,
    "kv_lora_rank": 512,
}
"""An MLA EAGLE-3 drafter for Kimi-K2.5 as vLLM's recipe names it."""

LLAMA_DRAFTER = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 8192,
    "vocab_size": 128256,
    "draft_vocab_size": 128256,
    "num_hidden_layers": 1,
    "num_attention_heads": 64,
    "intermediate_size": 28672,
}
"""nvidia/Llama-3.3-70B-Instruct-Eagle3's shape: no aux layer ids (vllm#50170)."""

NESTED_IDS = [3, 31, 57]


def write_folder(folder: Path, config: dict, tensors: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    if tensors is not None:
        write_safetensors(folder / "model.safetensors", tensors)
    return folder


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A real safetensors file: the 8-byte length, the JSON header, zeroed data."""
    sizes = {"F16": 2, "BF16": 2, "F32": 4, "I64": 8}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + count * sizes[dtype]],
        }
        offset += count * sizes[dtype]
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


@pytest.fixture
def kimi(tmp_path) -> Path:
    return write_folder(tmp_path / "kimi", KIMI)


@pytest.fixture
def llama(tmp_path) -> Path:
    return write_folder(tmp_path / "llama", LLAMA_70B)


def run(release, version: str, drafter: Path, model: Path, **options) -> doctor.Diagnosis:
    with release(version) as source:
        return doctor.diagnose(source, doctor.read_inputs(drafter, model), **options)


def feeds(diagnosis: doctor.Diagnosis) -> dict[str, tuple[tuple[int, ...] | None, str]]:
    return {f.runner: (f.ids, f.found_in) for f in diagnosis.feeds}


def kinds(diagnosis: doctor.Diagnosis) -> set[str]:
    return {f.kind for f in diagnosis.findings}


DEFAULT_KIMI = (2, KIMI_LAYERS // 2, KIMI_LAYERS - 3)
DEFAULT_LLAMA = (2, 40, 77)
NESTED_FIELD = "eagle_config.eagle_aux_hidden_state_layer_ids"


@pytest.mark.network
@pytest.mark.parametrize(
    ("version", "v1", "v2", "gpu"),
    [
        ("0.17.1", None, None, "V1 (no use_v2_model_runner here"),
        ("0.24.0", NESTED_IDS, DEFAULT_KIMI, "V1 for KimiK25ForConditionalGeneration"),
        ("0.25.0", NESTED_IDS, DEFAULT_KIMI, "V1 for KimiK25ForConditionalGeneration"),
        ("0.33.0", NESTED_IDS, DEFAULT_KIMI, "V2 where Triton is present"),
    ],
)
def test_nested_eagle_config_ids_reach_v1_only_and_v2_gets_the_default(
    release, tmp_path, kimi, version, v1, v2, gpu
):
    """Kimi-K2.5 MLA drafters keep their ids in ``eagle_config``: from 0.24.0 V1 reads them and
    V2 silently takes the default; on 0.17.1 neither reads them and Kimi has no default yet."""
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "eagle_config": {"eagle_aux_hidden_state_layer_ids": NESTED_IDS}},
    )
    diagnosis = run(release, version, drafter, kimi)
    found = feeds(diagnosis)
    assert found["V1"][0] == (tuple(v1) if v1 else None)
    assert found["V2"][0] == v2
    assert diagnosis.gpu_choice.startswith(gpu)
    if v1 is not None:
        assert found["V1"][1] == NESTED_FIELD
        assert found["V2"][1].startswith("default (2, num_layers // 2, num_layers - 3)")
        assert "runners-disagree" in kinds(diagnosis)
        assert "ids-ignored" not in kinds(diagnosis)  # said once, as the disagreement
    else:
        assert "ids-ignored" in kinds(diagnosis)
        assert "the target defines no default" in found["V1"][1]
        assert "target-barriers" in kinds(diagnosis)


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.17.1", "0.24.0", "0.25.0", "0.33.0"])
def test_top_level_ids_reach_both_runners_on_every_release(release, tmp_path, llama, version):
    ids = [2, 41, 76]
    drafter = write_folder(
        tmp_path / "drafter", {**LLAMA_DRAFTER, "eagle_aux_hidden_state_layer_ids": ids}
    )
    diagnosis = run(release, version, drafter, llama)
    field = "eagle_aux_hidden_state_layer_ids"
    assert feeds(diagnosis) == {"V1": (tuple(ids), field), "V2": (tuple(ids), field)}
    assert diagnosis.findings == []


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.17.1", "0.24.0", "0.25.0", "0.33.0"])
def test_no_ids_is_the_silent_default_of_vllm_50170(release, tmp_path, llama, version):
    """nvidia's Llama-3.3-70B drafter names no layers: vLLM uses (2, 40, 77) on every runner;
    the default's home moves from LlamaForCausalLM (0.17.1) to the interface (0.24.0)."""
    drafter = write_folder(tmp_path / "drafter", LLAMA_DRAFTER)
    diagnosis = run(release, version, drafter, llama)
    for ids, found_in in feeds(diagnosis).values():
        assert ids == DEFAULT_LLAMA
        assert found_in.startswith("default (2, num_layers // 2, num_layers - 3)")
    where = "llama.py:LlamaForCausalLM" if version == "0.17.1" else "interfaces.py:SupportsEagle3"
    assert where in diagnosis.feeds[0].found_in
    (finding,) = diagnosis.findings
    assert finding.kind == "no-ids" and "vllm#50170" in finding.message
    assert "inputs of layers 2, 40, 77 of 80" in finding.evidence


@pytest.mark.network
def test_specforge_default_ids_are_a_suspicion_and_fix_converts_only_when_told(
    release, tmp_path, llama, capsys
):
    ids = [1, LLAMA_LAYERS // 2 - 1, LLAMA_LAYERS - 4]
    drafter = write_folder(
        tmp_path / "drafter",
        {**LLAMA_DRAFTER, "eagle_aux_hidden_state_layer_ids": ids},
        {"fc.weight": ("BF16", [8, 8192 * 3])},  # fc's input: 3 states of the target's width
    )
    suspected = run(release, "0.33.0", drafter, llama)
    (finding,) = suspected.findings
    assert (finding.kind, finding.severity) == ("output-convention", "suspicion")
    assert "SpecForge's default [1, n//2-1, n-4] for n = 80" in finding.evidence

    kept = tmp_path / "kept"
    assert doctor.write_fix(suspected, kept)[0].startswith("kept [1, 39, 76] as given")
    assert json.loads((kept / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == ids

    fixed = tmp_path / "fixed"
    argv = ["doctor", f"--drafter={drafter}", f"--model={llama}", "--vllm=0.33.0"]
    assert main([*argv, "--trained-with=specforge", f"--fix={fixed}"]) == 0
    said = capsys.readouterr().out
    assert "fix: [1, 39, 76] -> [2, 40, 77]: outputs of layers (specforge" in said
    written = json.loads((fixed / "config.json").read_text())
    assert written["eagle_aux_hidden_state_layer_ids"] == [2, 40, 77]
    weights, original = fixed / "model.safetensors", drafter / "model.safetensors"
    assert weights.stat().st_ino == original.stat().st_ino  # linked, not copied
    assert (
        json.loads((drafter / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == ids
    )


@pytest.mark.network
def test_fix_moves_nested_ids_to_the_top_so_both_runners_agree(release, tmp_path, kimi, capsys):
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "eagle_config": {"eagle_aux_hidden_state_layer_ids": NESTED_IDS}},
    )
    fixed = tmp_path / "fixed"
    argv = ["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"]
    main([*argv, f"--fix={fixed}"])
    assert f"fix: moved the ids from {NESTED_FIELD} to eagle_aux_hidden_state_layer_ids" in (
        capsys.readouterr().out
    )
    after = run(release, "0.33.0", fixed, kimi)
    assert {ids for ids, _ in feeds(after).values()} == {tuple(NESTED_IDS)}
    assert not {"runners-disagree", "ids-ignored"} & kinds(after)


@pytest.mark.network
@pytest.mark.parametrize(("version", "ignored"), [("0.17.1", True), ("0.33.0", False)])
def test_a_speculators_config_is_read_through_the_releases_own_updater(
    release, tmp_path, llama, version, ignored
):
    """The speculators format wraps the layer config; the release's updater lifts the ids and
    ``norm_before_fc``, which 0.17.1's Eagle3LlamaForCausalLM never reads."""
    config = {
        "speculators_model_type": "eagle3",
        "speculators_version": "0.1.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "verifier": {"architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": {**LLAMA_DRAFTER, "architectures": ["LlamaForCausalLM"]},
        "architectures": ["Eagle3Speculator"],
        "draft_vocab_size": 128256,
        "norm_before_fc": True,
        "eagle_aux_hidden_state_layer_ids": [2, 41, 76],
    }
    drafter = write_folder(tmp_path / "drafter", config)
    diagnosis = run(release, version, drafter, llama)
    assert diagnosis.speculators
    assert {ids for ids, _ in feeds(diagnosis).values()} == {(2, 41, 76)}
    said = [f.message for f in diagnosis.findings if f.kind == "ignored-keys"]
    assert bool(said) == ignored
    if ignored:
        assert "norm_before_fc" in said[0]


@pytest.mark.network
def test_fc_width_that_does_not_fit_the_fed_states_is_a_crash_said_now(release, tmp_path, llama):
    drafter = write_folder(
        tmp_path / "drafter",
        {**LLAMA_DRAFTER, "eagle_aux_hidden_state_layer_ids": [2, 40, 77, 80]},
        {"model.fc.weight": ("BF16", [8, 8192 * 3])},
    )
    diagnosis = run(release, "0.33.0", drafter, llama)
    widths = [f for f in diagnosis.findings if f.kind == "fc-width"]
    assert len(widths) == 2  # each runner feeds 4 states
    assert "32768 wide, the drafter's fc takes 24576" in widths[0].message
    assert "model.fc.weight shape [8, 24576]" in widths[0].evidence
    assert diagnosis.failed


@pytest.mark.network
@pytest.mark.parametrize(("version", "collected"), [("0.24.0", False), ("0.25.0", True)])
def test_an_id_equal_to_the_layer_count_needs_a_release_that_collects_it(
    release, tmp_path, kimi, version, collected
):
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "eagle_aux_hidden_state_layer_ids": [2, 30, KIMI_LAYERS]},
    )
    diagnosis = run(release, version, drafter, kimi)
    assert ("id-equals-layers" in kinds(diagnosis)) != collected
    assert "the last layer's output before the final norm" in (
        doctor.physical(diagnosis.feeds[0].ids, KIMI_LAYERS)
    )


@pytest.mark.network
@pytest.mark.parametrize("with_d2t", [False, True])
def test_a_reduced_draft_vocabulary_needs_its_d2t_tensor(release, tmp_path, llama, with_d2t):
    tensors = {"fc.weight": ("BF16", [8, 8192 * 3])}
    if with_d2t:
        tensors["d2t"] = ("I64", [32000])
    drafter = write_folder(
        tmp_path / "drafter",
        {
            **LLAMA_DRAFTER,
            "draft_vocab_size": 32000,
            "eagle_aux_hidden_state_layer_ids": [2, 40, 77],
        },
        tensors,
    )
    diagnosis = run(release, "0.33.0", drafter, llama)
    assert ("d2t" in kinds(diagnosis)) != with_d2t


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_the_runners_disagreement_over_nested_ids_names_the_v2_patchset(
    release, tmp_path, kimi, version
):
    """Where V2 skips the nested ids V1 reads, the fix names eagle3-aux-ids-v2 (needs-patch on
    every release with the V2 reader); it is no barrier of the target's."""
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "eagle_config": {"eagle_aux_hidden_state_layer_ids": NESTED_IDS}},
    )
    diagnosis = run(release, version, drafter, kimi)
    (disagree,) = [f for f in diagnosis.findings if f.kind == "runners-disagree"]
    assert disagree.fix.startswith("put the ids at the top level")
    fix = f"patcher build-wheel --vllm {version} --patchset eagle3-aux-ids-v2"  # runs as printed
    assert disagree.fix.endswith(f"(needs-patch on vllm {version}): {fix}"), disagree.fix
    barriers = [f.message for f in diagnosis.findings if f.kind == "target-barriers"]
    assert not [m for m in barriers if "eagle3-aux-ids-v2" in m]


@pytest.mark.network
def test_top_level_ids_name_no_runner_patchset(release, tmp_path, kimi):
    drafter = write_folder(
        tmp_path / "drafter", {**MLA_DRAFTER, "eagle_aux_hidden_state_layer_ids": NESTED_IDS}
    )
    diagnosis = run(release, "0.33.0", drafter, kimi)
    assert not [f for f in diagnosis.findings if "eagle3-aux-ids-v2" in f.message + f.fix]


@pytest.mark.network
def test_the_target_barriers_name_the_patchset_that_lifts_them(release, tmp_path, kimi):
    drafter = write_folder(
        tmp_path / "drafter", {**MLA_DRAFTER, "eagle_aux_hidden_state_layer_ids": [2, 30, 58]}
    )
    diagnosis = run(release, "0.33.0", drafter, kimi)
    (barrier,) = [f for f in diagnosis.findings if f.kind == "target-barriers"]
    assert "kimi-k2.5-eagle3-mla is needs-patch there" in barrier.message
    assert "eagle-mla-detect applied" in barrier.evidence
    # the relay across pipeline stages is named for that layout, not as a barrier of every one
    (pp,) = [f for f in diagnosis.findings if f.kind == "pp-barriers"]
    assert "across pipeline stages" in pp.message
    assert "deepseek-pp-eagle3 is needs-patch there" in pp.message


# Bad input: one line, a non-zero exit, nothing written; refused before the index is asked
# (these tests are offline: the index is a closed port).


def refused(argv: list[str], capsys) -> str:
    assert main(argv) != 0
    return one_error_line(capsys)


def test_a_missing_config_is_one_line(tmp_path, kimi, capsys):
    (tmp_path / "drafter").mkdir()
    argv = ["doctor", f"--drafter={tmp_path / 'drafter'}", f"--model={kimi}", "--vllm=0.33.0"]
    assert "has no config.json" in refused(argv, capsys)


def test_a_malformed_config_is_one_line(tmp_path, kimi, capsys):
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text('{"architectures": [')
    argv = ["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"]
    assert "config.json: not valid JSON" in refused(argv, capsys)
    (drafter / "config.json").write_text("[1, 2]")
    assert "a JSON list, not an object" in refused(argv, capsys)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\x01\x02", "shorter than its 8-byte length"),
        (struct.pack("<Q", 1 << 40) + b"{}", "a header of 1099511627776 bytes"),
        (struct.pack("<Q", 100) + b"{}", "truncated safetensors header (2 of 100 bytes)"),
        (struct.pack("<Q", 4) + b"{]}x", "unreadable safetensors header"),
        (struct.pack("<Q", 15) + b'{"fc.weight":1}', "unreadable safetensors header (tensor"),
    ],
)
def test_an_unreadable_safetensors_header_is_one_line_and_nothing_is_written(
    tmp_path, kimi, capsys, data, said
):
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    (drafter / "model.safetensors").write_bytes(data)
    fixed = tmp_path / "fixed"
    argv = ["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0", f"--fix={fixed}"]
    assert said in refused(argv, capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drafter", "kimi"]


def test_a_drafter_for_another_target_is_one_line(tmp_path, kimi, capsys):
    drafter = write_folder(tmp_path / "drafter", LLAMA_DRAFTER)
    argv = ["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"]
    said = refused(argv, capsys)
    assert "is a drafter for another target: its hidden_size is 8192" in said
    assert "the target's hidden_size 7168" in said


def test_fix_refuses_an_existing_folder(tmp_path, kimi, capsys):
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    existing = tmp_path / "out"
    existing.mkdir()
    argv = [
        "doctor",
        f"--drafter={drafter}",
        f"--model={kimi}",
        "--vllm=0.33.0",
        f"--fix={existing}",
    ]
    assert "exists: --fix writes a new folder" in refused(argv, capsys)
    assert list(existing.iterdir()) == []


def test_preflight_refuses_bad_drafter_input_before_any_download_or_engine(tmp_path, kimi, capsys):
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    (drafter / "model.safetensors").write_bytes(struct.pack("<Q", 4) + b"{]}x")
    argv = ["preflight", f"--model={kimi}", f"--drafter={drafter}", "--vllm=0.32.0"]
    assert "unreadable safetensors header" in refused(
        [*argv, f"--workdir={tmp_path / 'w'}"], capsys
    )
    assert not (tmp_path / "w").exists()


@pytest.mark.network
def test_fix_without_ids_writes_the_trainers_default_only_when_told(release, tmp_path, llama):
    drafter = write_folder(tmp_path / "drafter", LLAMA_DRAFTER)
    diagnosis = run(release, "0.33.0", drafter, llama)
    with pytest.raises(PatcherError, match="the drafter names no ids: --fix needs the ids"):
        doctor.write_fix(diagnosis, tmp_path / "unknown")
    told = run(release, "0.33.0", drafter, llama, trained_with="specforge")
    changes = doctor.write_fix(told, tmp_path / "fixed")
    assert changes[0].startswith("named [2, 40, 77]: specforge's default [1, n//2-1, n-4]")
    written = json.loads((tmp_path / "fixed" / "config.json").read_text())
    assert written["eagle_aux_hidden_state_layer_ids"] == [2, 40, 77]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drafter", "fixed", "llama"]


@pytest.mark.network
def test_without_the_target_the_runners_are_still_read(release, tmp_path):
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "eagle_config": {"eagle_aux_hidden_state_layer_ids": NESTED_IDS}},
    )
    with release("0.25.0") as source:
        diagnosis = doctor.diagnose(source, doctor.read_inputs(drafter, None))
    assert feeds(diagnosis)["V1"] == (tuple(NESTED_IDS), NESTED_FIELD)
    assert feeds(diagnosis)["V2"][0] is None and diagnosis.feeds[1].default
    assert diagnosis.gpu_choice.startswith("V2 only for DeepseekV2ForCausalLM, GraniteMoe")


def test_a_reader_of_another_shape_is_said_unreadable_not_guessed(tmp_path, llama):
    """A tree written here (not vLLM's code): one runner's reader loops with ``while``, which the
    interpreter does not follow; the other runner's file is not Python at all."""
    tree = tmp_path / "tree"
    reader = tree / "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    reader.parent.mkdir(parents=True)
    (tree / "vllm/__init__.py").write_text("")
    reader.write_text(
        "def get_eagle3_aux_layers_from_config(spec_config):\n"
        "    hf_config = spec_config.draft_model_config.hf_config\n"
        "    while True:\n"
        "        return getattr(hf_config, 'eagle_aux_hidden_state_layer_ids', None)\n"
    )
    drafter = write_folder(
        tmp_path / "drafter", {**LLAMA_DRAFTER, "eagle_aux_hidden_state_layer_ids": [2, 41, 76]}
    )
    inputs = doctor.read_inputs(drafter, llama)
    with DirectorySource(tree, "0.99.0") as source:
        (feed,) = doctor.diagnose(source, inputs).feeds
    assert feed.ids is None and feed.found_in == "unreadable: line 3: While is outside what is read"

    runner = tree / "vllm/v1/worker/gpu_model_runner.py"
    runner.write_text("def _get_eagle3_aux_layers_from_config(self:\n")
    with DirectorySource(tree, "0.99.0") as source, pytest.raises(PatcherError) as raised:
        doctor.diagnose(source, inputs)
    assert str(raised.value).endswith("vllm/v1/worker/gpu_model_runner.py:1: not valid Python")


HOSTILE_VALUES = ['"4096"', "4096.0", "NaN", "Infinity", "null", "-1", "0", "true", "[4096]", "{}"]
"""A size as a config can spell it wrongly; each was read as absent, and doctor exited 0."""


def typed_keys(config: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every (nested) key of ``config`` patcher reads as a size."""
    from patcher.drafter_files import SIZES

    found = [(*prefix, k) for k in config if k in SIZES]
    for key, value in config.items():
        if isinstance(value, dict):
            found += typed_keys(value, (*prefix, key))
    return found


def spelled(config: dict, path: tuple[str, ...], raw: str) -> str:
    """``config`` as JSON text with the value at ``path`` replaced by the raw JSON ``raw``."""
    marker = "@@hostile@@"
    copy = json.loads(json.dumps(config))
    inner = copy
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = marker
    return json.dumps(copy).replace(f'"{marker}"', raw)


@pytest.mark.parametrize("which", ["drafter", "model"])
def test_every_size_spelled_wrongly_is_refused_in_one_line_naming_it(tmp_path, capsys, which):
    """issue 28: a size that is a string, a float, NaN, null, negative or zero was read as
    absent and doctor exited 0. Every size key of both configs, every such spelling."""
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    model = write_folder(tmp_path / "model", KIMI)
    folder, config = (drafter, MLA_DRAFTER) if which == "drafter" else (model, KIMI)
    argv = ["doctor", f"--drafter={drafter}", f"--model={model}", "--vllm=0.33.0"]
    keys = typed_keys(config)
    assert len(keys) >= 3
    for path in keys:
        for raw in HOSTILE_VALUES:
            (folder / "config.json").write_text(spelled(config, path, raw))
            line = refused(argv, capsys)
            assert ".".join(path) in line and "not a positive integer" in line, (path, raw, line)


def test_every_wrong_value_is_named_at_once(tmp_path, capsys, kimi):
    drafter = write_folder(
        tmp_path / "drafter",
        {**MLA_DRAFTER, "hidden_size": "7168", "draft_vocab_size": -1, "architectures": None},
    )
    (drafter / "config.json").write_text(
        spelled(json.loads((drafter / "config.json").read_text()), ("text_config",), "[1]")
    )
    line = refused(["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"], capsys)
    assert 'hidden_size is "7168"' in line and "draft_vocab_size is -1" in line, line
    assert "text_config is [1], not an object" in line, line


@pytest.mark.parametrize("names", ['"Eagle3"', '[""]', "[1]", '{"a": 1}'])
def test_architectures_not_a_list_of_names_is_refused(tmp_path, capsys, kimi, names):
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    (drafter / "config.json").write_text(spelled(MLA_DRAFTER, ("architectures",), names))
    line = refused(["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"], capsys)
    assert "architectures is" in line and "not a list of class names" in line, line


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_a_config_not_in_utf8_is_refused_as_transformers_would(tmp_path, capsys, kimi, encoding):
    """transformers opens config.json as UTF-8: a UTF-16 file (which json.loads of bytes would
    read) fails there, after the load; doctor says so first."""
    drafter = write_folder(tmp_path / "drafter", MLA_DRAFTER)
    (drafter / "config.json").write_text(json.dumps(MLA_DRAFTER), encoding=encoding)
    line = refused(["doctor", f"--drafter={drafter}", f"--model={kimi}", "--vllm=0.33.0"], capsys)
    assert "config.json: not" in line, line
