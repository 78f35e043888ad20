"""Output that fits where it goes (issue 21): results on stdout, tables of context on stderr;
piped, plain text without padding or colour; in a terminal, tables fitted to its width.

The terminal is a real pseudo-terminal of the given size (``pty``), the command the installed
console script; the tables are those of built-in patchsets and of a real release's matrix.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from commandline import PATCHER
from conftest import copy_tree

from patcher.cli import terminal

ESCAPE = re.compile(r"\x1b\[[?0-9;]*[A-Za-z]")
"""Colour, and the cursor and erase codes of a transient spinner."""
IDENTIFIERS = (
    "get_eagle3_aux_hidden_state_layers",
    "set_aux_hidden_state_layers",
    "SupportsEagle3",
    "DeepseekV2ForCausalLM",
)


def in_terminal(argv: list[str], columns: int, **env: str) -> str:
    """What ``patcher argv`` writes to a terminal ``columns`` wide (stdout and stderr both)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    process = subprocess.Popen(
        [PATCHER, *argv],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**environ, **env},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def screen(shown: str) -> str:
    """What stays on the screen: no escape codes, and of a line redrawn after ``\\r`` its last."""
    return "\n".join(line.rpartition("\r")[2] for line in ESCAPE.sub("", shown).split("\n"))


def piped(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PATCHER, *argv], capture_output=True, text=True, timeout=300)


def assert_plain(text: str) -> None:
    lines = text.splitlines()
    assert [line for line in lines if line != line.rstrip()] == [], "trailing spaces"
    assert "\x1b" not in text, "colour when piped"


def test_list_piped_is_plain_aligned_text():
    done = piped(["list"])
    assert done.returncode == 0, done.stderr
    assert_plain(done.stdout)
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("patchset "))
    row = next(line for line in lines if line.startswith("kimi-k2.5-eagle3 "))
    assert row.index("KimiK25ForConditionalGeneration") == header.index("model")
    assert "<0.15.0 unsupported" in row and "needs-patch" in row
    assert any(line.startswith("KimiK25ForConditionalGeneration ") for line in lines)


def test_a_piped_table_has_no_line_longer_than_its_widest_row():
    """The rule under the headers is as long as they are: it was as long as the natural width
    of every column, 220 dashes for ``list`` and 600 for build-wheel's status table."""
    done = piped(["list"])
    lines = done.stdout.splitlines()
    rule = next(n for n, line in enumerate(lines) if set(line) == {"-"})
    assert len(lines[rule]) == len(lines[rule - 1])
    assert len(lines[rule]) < max(len(line) for line in lines)


@pytest.mark.parametrize("columns", [80, 100])
def test_list_fits_the_terminal_and_keeps_identifiers_whole(columns):
    shown = in_terminal(["list"], columns)
    plain = screen(shown)
    assert max(len(line) for line in plain.splitlines()) <= columns
    assert "eagle-target-backbone" in plain and "…" not in plain
    assert [line for line in plain.splitlines() if line.strip() == ";"] == []
    assert "\x1b[" in shown  # bold headers: a terminal gets colour


def test_no_color_is_honoured_in_a_terminal():
    assert "\x1b[" not in in_terminal(["list"], 80, NO_COLOR="1")


def test_a_detail_wraps_at_its_separators_never_inside_an_identifier():
    """The issue's 100-column status table: the ``;``-joined detail broke inside
    ``get_eagle3_aux_hidden_state`` / ``_layers`` and left a lone ``;`` on a line."""
    table = terminal.Table("kimi-k2.5-eagle3 on vllm 0.16.0")
    table.add_column("patch")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    detail = "; ".join(f"added {name} to the model class" for name in IDENTIFIERS)
    table.add_row("eagle3-interface", "[yellow]applied[/]", detail)
    for width in (60, 80, 100, 120):
        lines = table.lines(width, colour=False, markup=True)
        assert max(map(len, lines)) <= width, width
        text = "\n".join(lines)
        for name in IDENTIFIERS:
            assert name in text, (width, name)
        assert [line for line in lines if line.strip() in (";", "")] == []
    piped_lines = table.lines(None, colour=False, markup=True)
    assert piped_lines[-1] == f"eagle3-interface  applied  {detail}"


@pytest.mark.network
def test_matrix_headers_are_not_cut_at_80_columns():
    """At 80 columns the matrix's headers were cut to ``eagle3-whi…``."""
    argv = ["matrix", "--versions", "0.16.0", "--patchset", "kimi-k2.5-eagle3"]
    plain = screen(in_terminal(argv, 80))
    lines = plain.splitlines()
    assert "…" not in plain
    assert max(map(len, lines)) <= 80
    rule = next(n for n, line in enumerate(lines) if line.startswith("---"))
    header = "\n".join(lines[:rule])
    for piece in ("eagle3-", "whitelist", "mm-image-", "token", "backbone", "verdict"):
        assert piece in header
    assert any(line.startswith("0.16.0") and "needs-patch" in line for line in lines)


@pytest.mark.network
def test_matrix_piped_has_no_padding():
    done = piped(["matrix", "--versions", "0.16.0,0.18.0", "--patchset", "all"])
    assert done.returncode == 0, done.stderr
    assert_plain(done.stdout)
    assert "needs-patch" in done.stdout
    assert max(map(len, done.stdout.splitlines())) < 200


@pytest.mark.network
def test_apply_prints_its_result_on_stdout_and_its_table_on_stderr(tree_0_16, tmp_path):
    root = copy_tree(tree_0_16, tmp_path / "vllm")
    done = piped(["apply", "--source", str(root)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("patched 4 file(s)") and len(done.stdout.splitlines()) == 1
    assert "verdict: needs-patch" in done.stderr.splitlines()
    assert_plain(done.stderr)
    again = piped(["apply", "--source", str(root), "--quiet"])
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.startswith("nothing to patch:")


@pytest.mark.network
@pytest.mark.slow
def test_build_wheel_captures_exactly_the_wheel_path(tmp_path):
    """``WHEEL=$(patcher build-wheel --vllm 0.16.0)`` held 9 lines: the table came along."""
    done = piped(["build-wheel", "--vllm", "0.16.0", "--dist", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert Path(line).is_file() and Path(line).parent == tmp_path
    assert "verdict: needs-patch" in done.stderr
    assert_plain(done.stderr)
