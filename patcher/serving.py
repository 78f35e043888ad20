"""``patcher serve-bench``: Kimi-K2.5 served by vLLM on 8 GPUs, with and without EAGLE-3.

One run starts ``vllm serve`` twice (a 547 GB checkpoint takes about 30 minutes to load), sends
the same greedy prompts to the server with the EAGLE-3 drafter and to the one without, and reads
the drafter's acceptance from the server's Prometheus counters. Only the servers need GPUs, so
everything here is tested on CPU against a stand-in server.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import requests
from rich import box
from rich.console import Console
from rich.table import Table

from patcher.cache import atomic_write
from patcher.errors import PatcherError

VLLM_SERVE = (sys.executable, "-m", "vllm.entrypoints.cli.main", "serve")
"""``vllm serve`` of the interpreter running patcher: the venv the wheel under test is in."""

LOOPBACK = "127.0.0.1"
HEALTH_REQUEST_SECONDS = 5.0
"""One /health probe; a server still loading may accept the connection and answer nothing."""
WARMUP_TOKENS = 16
LOG_TAIL_LINES = 5
KILL_WAIT_SECONDS = 30.0
METRICS_SETTLE_READS = 10

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"

DEFAULT_PROMPTS = (
    "Prove that the square root of 2 is irrational. Explain each step.",
    "Write a Python function that returns the longest palindromic substring of a string, "
    "then explain its time complexity.",
    "A train leaves at 9:40 and travels 210 km at 84 km/h. When does it arrive? Show your "
    "reasoning.",
    "Implement a thread-safe LRU cache in Python with get and put, and explain the locking.",
    "Explain the difference between a process and a thread, with one example where each is "
    "the better choice.",
    "Write a SQL query that finds, for each department, the employee with the highest salary, "
    "and explain how it handles ties.",
    "Three boxes are labelled apples, oranges and mixed, and every label is wrong. Drawing one "
    "fruit from one box, how do you relabel them all? Explain.",
    "Write a Rust function that parses a line of comma-separated integers into a Vec<i64>, "
    "returning an error for bad input, and walk through it.",
)
"""Reasoning and coding prompts: what an EAGLE-3 drafter for Kimi-K2.5 is trained on."""


@dataclass(frozen=True)
class ServeSetup:
    """How the two servers are started; they differ only in ``--speculative-config``."""

    model: str
    drafter: str
    tensor_parallel_size: int = 8
    num_speculative_tokens: int = 3
    method: str = "eagle3"
    port: int = 8000
    max_model_len: int | None = 32768
    trust_remote_code: bool = True
    served_model_name: str = "kimi-k2.5"
    extra_vllm_args: tuple[str, ...] = ()
    server_program: tuple[str, ...] = VLLM_SERVE
    """What runs the server; tests put a stand-in here and keep every argument after it."""

    def speculative_config(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "model": self.drafter,
            "num_speculative_tokens": self.num_speculative_tokens,
        }

    def command(self, *, speculative: bool) -> list[str]:
        """The server's argv; flags as vLLM 0.15 to 0.33 spell them."""
        argv = [
            *self.server_program,
            self.model,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--served-model-name",
            self.served_model_name,
            "--tensor-parallel-size",
            str(self.tensor_parallel_size),
        ]
        if self.max_model_len is not None:
            argv += ["--max-model-len", str(self.max_model_len)]
        if self.trust_remote_code:
            argv.append("--trust-remote-code")
        if speculative:
            argv += ["--speculative-config", json.dumps(self.speculative_config())]
        return argv + list(self.extra_vllm_args)


@dataclass(frozen=True)
class Timeouts:
    """Bounds on every wait; the defaults fit a 547 GB checkpoint on 8 GPUs."""

    health: float = 3600.0
    health_poll: float = 5.0
    stop_grace: float = 60.0
    request: float = 1800.0
    metrics_settle: float = 1.0


