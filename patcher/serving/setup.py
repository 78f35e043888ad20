"""What a benchmark starts: the server's command line, and bounds on every wait."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from patcher.defaults import HEALTH_SECONDS

VLLM_SERVE = (sys.executable, "-m", "vllm.entrypoints.cli.main", "serve")
"""``vllm serve`` of the interpreter running patcher: the venv the wheel under test is in."""

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Speculation:
    """The target model and its drafter: what ``--speculative-config`` says on every device."""

    model: str
    drafter: str
    num_speculative_tokens: int = 3
    method: str = "eagle3"
    speculative_extra: tuple[tuple[str, Any], ...] = ()
    """More ``--speculative-config`` keys: the drafter's attention backend on CPU, the CPU
    harness's own (``patcher.serving.harness.SPECULATIVE``)."""

    def speculative_config(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "model": self.drafter,
            "num_speculative_tokens": self.num_speculative_tokens,
            **dict(self.speculative_extra),
        }


@dataclass(frozen=True)
class ServeSetup(Speculation):
    """How the two servers are started; they differ only in ``--speculative-config``."""

    tensor_parallel_size: int = 8
    port: int = 8000
    max_model_len: int | None = 32768
    trust_remote_code: bool = False
    """``--trust-remote-code``: vLLM runs the Python code of the checkpoint's folder. Off, as
    vLLM's own default; the report says when it is on."""
    served_model_name: str = "kimi-k2.5"
    extra_vllm_args: tuple[str, ...] = ()
    server_program: tuple[str, ...] = VLLM_SERVE
    """What runs the server; tests put a stand-in here and keep every argument after it."""

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


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Bounds on every wait; the defaults fit a 547 GB checkpoint on 8 GPUs. Five floats in a
    row: named at every call, never by position."""

    health: float = HEALTH_SECONDS
    """Seconds for ``/health`` to answer once the server starts: the whole load."""
    health_poll: float = 5.0
    stop_grace: float = 60.0
    """Seconds between SIGTERM and SIGKILL when a server is stopped."""
    request: float = 1800.0
    metrics_settle: float = 1.0
    """Seconds between two reads of ``/metrics`` while its counters still move."""
