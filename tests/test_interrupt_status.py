"""How a stopped run ends, for every command alike (``patcher.cli.terminal``): one line,
``patcher: interrupted``, no traceback, 130 for Ctrl-C and 143 for SIGTERM, and every temporary
file removed (issue 41). The bundle's packing is the hard case: Ctrl-C reaches xz as well (the
terminal's whole process group), and the tar's write into xz's pipe then broke while the
interrupt unwound: exit 1 and two chained tracebacks (KeyboardInterrupt, then BrokenPipeError).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patcher.cli.terminal import Terminated, interrupted, interruption

TESTS = Path(__file__).parent

DRIVER = """\
import os, sys, zipfile
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_bundle import plan
from patcher.outputs import bundle
import patcher.cli.commands.bundle as cli_bundle
from patcher.cli.parser import main

tmp = Path(sys.argv[1])

def resolve(site, chosen, log):  # uv's install, without the index: the wheel and a big file
    with zipfile.ZipFile(chosen.patched_wheel) as wheel:
        wheel.extractall(site)
    (site / "blob").write_bytes(os.urandom(24 << 20))  # incompressible: xz takes seconds

def command(args):  # the command's own steps before the packing need the index
    def progress(message):
        if message.startswith("packing"):
            (tmp / "packing").touch()
    bundle.build(plan(tmp / "wheels", compression=6), args.out, progress)
    return 0

bundle.resolve_into = resolve
cli_bundle.command_bundle = command
sys.exit(main(["bundle", "--vllm", "0.20.0", "--target-python", "3.11", "--out", sys.argv[2]]))
"""


@pytest.mark.skipif(shutil.which("xz") is None, reason="packs with Python's lzma: no pipe")
@pytest.mark.parametrize(("name", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_bundle_packs_ends_in_one_line(tmp_path, name, status):
    script = tmp_path / "drive.py"
    script.write_text(DRIVER.format(tests=str(TESTS)))
    work, out = tmp_path / "work", tmp_path / "work" / "bundle"
    work.mkdir()
    process = subprocess.Popen(
        [sys.executable, str(script), str(work), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    deadline = time.monotonic() + 120
    while not (work / "packing").exists() and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1)  # xz busy, the tar written into its pipe
    assert process.poll() is None, process.communicate()
    if name == "SIGINT":
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the whole group, xz included
    else:
        process.send_signal(signal.SIGTERM)  # kill PID: patcher alone
    stdout, stderr = process.communicate(timeout=120)
    assert (process.returncode, stderr) == (status, "patcher: interrupted\n")
    assert stdout == ""
    left = sorted(p.name for p in work.iterdir())
    assert left == ["packing", "wheels"], left  # no staging folder, no bundle, no part


def test_an_interrupt_behind_another_error_is_the_interrupt():
    try:
        try:
            raise Terminated
        except KeyboardInterrupt:
            raise BrokenPipeError(32, "Broken pipe")  # noqa: B904 (the chain is the point)
    except BrokenPipeError as error:
        stop = interruption(error)
    assert isinstance(stop, Terminated)
    assert interruption(ValueError("no")) is None
    assert interrupted(KeyboardInterrupt()) == 130 and interrupted(Terminated()) == 143