@dataclass(frozen=True)
class Load:
    """What both servers are sent: the same prompts, greedy, the same token budget."""

    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    max_tokens: int = 512
    concurrency: int = 1
    api: str = "chat"
    """``chat`` applies Kimi's chat template, the format its drafters are trained on."""


@dataclass(frozen=True)
class ServerRun:
    """One server's measurements under the load."""

    startup_seconds: float
    wall_seconds: float
    output_tokens: tuple[int, ...]
    latencies: tuple[float, ...]
    outputs: tuple[str, ...]
    """Each answer as the server gave it, to compare greedy outputs between the runs."""

    @property
    def tokens_per_second(self) -> float:
        return sum(self.output_tokens) / self.wall_seconds

    def summary(self) -> dict[str, Any]:
        return {
            "startup_seconds": round(self.startup_seconds, 1),
            "requests": len(self.output_tokens),
            "output_tokens": sum(self.output_tokens),
            "wall_seconds": round(self.wall_seconds, 3),
            "output_tokens_per_second": round(self.tokens_per_second, 2),
            "latency_p50_seconds": round(percentile(self.latencies, 0.5), 3),
            "latency_p90_seconds": round(percentile(self.latencies, 0.9), 3),
            "latencies_seconds": [round(latency, 3) for latency in self.latencies],
        }


@dataclass(frozen=True)
class SpecDecodeCounters:
    """vLLM's cumulative spec-decode counters, summed over engines."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...] = ()

    def minus(self, before: SpecDecodeCounters) -> SpecDecodeCounters:
        """What the load added: the counters also hold the warm-up request."""
        earlier = before.accepted_per_position
        return SpecDecodeCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted_tokens - before.accepted_tokens,
            tuple(
                value - (earlier[i] if i < len(earlier) else 0.0)
                for i, value in enumerate(self.accepted_per_position)
            ),
        )

    @property
    def acceptance_rate(self) -> float:
        """Accepted over proposed draft tokens."""
        return self.accepted_tokens / self.draft_tokens

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per target forward pass: the accepted ones plus the one the target adds."""
        return 1 + self.accepted_tokens / self.drafts

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        return tuple(accepted / self.drafts for accepted in self.accepted_per_position)


@dataclass(frozen=True)
class BenchReport:
    vllm_version: str | None
    setup: ServeSetup
    load: Load
    commands: dict[str, list[str]]
    eagle3: ServerRun
    baseline: ServerRun
    spec_decode: SpecDecodeCounters

    @property
    def speedup(self) -> float:
        """Output tokens per second with EAGLE-3 over without."""
        return self.eagle3.tokens_per_second / self.baseline.tokens_per_second

    @property
    def identical_outputs(self) -> int:
        """Greedy answers that came out the same; speculation should not change them."""
        return sum(a == b for a, b in zip(self.eagle3.outputs, self.baseline.outputs, strict=True))

    def to_json(self) -> str:
        spec = self.spec_decode
        return json.dumps(
            {
                "vllm_version": self.vllm_version,
                "model": self.setup.model,
                "drafter": self.setup.drafter,
                "method": self.setup.method,
                "tensor_parallel_size": self.setup.tensor_parallel_size,
                "num_speculative_tokens": self.setup.num_speculative_tokens,
                "load": {
                    "prompts": len(self.load.prompts),
                    "max_tokens": self.load.max_tokens,
                    "concurrency": self.load.concurrency,
                    "api": self.load.api,
                    "temperature": 0,
                },
                "commands": self.commands,
                "eagle3": self.eagle3.summary(),
                "baseline": self.baseline.summary(),
                "spec_decode": {
                    "drafts": spec.drafts,
                    "draft_tokens": spec.draft_tokens,
                    "accepted_tokens": spec.accepted_tokens,
                    "acceptance_rate": round(spec.acceptance_rate, 4),
                    "mean_acceptance_length": round(spec.mean_acceptance_length, 3),
                    "per_position_acceptance": [
                        round(rate, 4) for rate in spec.per_position_acceptance
                    ],
                },
                "speedup": round(self.speedup, 3),
                "identical_outputs": self.identical_outputs,
            },
            indent=2,
        )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: a value that was measured, never an interpolation."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


