"""The acceptance proof's verdict: the trained drafter accepts through the patched server, its
outputs equal the baseline's, and the same drafter blind to the aux states accepts less.

Speculative decoding keeps greedy outputs whatever the drafter proposes, so identical outputs
and drafts > 0 hold for a drafter fed zeros too; acceptance is what shows it is fed. When the
proof fails, the verdict names the part: ``training`` (the drafter did not learn: held-out
top-1), ``serving`` (a run failed, did not draft or changed an output), ``aux states`` (it
learned, but the server feeds it something else than it was trained on: low acceptance, or no
more than the blind control's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from patcher.errors import PatcherError
from patcher.serving.cpu import CpuReport, RunResult

BASELINE = "baseline"
TRAINED = "trained+eagle3"
CONTROL = "control+eagle3"
"""The same drafter with its ``fc`` zeroed: it drafts from token embeddings alone."""
MIN_ACCEPTANCE_LENGTH = 2.5
MIN_CONTROL_GAP = 0.5
"""How much longer the trained drafter's acceptance length must be than the blind control's."""
MIN_HELD_OUT_TOP1 = 0.6
"""Below this on the first draft step, the drafter learned too little to prove anything."""


def text_config(files: dict[str, bytes]) -> dict[str, Any]:
    """A model folder's ``config.json`` (its text model's, for a multimodal one)."""
    try:
        config = json.loads(files["config.json"])
    except (KeyError, ValueError) as error:
        raise PatcherError(f"no readable config.json ({type(error).__name__})") from error
    return dict(config.get("text_config") or config)


def check_fit(target: dict[str, bytes], drafter: dict[str, bytes]) -> None:
    """A drafter that cannot read the target's states or tokens is refused before training:
    it shares the target's embedding (hidden size) and drafts in its vocabulary."""
    theirs, ours = text_config(target), text_config(drafter)
    for key in ("hidden_size", "vocab_size"):
        if theirs.get(key) != ours.get(key):
            raise PatcherError(
                f"the drafter does not fit the target: its {key} is {ours.get(key)}, "
                f"the target's {theirs.get(key)}"
            )


@dataclass(frozen=True)
class ProofVerdict:
    """What a served proof found, in the words the acceptance proof and the doctor's served proof
    share: the report and the command line read both alike."""

    passed: bool
    failed_part: str | None
    """The first part that failed (each proof names its own parts); None when it passed."""
    problems: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed_part": self.failed_part,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Acceptance(ProofVerdict):
    """The acceptance proof's verdict; its parts: ``training``, ``serving``, ``aux states``."""

    acceptance_length: float | None
    control_length: float | None
    held_out_top1: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {
            "acceptance_length": self.acceptance_length,
            "control_acceptance_length": self.control_length,
            "held_out_top1": list(self.held_out_top1),
            "bar": {
                "acceptance_length": MIN_ACCEPTANCE_LENGTH,
                "control_gap": MIN_CONTROL_GAP,
                "held_out_top1": MIN_HELD_OUT_TOP1,
            },
        }


def length_of(run: RunResult | None) -> float | None:
    if run is None or run.spec_decode is None or run.spec_decode.drafts <= 0:
        return None
    return round(run.spec_decode.mean_acceptance_length, 3)


def held_out_top1(training: dict[str, Any]) -> tuple[float, ...]:
    """The trainer's held-out top-1 of the drafter, by draft step."""
    return tuple(float(t) for t in training.get("drafter", {}).get("held_out_top1", ()))


def training_problem(top1: tuple[float, ...]) -> str | None:
    """Why a drafter proves nothing when served: it learned too little; None if it learned."""
    if top1 and top1[0] >= MIN_HELD_OUT_TOP1:
        return None
    first = f"{top1[0]:.2f}" if top1 else "none"
    return f"held-out top-1 {first} at draft step 1, below {MIN_HELD_OUT_TOP1}"


def serving_problems(runs: dict[str, RunResult], labels: tuple[str, ...]) -> list[str]:
    """What went wrong in the speculative runs ``labels`` name: one that did not serve, did
    not draft, or answered a greedy request otherwise than the baseline."""
    problems = []
    for label in labels:
        run = runs.get(label)
        if run is None or run.error is not None:
            said = run.barrier or run.error if run else "not run"
            problems.append(f"{label} did not serve: {said}")
            continue
        if run.spec_decode is None or run.spec_decode.drafts <= 0:
            problems.append(f"{label} served without a draft")
        same, total = run.identical or (0, 0)
        if total == 0 or same != total:
            problems.append(f"{label}: {same} of {total} greedy outputs as the baseline")
    return problems


def judge(report: CpuReport, training: dict[str, Any]) -> Acceptance:
    """The verdict on the three served runs, with the trainer's held-out top-1 beside."""
    runs = {result.plan.label: result for result in report.results}
    top1 = held_out_top1(training)
    length, blind = length_of(runs.get(TRAINED)), length_of(runs.get(CONTROL))
    serving = serving_problems(runs, (TRAINED, CONTROL))
    learned = training_problem(top1)
    if learned is not None:
        return Acceptance(False, "training", (learned, *serving), length, blind, top1)
    if serving:
        return Acceptance(False, "serving", tuple(serving), length, blind, top1)
    assert length is not None and blind is not None
    aux = []
    if length < MIN_ACCEPTANCE_LENGTH:
        aux.append(
            f"acceptance length {length:.2f}, below {MIN_ACCEPTANCE_LENGTH}, though the drafter "
            f"predicts the target held out at top-1 {top1[0]:.2f}"
        )
    if length - blind < MIN_CONTROL_GAP:
        aux.append(
            f"acceptance length {length:.2f} against {blind:.2f} with fc zeroed: "
            f"less than {MIN_CONTROL_GAP} apart, so the aux states do not help it"
        )
    return Acceptance(not aux, "aux states" if aux else None, tuple(aux), length, blind, top1)
