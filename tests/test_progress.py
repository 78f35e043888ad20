"""Progress of the long steps (issue 21): transient bars on stderr in a terminal, for the
download, the RECORD check, the repack, a venv build and a server's start-up; nothing on a pipe
or with ``--quiet``.

The terminal is a real pseudo-terminal (``pty``). build-wheel runs as the installed console
script on a tiny vLLM-shaped wheel; the venv is a real one made by uv (empty: no index needed),
and tests/fake_vllm_server.py stands in for the vLLM server whose start-up is shown.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

from commandline import PATCHER
from test_build_wheel import build_argv, small_wheel
from test_output import in_terminal

from patcher.cli import terminal
from patcher.cli.terminal import StepDisplay
from patcher.progress import shown_by
from patcher.serving import process
from patcher.serving.setup import Timeouts
from patcher.venvs import VenvPlan, ready_venv

ESCAPE = re.compile(r"\x1b\[[?0-9;]*[A-Za-z]")
FAKE_SERVER = Path(__file__).with_name("fake_vllm_server.py")
TIMEOUTS = Timeouts(health=30, health_poll=0.05, stop_grace=5, request=10, metrics_settle=0.01)
BUILD_STEPS = ("against RECORD and repacking vllm-0.16.0-", "checking vllm-0.16.0+")


def test_build_wheel_shows_its_steps_in_a_terminal(tmp_path) -> None:
    wheel = small_wheel(tmp_path)
    argv = build_argv(wheel, tmp_path / "dist", "--allow-noop")
    shown = in_terminal(argv, 100, PATCHER_CACHE_DIR=str(tmp_path / "cache"))
    plain = ESCAPE.sub("", shown)
    for words in BUILD_STEPS:
        assert words in plain
    assert "\x1b[?25l" in shown  # Rich's live display hid the cursor: the bars are drawn


def test_build_wheel_piped_says_each_step_in_a_line_and_quiet_shows_none(tmp_path) -> None:
    """issue 41: off a terminal the steps said nothing without ``-v`` (a cold matrix, 99 s and
    0 bytes on stderr); now a plain line each, as pip and uv print theirs. ``--quiet``, in a
    terminal or piped, shows none."""
    wheel = small_wheel(tmp_path)
    argv = build_argv(wheel, tmp_path / "dist", "--allow-noop")
    env = {**os.environ, "PATCHER_CACHE_DIR": str(tmp_path / "cache")}
    piped = subprocess.run([PATCHER, *argv], capture_output=True, text=True, env=env, check=True)
    lines = piped.stderr.splitlines()
    for words in BUILD_STEPS:
        (line,) = [line for line in lines if words in line]
        assert line.startswith("patcher: ")
    assert not ESCAPE.search(piped.stderr + piped.stdout) and "\r" not in piped.stderr
    assert piped.stdout.count("\n") == 1  # the wheel's path alone
    quiet = in_terminal([*argv, "--quiet"], 100, PATCHER_CACHE_DIR=str(tmp_path / "cache2"))
    env["PATCHER_CACHE_DIR"] = str(tmp_path / "cache3")
    argv = build_argv(wheel, tmp_path / "dist3", "--allow-noop", "-q")
    piped_quiet = subprocess.run([PATCHER, *argv], capture_output=True, text=True, env=env)
    for words in BUILD_STEPS:
        assert words not in ESCAPE.sub("", quiet)
        assert words not in piped_quiet.stderr


def read_all(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the terminal's other end is closed
            return
        if not chunk:
            return
        into.append(chunk)


def venv_and_server(tmp_path: Path, monkeypatch) -> None:
    """The two long steps below the command line: an empty venv built, a server started."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    ready_venv(VenvPlan())
    port = process.free_port()
    command = [sys.executable, str(FAKE_SERVER), "m", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--served-model-name", "m", "--tensor-parallel-size", "1"]
    with process.running_server(command, tmp_path / "server.log", port, TIMEOUTS):
        pass


def test_a_venv_build_and_a_server_start_up_show_in_a_terminal(tmp_path, monkeypatch) -> None:
    leader, follower = pty.openpty()
    chunks: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(leader, chunks))
    reader.start()
    stream = io.TextIOWrapper(os.fdopen(follower, "wb"), write_through=True)
    monkeypatch.setattr(terminal.err, "file", stream)
    assert terminal.err.live
    with shown_by(StepDisplay(terminal.err)):
        venv_and_server(tmp_path, monkeypatch)
    stream.close()
    reader.join(timeout=10)
    os.close(leader)
    shown = ESCAPE.sub("", b"".join(chunks).decode(errors="replace"))
    assert "building a venv for its requirements" in shown
    assert "starting the server, until http://127.0.0.1:" in shown


def test_a_venv_build_and_a_server_start_up_show_nothing_on_a_pipe(tmp_path, monkeypatch) -> None:
    """What the command line does on a pipe: it sets no display, and the steps write nothing."""
    stream = io.StringIO()
    monkeypatch.setattr(terminal.err, "file", stream)
    assert not terminal.err.live
    venv_and_server(tmp_path, monkeypatch)
    assert stream.getvalue() == ""