# --- GPUs ---


def count_gpus() -> tuple[int, str]:
    """The GPUs the driver lists, and how they were counted, for the error message."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return 0, f"nvidia-smi -L failed: {error}"
        if listed.returncode != 0:
            said = (listed.stderr or listed.stdout).strip().splitlines()
            return 0, f"nvidia-smi -L exited {listed.returncode}: {said[-1] if said else ''}"
        return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()), "nvidia-smi"
    if find_spec("torch") is None:
        return 0, "no nvidia-smi on PATH, no torch"
    import torch

    return torch.cuda.device_count(), "torch.cuda.device_count()"


def check_gpus(needed: int) -> None:
    """Refuse before a 30-minute load that cannot succeed."""
    found, counted_by = count_gpus()
    if found < needed:
        raise PatcherError(f"needs {needed} GPUs, found {found} ({counted_by})")


# --- the server process ---


@dataclass(frozen=True)
class Server:
    """A server that answered /health, and how long it took to."""

    base_url: str
    startup_seconds: float


def log_tail(path: Path) -> str:
    """The log's last non-blank lines on one line: where vLLM says why it stopped."""
    with path.open("rb") as log:
        log.seek(0, 2)
        log.seek(max(0, log.tell() - 65536))
        lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
    kept = [line for line in lines if line][-LOG_TAIL_LINES:]
    return " | ".join(kept) if kept else "(the log is empty)"


