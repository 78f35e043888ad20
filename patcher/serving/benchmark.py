"""The benchmark: one server with EAGLE-3, one without, the same load sent to each."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from patcher.serving.load import Load, send_load, warm_up
from patcher.serving.metrics import load_delta, settled_counters
from patcher.serving.process import Server, running_server
from patcher.serving.report import BenchReport
from patcher.serving.setup import ServeSetup, Timeouts


@contextmanager
def warm_server(
    command: Sequence[str],
    log_path: Path,
    setup: ServeSetup,
    load: Load,
    timeouts: Timeouts,
    progress: Callable[[str], None],
) -> Iterator[Server]:
    """A healthy server that has answered one request, stopped on the way out."""
    progress(f"starting {shlex.join(command)} (log: {log_path})")
    with running_server(command, log_path, setup.port, timeouts) as server:
        progress(f"healthy after {server.startup_seconds:.0f} s; sending the load")
        warm_up(server, setup, load, timeouts)
        yield server


def run_benchmark(
    setup: ServeSetup,
    load: Load,
    log_dir: Path,
    timeouts: Timeouts = Timeouts(),
    progress: Callable[[str], None] = lambda message: None,
) -> BenchReport:
    """EAGLE-3 first: on a vLLM that lacks the patches it is the run that fails, so fail early."""
    commands = {
        "eagle3": setup.command(speculative=True),
        "baseline": setup.command(speculative=False),
    }
    with warm_server(
        commands["eagle3"], log_dir / "eagle3.log", setup, load, timeouts, progress
    ) as server:
        before = settled_counters(server.base_url, timeouts.metrics_settle)
        eagle3 = send_load(server, setup, load, timeouts)
        after = settled_counters(server.base_url, timeouts.metrics_settle)
    spec_decode = load_delta(before, after)
    with warm_server(
        commands["baseline"], log_dir / "baseline.log", setup, load, timeouts, progress
    ) as server:
        baseline = send_load(server, setup, load, timeouts)
    return BenchReport(
        vllm_version=installed_vllm(),
        setup=setup,
        load=load,
        commands=commands,
        eagle3=eagle3,
        baseline=baseline,
        spec_decode=spec_decode,
    )


def installed_vllm() -> str | None:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None
