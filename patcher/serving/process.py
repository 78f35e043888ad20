"""One server process: started in its own session, healthy or failing fast, always stopped.

The server runs in a new session (its own process group), so stopping it reaches the workers it
started too: SIGTERM to the group, SIGKILL after a grace period. That happens on success, on an
error and on Ctrl-C alike, because the ``with`` block's exit does it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import requests

from patcher.errors import PatcherError, TimedOut
from patcher.progress import step
from patcher.serving.setup import LOOPBACK, Timeouts

HEALTH_REQUEST_SECONDS = 5.0
"""One /health probe; a server still loading may accept the connection and answer nothing."""
LOG_TAIL_LINES = 5
KILL_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Server:
    """A server that answered /health, and how long it took to."""

    base_url: str
    startup_seconds: float


ERROR_LINE = re.compile(r"\b(\w+(Error|Exception)|error|Error)\b[:]")
WRAPPERS = ("root cause above", "stack trace above", "Worker failed with error")
"""Errors that only wrap the root cause, which vLLM logged before them."""


def barrier(log: Path) -> str | None:
    """vLLM's own words for why it stopped: the last error line in its log, trimmed."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if any(wrapper in line for wrapper in WRAPPERS):
            continue
        if ERROR_LINE.search(line) and "Traceback" not in line:
            said = _trimmed(line)
            if VALIDATION_HEADER.search(said) and index + 1 < len(lines):
                # pydantic puts the validator's own words on the next line
                reason = _trimmed(lines[index + 1]).split(" [type=")[0]
                said = f"{said}: {reason}"
            return said
    return None


ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
VALIDATION_HEADER = re.compile(r"ValidationError: \d+ validation errors? for \w+$")


def _trimmed(line: str) -> str:
    """A log line without its colours (vLLM 0.15.x colours the process prefix) and without
    vLLM's process and logger prefixes."""
    text = re.sub(r"^\(\w+ pid=\d+\)\s*", "", ANSI_COLOUR.sub("", line).strip())
    return re.sub(r"^(ERROR|WARNING|INFO) \S+ \S+ \[[^\]]+\]\s*", "", text)


def log_tail(path: Path) -> str:
    """The log's last non-blank lines on one line: where vLLM says why it stopped."""
    with path.open("rb") as log:
        log.seek(0, 2)
        log.seek(max(0, log.tell() - 65536))
        lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
    kept = [line for line in lines if line][-LOG_TAIL_LINES:]
    return " | ".join(kept) if kept else "(the log is empty)"


def free_port() -> int:
    """A port nothing listens on now, picked by the kernel."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


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
            raise TimedOut(
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


SOCKET_DIR_LIMIT = 64
"""vLLM binds ZMQ IPC sockets at ``$TMPDIR/<uuid4>`` (37 bytes more) and a Unix socket path holds
107: nox's session TMPDIR (``.nox/SESSION/tmp``) left too little, and the engine died on it."""


def socket_safe(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with TMPDIR set to ``/tmp`` where its own is too long for vLLM's IPC sockets."""
    tmp = env.get("TMPDIR") or tempfile.gettempdir()
    return {**env, "TMPDIR": "/tmp"} if len(tmp) > SOCKET_DIR_LIMIT else dict(env)


@contextmanager
def running_server(
    command: Sequence[str],
    log_path: Path,
    port: int,
    timeouts: Timeouts,
    env: dict[str, str] | None = None,
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
                env=socket_safe(os.environ if env is None else env),
            )
        except OSError as error:
            raise PatcherError(f"cannot start {command[0]}: {error}") from error
    try:
        base_url = f"http://{LOOPBACK}:{port}"
        with step(f"starting the server, until {base_url}/health answers (log: {log_path})"):
            wait_healthy(process, base_url, log_path, timeouts)
        yield Server(base_url, time.monotonic() - started)
    finally:
        stop(process, timeouts.stop_grace)
