"""Preflight: a deployment's own configs, shrunk, served with EAGLE-3 by the real engine on CPU.

Before a 547 GB load: the user's config.json files (architectures, model types, attribute names,
vocabulary kept; layers fewer and narrower) are loaded by vLLM's own engine with random weights,
a few tokens are decoded with the drafter on, and the answer is a pass or the barrier in vLLM's
own words: the last error line of its log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.errors import PatcherError
from patcher.replica.build import Replica
from patcher.replica.write import write_replica
from patcher.serving.cpu import CPU_ENV, SERVED_NAME, CpuSetup
from patcher.serving.load import complete
from patcher.serving.metrics import read_counters
from patcher.serving.process import barrier, free_port, running_server
from patcher.serving.setup import Timeouts
from patcher.serving.venv import ServingVenv

PREFLIGHT_TOKENS = 8
TIMEOUTS = Timeouts(health=600, health_poll=0.5, stop_grace=20, request=120)


@dataclass(frozen=True)
class Preflight:
    passed: bool
    detail: str
    seconds: float
    notes: tuple[str, ...]


def preflight(
    replica: Replica,
    venv: ServingVenv,
    workdir: Path,
    progress: Callable[[str], None] = lambda message: None,
    harness: tuple[tuple[str, Any], ...] = (),
) -> Preflight:
    """``replica``, shrunk from the user's configs by the caller before it prepared ``venv``:
    a missing or unreadable config is refused before minutes of venv building. ``harness``: the
    ``--speculative-config`` keys of the CPU serving harness its wheel is on, if any
    (``patcher.serving.harness``)."""
    started = time.monotonic()
    out = write_replica(replica, workdir / "replica")
    for note in replica.notes:
        progress(f"note: {note}")
    setup = CpuSetup(
        model=str(out / "target"),
        drafter=str(out / "drafter"),
        extra_args=replica.serve_args,
        speculative_extra=(*replica.speculative.items(), *harness),
        env={**CPU_ENV, **replica.env},
    )
    port = free_port()
    command = setup.command(venv.python, port, speculative=True)
    log = workdir / "preflight.log"
    progress(f"starting the engine with EAGLE-3 (log: {log})")
    env = {**os.environ, **setup.server_env()}
    try:
        with running_server(command, log, port, TIMEOUTS, env=env) as up:
            answer = complete(
                up.base_url, SERVED_NAME, "completions", "Hello", PREFLIGHT_TOKENS, 120
            )
            counters = read_counters(up.base_url)
    except PatcherError as error:
        said = barrier(log)
        detail = said or str(error)
        return Preflight(False, detail, time.monotonic() - started, replica.notes)
    seconds = time.monotonic() - started
    if counters is None or counters.drafts <= 0:
        return Preflight(False, "the engine decoded but proposed no drafts", seconds, replica.notes)
    detail = (
        f"{replica.architecture} with a {replica.drafter_kind} EAGLE-3 drafter decoded "
        f"{answer.completion_tokens} tokens, {counters.drafts:.0f} drafts"
    )
    return Preflight(True, detail, seconds, replica.notes)
