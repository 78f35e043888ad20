"""What a CPU serving run with a patched wheel proves, judged from its results.

The results are built here as values (no server runs): the real server's runs are in
test_serving_cpu.py and the serve-cpu sessions; this is the rule they are judged by."""

from __future__ import annotations

from pathlib import Path

import pytest
from serving_helpers import server_run

from patcher.serving.cpu import (
    BASELINE_LABEL,
    OFFICIAL_LABEL,
    PATCHED_LABEL,
    CpuReport,
    CpuSetup,
    RunPlan,
    RunResult,
)
from patcher.serving.load import Load
from patcher.serving.metrics import SpecDecodeCounters
from patcher.serving.venv import ServingVenv
from patcher.torches import LOCAL_DISK, TorchChoice

REFUSED = "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs"


def venv(name: str) -> ServingVenv:
    torch = TorchChoice("torch==2.13.0+cpu", "torch==2.13.0+cpu", LOCAL_DISK)
    path = Path("/nonexistent") / name
    return ServingVenv(path, Path(f"{name}.whl"), "0" * 64, False, 0.0, torch)


def served(label: str, drafts: float = 0, same: int | None = None) -> RunResult:
    run = server_run(8, 4)
    spec = SpecDecodeCounters(drafts, 3 * drafts, 0) if label != BASELINE_LABEL else None
    identical = None if same is None else (same, 8)
    plan = RunPlan(label, venv(label), label != BASELINE_LABEL, label == OFFICIAL_LABEL)
    return RunResult(plan, [], "0.32.0", run, spec, identical=identical)


def died(label: str, barrier: str | None) -> RunResult:
    plan = RunPlan(label, venv(label), True, label == OFFICIAL_LABEL)
    return RunResult(plan, [], error="the server exited with code 1", barrier=barrier)


def report(*results: RunResult) -> CpuReport:
    return CpuReport(CpuSetup("target", "drafter"), Load(), results, ())


def test_the_patched_wheel_drafting_with_every_greedy_output_as_baseline_passes():
    proof = report(
        served(BASELINE_LABEL), died(OFFICIAL_LABEL, REFUSED), served(PATCHED_LABEL, 12, 8)
    ).served_proof()
    assert proof is not None and proof.passed and proof.problems == ()
    assert proof.official_refused == REFUSED


@pytest.mark.parametrize(
    ("patched", "problem"),
    [
        (served(PATCHED_LABEL, 0, 8), "patched+eagle3 served without a single draft"),
        (served(PATCHED_LABEL, 12, 7), "patched+eagle3: 7 of 8 greedy outputs as baseline"),
        (died(PATCHED_LABEL, REFUSED), f"patched+eagle3 did not serve: {REFUSED}"),
        (died(PATCHED_LABEL, None), "patched+eagle3 did not serve: the server exited with code 1"),
    ],
)
def test_a_patched_wheel_that_does_not_draft_or_changes_the_output_fails(patched, problem):
    proof = report(served(BASELINE_LABEL), served(OFFICIAL_LABEL, 12, 8), patched).served_proof()
    assert proof is not None and not proof.passed
    assert proof.problems == (problem,)
    assert proof.official_refused is None  # the official wheel served too


def test_a_run_without_a_patched_wheel_proves_nothing():
    assert report(served(BASELINE_LABEL), served("eagle3", 12, 8)).served_proof() is None


@pytest.mark.parametrize(
    ("official", "problem"),
    [
        (served(OFFICIAL_LABEL, 12, 8), "official+eagle3 did not die, not 'no EAGLE3'"),
        (
            died(OFFICIAL_LABEL, "ValueError: out of memory"),
            "official+eagle3 died saying 'ValueError: out of memory', not 'no EAGLE3'",
        ),
    ],
)
def test_a_patchset_that_expects_the_official_refusal_fails_without_it(official, problem):
    results = (served(BASELINE_LABEL), official, served(PATCHED_LABEL, 12, 8))
    proof = report(*results).served_proof(official_refuses="no EAGLE3")
    assert proof is not None and not proof.passed and proof.problems == (problem,)
    refused = report(served(BASELINE_LABEL), died(OFFICIAL_LABEL, REFUSED), results[2])
    assert refused.served_proof(official_refuses="does not support EAGLE3").passed
    assert not refused.served_proof(official_refuses="no EAGLE3").passed
