"""Preflight: a deployment's own configs, shrunk, served with EAGLE-3 by the real engine on CPU.

Before a 547 GB load: the user's config.json files (architectures, model types, attribute names,
vocabulary kept; layers fewer and narrower) are loaded by vLLM's own engine with random weights,
a few tokens are decoded with the drafter on, and the answer is one of four outcomes:

- ``pass``: the engine decoded with drafts;
- ``barrier``: it refused with one of the barriers the patchset names, in vLLM's words (the
  last error line of its log);
- ``error``: it stopped on something else, said with what failed: the replica (the configs as
  shrunk), the image processor, or the environment (the venv, the machine);
- ``timeout``: a wait ran out; what the engine would have said is unknown.

Eager by default (``--enforce-eager``): it checks for barriers, it is not a benchmark, and on two
cores the engine compiles for minutes. ``compiled`` serves as vLLM does by default, for the
barriers that show only when compiled.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.errors import PatcherError, TimedOut
from patcher.replica.build import Replica
from patcher.serving.cpu import CPU_ENV, SERVED_NAME, CpuSetup
from patcher.serving.load import complete
from patcher.serving.metrics import read_counters
from patcher.serving.process import barrier, free_port, running_server
from patcher.serving.setup import Timeouts
from patcher.serving.venv import ServingVenv

PREFLIGHT_TOKENS = 8
TIMEOUTS = Timeouts(health=Timeouts.health, health_poll=0.5, stop_grace=20, request=120)
"""``--health-timeout`` has serve-bench's default (one default per option name): a shrunk
replica starts in a minute or two, and an engine that dies ends the wait at once."""

PASS, BARRIER, ERROR, TIMEOUT = "pass", "barrier", "error", "timeout"
EXIT_CODES = {PASS: 0, BARRIER: 1, ERROR: 3, TIMEOUT: 4}
"""preflight's exit status by outcome; 2 stays bad input, refused before the engine starts."""

REPLICA, PROCESSOR, ENVIRONMENT = "the replica", "the image processor", "the environment"

PROCESSOR_FRAMES = re.compile(
    r'File "[^"]*(image_processing|processing_auto|dynamic_module_utils|feature_extraction'
    r"|transformers_modules|/processor\.py|_processor\.py|_processing\.py)"
)
"""Frames of a traceback that was loading the image processor: transformers' auto classes and
its remote-code loader, vLLM's processor loader, a processor module of the replica's."""
PROCESSOR_WORDS = ("image processor", "preprocessor_config", "AutoImageProcessor")
ENVIRONMENT_WORDS = (
    "ModuleNotFoundError",
    "ImportError",
    "No module named",
    "cannot open shared object",
    "undefined symbol",
    "Illegal instruction",
    "MemoryError",
    "out of memory",
    "No space left",
    "Address already in use",
)
"""An error line naming the venv or the machine, not the configs."""


@dataclass(frozen=True)
class Preflight:
    outcome: str
    """``pass``, ``barrier``, ``error`` or ``timeout``."""
    detail: str
    seconds: float
    notes: tuple[str, ...]
    compiled: bool = False

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]


def last_traceback(text: str) -> str:
    """The log from its last ``Traceback`` on: the frames of the error that stopped it."""
    start = text.rfind("Traceback (most recent call last)")
    return text[start:] if start >= 0 else ""


def failed_part(said: str | None, log_text: str) -> str:
    """What failed, for an error that is no barrier: the image processor where the stopping
    traceback was loading it (or the error names it), the environment where the error names the
    venv or the machine, else the replica (the configs as shrunk)."""
    frames = last_traceback(log_text)
    if PROCESSOR_FRAMES.search(frames) or any(w in (said or "") for w in PROCESSOR_WORDS):
        return PROCESSOR
    if said is None or any(word in said for word in ENVIRONMENT_WORDS):
        return ENVIRONMENT
    return REPLICA


def judged(
    said: str | None, log_text: str, barriers: Sequence[str], fallback: str
) -> tuple[str, str]:
    """The outcome and detail of an engine that stopped: a barrier where vLLM's words hold one
    the patchset names, else an error saying what failed. ``fallback``: patcher's own account
    (the exit code, the log's tail) where vLLM logged no error line."""
    if said is not None and any(phrase in said for phrase in barriers):
        return BARRIER, said
    part = failed_part(said, log_text)
    return ERROR, f"{part} failed, not a barrier of the patchset: {said or fallback}"


def read_log(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def preflight(
    replica: Replica,
    out: Path,
    venv: ServingVenv,
    workdir: Path,
    progress: Callable[[str], None] = lambda message: None,
    harness: tuple[tuple[str, Any], ...] = (),
    barriers: Sequence[str] = (),
    compiled: bool = False,
    timeouts: Timeouts = TIMEOUTS,
) -> Preflight:
    """``replica``, shrunk from the user's configs by the caller before it prepared ``venv``
    (a missing or unreadable config is refused before minutes of venv building), and written by
    it to ``out`` (``write_replica``), where its doctor may read the pair first. ``harness``: the
    ``--speculative-config`` keys of the CPU serving harness its wheel is on, if any
    (``patcher.serving.harness``). ``barriers``: the patchset's barriers in vLLM's words (a
    part of the root-cause line each)."""
    started = time.monotonic()
    for note in replica.notes:
        progress(f"note: {note}")
    setup = CpuSetup(
        model=str(out / "target"),
        drafter=str(out / "drafter"),
        extra_args=replica.serve_args,
        speculative_extra=(*replica.speculative.items(), *harness),
        env={**CPU_ENV, **replica.env},
        enforce_eager=not compiled,
    )
    port = free_port()
    command = setup.command(venv.python, port, speculative=True)
    log = workdir / "preflight.log"
    mode = "compiled" if compiled else "eager (--enforce-eager)"
    progress(f"starting the engine with EAGLE-3, {mode} (log: {log})")
    env = {**os.environ, **setup.server_env()}
    try:
        with running_server(command, log, port, timeouts, env=env) as up:
            answer = complete(
                up.base_url, SERVED_NAME, "completions", "Hello", PREFLIGHT_TOKENS, timeouts.request
            )
            counters = read_counters(up.base_url)
    except TimedOut as error:
        seconds = time.monotonic() - started
        return Preflight(TIMEOUT, str(error), seconds, replica.notes, compiled)
    except PatcherError as error:
        outcome, detail = judged(barrier(log), read_log(log), barriers, str(error))
        return Preflight(outcome, detail, time.monotonic() - started, replica.notes, compiled)
    seconds = time.monotonic() - started
    if counters is None or counters.drafts <= 0:
        detail = "the engine decoded but proposed no drafts"
        return Preflight(ERROR, detail, seconds, replica.notes, compiled)
    detail = (
        f"{replica.architecture} with a {replica.drafter_kind} EAGLE-3 drafter decoded "
        f"{answer.completion_tokens} tokens, {counters.drafts:.0f} drafts"
    )
    return Preflight(PASS, detail, seconds, replica.notes, compiled)