def ensure_port_free(port: int) -> None:
    """Something already answering there would be measured instead of the new server."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            pass
    except OSError:
        return
    raise PatcherError(f"port {port} on {LOOPBACK} is in use; stop what listens there or --port")


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """The server's whole session: its tensor-parallel workers are its children."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace``; the SIGKILL also sweeps workers left behind."""
    signal_group(process, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    signal_group(process, signal.SIGKILL)
    try:
        process.wait(timeout=KILL_WAIT_SECONDS)
    except subprocess.TimeoutExpired as error:  # stuck in the GPU driver: say so, do not hang
        raise PatcherError(
            f"the server (pid {process.pid}) survived SIGKILL; its GPUs may still be in use"
        ) from error


def wait_healthy(
    process: subprocess.Popen[bytes], base_url: str, log_path: Path, timeouts: Timeouts
) -> None:
    """Poll /health until 200; fail at once if the process dies, and at the deadline."""
    deadline = time.monotonic() + timeouts.health
    while True:
        code = process.poll()
        if code is not None:
            raise PatcherError(
                f"the server exited with code {code} before it was healthy: "
                f"{log_tail(log_path)} (log: {log_path})"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PatcherError(
                f"the server was not healthy after {timeouts.health:g} s: "
                f"{log_tail(log_path)} (log: {log_path})"
            )
        try:
            answer = requests.get(
                f"{base_url}/health", timeout=min(HEALTH_REQUEST_SECONDS, remaining)
            )
            if answer.status_code == 200:
                return
        except requests.RequestException:
            pass
        with suppress(subprocess.TimeoutExpired):  # wakes at once if the server dies
            process.wait(timeout=max(0.0, min(timeouts.health_poll, deadline - time.monotonic())))


@contextmanager
def running_server(
    command: Sequence[str], log_path: Path, port: int, timeouts: Timeouts
) -> Iterator[Server]:
    """A healthy server for the ``with`` block, stopped on the way out whatever happens."""
    ensure_port_free(port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            raise PatcherError(f"cannot start {command[0]}: {error}") from error
    try:
        base_url = f"http://{LOOPBACK}:{port}"
        wait_healthy(process, base_url, log_path, timeouts)
        yield Server(base_url, time.monotonic() - started)
    finally:
        stop(process, timeouts.stop_grace)


# --- the load ---


def complete(
    base_url: str, served_model_name: str, api: str, prompt: str, max_tokens: int, timeout: float
) -> tuple[int, str]:
    """One greedy request: the output tokens the server counted, and its answer."""
    body: dict[str, Any] = {
        "model": served_model_name,
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    if api == "chat":
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        path = "/v1/completions"
        body["prompt"] = prompt
    try:
        answer = requests.post(f"{base_url}{path}", json=body, timeout=timeout)
    except requests.RequestException as error:
        raise PatcherError(f"POST {path}: {type(error).__name__}: {error}") from error
    if answer.status_code != 200:
        raise PatcherError(f"POST {path}: HTTP {answer.status_code}: {answer.text[:300]}")
    try:
        data = answer.json()
        tokens = int(data["usage"]["completion_tokens"])
        choice = data["choices"][0]
        output = json.dumps(choice["message"], sort_keys=True) if api == "chat" else choice["text"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise PatcherError(f"POST {path}: unexpected answer: {answer.text[:300]}") from error
    return tokens, str(output)


def send_load(server: Server, setup: ServeSetup, load: Load, timeouts: Timeouts) -> ServerRun:
    """Every prompt, at most ``load.concurrency`` in flight; wall time spans them all."""

    def timed(prompt: str) -> tuple[int, float, str]:
        start = time.perf_counter()
        tokens, output = complete(
            server.base_url,
            setup.served_model_name,
            load.api,
            prompt,
            load.max_tokens,
            timeouts.request,
        )
        return tokens, time.perf_counter() - start, output

    pool = ThreadPoolExecutor(load.concurrency)
    start = time.perf_counter()
    try:
        results = list(pool.map(timed, load.prompts))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    wall = time.perf_counter() - start
    return ServerRun(
        startup_seconds=server.startup_seconds,
        wall_seconds=wall,
        output_tokens=tuple(tokens for tokens, _, _ in results),
        latencies=tuple(latency for _, latency, _ in results),
        outputs=tuple(output for _, _, output in results),
    )


def warm_up(server: Server, setup: ServeSetup, load: Load, timeouts: Timeouts) -> None:
    """One short request first, so nothing lazy on the first request is timed."""
    complete(
        server.base_url,
        setup.served_model_name,
        load.api,
        load.prompts[0],
        min(load.max_tokens, WARMUP_TOKENS),
        timeouts.request,
    )


# --- Prometheus ---


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


SAMPLE_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r'(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<value>\S+)"
)
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[Sample]:
    """The samples of Prometheus' text format; comments and lines it cannot read are skipped."""
    samples = []
    for line in text.splitlines():
        match = SAMPLE_LINE.match(line.strip())
        if match is None:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = dict(LABEL.findall(match["labels"] or ""))
        samples.append(Sample(match["name"], labels, value))
    return samples


def counter_samples(samples: list[Sample], name: str) -> list[Sample]:
    """A counter's samples: ``name_total`` as prometheus_client exposes it, else bare ``name``."""
    for exposed in (f"{name}_total", name):
        found = [sample for sample in samples if sample.name == exposed]
        if found:
            return found
    return []


def spec_decode_counters(text: str) -> SpecDecodeCounters | None:
    """The counters in a /metrics page; None if it has none (a server not speculating)."""
    samples = parse_prometheus(text)
    totals = {
        name: counter_samples(samples, name) for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS)
    }
    missing = [name for name, found in totals.items() if not found]
    if len(missing) == len(totals):
        return None
    if missing:
        raise PatcherError(f"/metrics lacks {', '.join(missing)} beside the other spec counters")
    by_position: dict[int, float] = {}
    for sample in counter_samples(samples, ACCEPTED_PER_POSITION):
        position = int(sample.labels.get("position", "0"))
        by_position[position] = by_position.get(position, 0.0) + sample.value
    return SpecDecodeCounters(
        drafts=sum(sample.value for sample in totals[DRAFTS]),
        draft_tokens=sum(sample.value for sample in totals[DRAFT_TOKENS]),
        accepted_tokens=sum(sample.value for sample in totals[ACCEPTED_TOKENS]),
        accepted_per_position=tuple(by_position[p] for p in sorted(by_position)),
    )


def read_counters(base_url: str) -> SpecDecodeCounters | None:
    try:
        answer = requests.get(f"{base_url}/metrics", timeout=30)
    except requests.RequestException as error:
        raise PatcherError(f"GET /metrics: {type(error).__name__}: {error}") from error
    if answer.status_code != 200:
        raise PatcherError(f"GET /metrics: HTTP {answer.status_code}")
    return spec_decode_counters(answer.text)


def settled_counters(base_url: str, pause: float) -> SpecDecodeCounters | None:
    """Read until two reads agree: the last step's stats may land just after its answer."""
    latest = read_counters(base_url)
    for _ in range(METRICS_SETTLE_READS):
        time.sleep(pause)
        again = read_counters(base_url)
        if again == latest:
            break
        latest = again
    return latest


def load_delta(
    before: SpecDecodeCounters | None, after: SpecDecodeCounters | None
) -> SpecDecodeCounters:
    """What the load added; counters that appeared only during the load count from zero."""
    if after is None:
        raise PatcherError(
            f"the EAGLE-3 server's /metrics has no {DRAFTS}_total: it is not speculating"
        )
    delta = after.minus(before or SpecDecodeCounters(0.0, 0.0, 0.0))
    if delta.drafts <= 0 or delta.draft_tokens <= 0:
        raise PatcherError("the EAGLE-3 server proposed no draft tokens during the load")
    return delta


# --- the benchmark ---


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


def print_report(report: BenchReport, console: Console) -> None:
    title = f"Kimi-K2.5 EAGLE-3 on vllm {report.vllm_version or '(not installed here)'}"
    table = Table(
        title=title,
        title_justify="left",
        box=box.HEAVY_HEAD if console.is_terminal else None,
    )
    table.add_column("")
    table.add_column("baseline", justify="right")
    table.add_column("eagle3", justify="right")
    runs = (report.baseline, report.eagle3)
    table.add_row("server start-up", *(f"{run.startup_seconds:.0f} s" for run in runs))
    table.add_row("output tokens", *(str(sum(run.output_tokens)) for run in runs))
    table.add_row("wall time", *(f"{run.wall_seconds:.2f} s" for run in runs))
    table.add_row("output tokens/s", *(f"{run.tokens_per_second:.1f}" for run in runs))
    for label, fraction in (("latency p50", 0.5), ("latency p90", 0.9)):
        table.add_row(label, *(f"{percentile(run.latencies, fraction):.2f} s" for run in runs))
    spec = report.spec_decode
    table.add_row("acceptance rate", "", f"{spec.acceptance_rate:.1%}")
    table.add_row("mean acceptance length", "", f"{spec.mean_acceptance_length:.2f}")
    table.add_row(
        "acceptance by position",
        "",
        " ".join(f"{rate:.2f}" for rate in spec.per_position_acceptance),
    )
    table.caption = (
        f"speedup {report.speedup:.2f}x; {report.identical_outputs}/{len(report.load.prompts)} "
        f"greedy outputs identical; {len(report.load.prompts)} prompts, "
        f"max_tokens {report.load.max_tokens}, concurrency {report.load.concurrency}"
    )
    console.print(table)


# --- the command ---


def read_prompts(path: Path) -> tuple[str, ...]:
    """A JSONL file, one ``{"prompt": "..."}`` a line."""
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except OSError as error:
        raise PatcherError(f"{path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise PatcherError(f"{path}: not UTF-8 text ({error.reason})") from error
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prompt = json.loads(line)["prompt"]
        except (ValueError, KeyError, TypeError) as error:
            raise PatcherError(f'{path}:{number}: not a {{"prompt": "..."}} object') from error
        if not isinstance(prompt, str) or not prompt:
            raise PatcherError(f"{path}:{number}: the prompt is not a non-empty string")
        prompts.append(prompt)
    if not prompts:
        raise PatcherError(f"{path}: no prompts")
    return tuple(prompts)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):  # nan never passes a deadline: a hang
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def port_number(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (1-65535)")
    return value


def vllm_flags(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as error:  # an unclosed quote
        raise argparse.ArgumentTypeError(f"{text!r} is not shell words ({error})") from error


def refuse_unwritable_outputs(args: argparse.Namespace) -> None:
    """Before a benchmark that takes half an hour, not when its results are written."""
    if args.json is not None and args.json.is_dir():
        raise PatcherError(f"--json {args.json} is a directory; give a file name")
    if args.log_dir.exists() and not args.log_dir.is_dir():
        raise PatcherError(f"--log-dir {args.log_dir} is not a directory")


def command_serve_bench(args: argparse.Namespace) -> int:
    from patcher.cli import err, out  # cli imports this module to register the command

    refuse_unwritable_outputs(args)
    prompts = read_prompts(args.prompts) if args.prompts else DEFAULT_PROMPTS
    setup = ServeSetup(
        model=args.model,
        drafter=args.drafter,
        tensor_parallel_size=args.tp,
        num_speculative_tokens=args.num_speculative_tokens,
        port=args.port,
        max_model_len=args.max_model_len,
        trust_remote_code=args.trust_remote_code,
        extra_vllm_args=args.vllm_args,
        server_program=VLLM_SERVE,
    )
    load = Load(prompts, args.max_tokens, args.concurrency, args.api)
    check_gpus(setup.tensor_parallel_size)
    report = run_benchmark(
        setup,
        load,
        args.log_dir,
        Timeouts(health=args.health_timeout),
        lambda message: err.print(message, markup=False, soft_wrap=True),
    )
    print_report(report, out)
    if args.json:
        atomic_write(args.json, report.to_json().encode())
    return 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``serve-bench`` on the ``patcher`` command's subparsers."""
    bench = commands.add_parser(
        "serve-bench",
        help="serve Kimi-K2.5 with and without EAGLE-3 on 8 GPUs: speedup and acceptance",
    )
    bench.add_argument("--model", required=True, help="the Kimi-K2.5 checkpoint: a path or hub id")
    bench.add_argument("--drafter", required=True, help="the EAGLE-3 drafter: a path or hub id")
    bench.add_argument("--tp", type=positive_int, default=8, help="tensor parallel size")
    bench.add_argument("--num-speculative-tokens", type=positive_int, default=3)
    bench.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help='JSONL, one {"prompt": "..."} a line (default: 8 reasoning and coding prompts)',
    )
    bench.add_argument("--max-tokens", type=positive_int, default=512)
    bench.add_argument("--concurrency", type=positive_int, default=1)
    bench.add_argument(
        "--api",
        choices=["chat", "completions"],
        default="chat",
        help="chat applies the model's chat template (default); completions sends raw text",
    )
    bench.add_argument("--max-model-len", type=positive_int, default=32768)
    bench.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction, default=True)
    bench.add_argument(
        "--vllm-args",
        type=vllm_flags,
        default="",
        metavar="'FLAGS'",
        help="more `vllm serve` flags for both servers, as one string: "
        "--vllm-args='--gpu-memory-utilization 0.92'",
    )
    bench.add_argument("--port", type=port_number, default=8000)
    bench.add_argument(
        "--health-timeout",
        type=positive_float,
        default=Timeouts.health,
        metavar="SECONDS",
        help="how long a server may take to load (default: %(default)g)",
    )
    bench.add_argument(
        "--log-dir", type=Path, default=Path("reports/serve-bench/logs"), help="the servers' logs"
    )
    bench.add_argument("--json", type=Path, metavar="FILE", help="the report as JSON")
    bench.set_defaults(run=command_serve_bench)
