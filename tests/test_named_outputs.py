"""Named outputs, stdout, and bad input, through the installed ``patcher`` command (issue 22).

An output path is written as what it is: a regular file or a new name atomically, a symlink's
target atomically with the link kept, a device or a FIFO in place, ``-`` to stdout; a missing
folder is an error outside ``reports/`` and ``dist/``. Stdout that fails (a full disk, a reader
that went away) is one line or a quiet end, never a traceback. Input that would make unbounded
work (a vocabulary of 10**12, code nested 1000 deep) is one line, quickly.

Every command runs as users run it, the console script in a process of its own, against a
release on a loopback index (``fakeindex``); the last test checks in process that the folders
patcher makes in its cache are not held to the rule for named ones. Stand-in: a character
device made with mknod as root, with /dev/full's numbers, so that a regression replaces that node
and not the machine's.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import fakeindex
import pytest
from commandline import PATCHER
from conftest import copy_tree
from fakeindex import SPECULATIVE, VERSION, FakeIndex
from pytest_httpserver import HTTPServer
from test_build_wheel import small_wheel
from test_integrity import read_only  # noqa: F401  (a fixture: chattr +i)

from patcher import patchset as patchsets
from patcher.cache import sha256_of
from patcher.engine import run_patchset
from patcher.official import patched_wheel
from patcher.outputs.wheel import WheelPlan
from patcher.sources.wheel import WheelSource

PATCHSET = "kimi-k2-eagle3"
MEMORY_CAP = 2 << 30
"""Address space for each command: a regression that grows without bound fails in a second
instead of taking the shared machine's memory (the issue saw 24 GB before the OOM killer)."""


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from fakeindex.loopback_server()


@pytest.fixture(scope="module")
def wheel_bytes() -> bytes:
    return fakeindex.build_wheel(padding=1024)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fakeindex.own_cache(tmp_path, monkeypatch, timeout=10)


@pytest.fixture
def fake(server: HTTPServer, wheel_bytes: bytes) -> Iterator[FakeIndex]:
    yield from fakeindex.fake_index(server, wheel_bytes)


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(*args: str, cwd: Path | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """The installed command's exit status, stdout and stderr."""
    done = subprocess.run(
        [PATCHER, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        preexec_fn=cap_memory,
    )
    return done.returncode, done.stdout, done.stderr


def one_line(code: int, err: str) -> str:
    """The one error line of a failed command, with no traceback: stderr's last line, after
    the table of context a command may have printed there (build-wheel's)."""
    assert "Traceback" not in err, err[-2000:]
    assert code != 0
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("patcher: error: ")]
    assert errors == lines[-1:], err[-2000:]
    return lines[-1].removeprefix("patcher: error: ")


def matrix(fake: FakeIndex, *extra: str, cwd: Path | None = None) -> tuple[int, str, str]:
    index = ["--index-url", fake.url, "--platform", "x86_64", "--patchset", PATCHSET]
    return run("matrix", "--versions", VERSION, *index, *extra, cwd=cwd)


def rows_of(text: str) -> list[dict]:
    """The matrix document's rows (``patcher.report``)."""
    rows = json.loads(text)["releases"]
    assert [row["patchset"] for row in rows] == [PATCHSET]
    return rows


@pytest.fixture
def full_device(tmp_path: Path) -> Path:
    """A device whose writes fail with ENOSPC: a node of our own as root, else /dev/full."""
    if os.geteuid() != 0:
        return Path("/dev/full")
    node = tmp_path / "full"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return node


# --- named output files ----------------------------------------------------------------------


def test_a_full_device_is_one_line_and_stays_a_device(fake: FakeIndex, full_device: Path) -> None:
    code, _, err = matrix(fake, "--json", str(full_device))
    assert one_line(code, err) == f"cannot write {full_device}: No space left on device"
    assert stat.S_ISCHR(full_device.stat().st_mode)


def test_a_symlink_keeps_its_link_and_its_target_gets_the_output(
    fake: FakeIndex, tmp_path: Path
) -> None:
    target = tmp_path / "reports-of-mine" / "matrix.json"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    code, _, err = matrix(fake, "--json", str(link))
    assert code in (0, 1), err
    assert link.is_symlink() and link.readlink() == target
    assert rows_of(target.read_text())[0]["vllm"] == VERSION


def test_a_fifo_is_written_in_place_for_its_reader(fake: FakeIndex, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = matrix(fake, "--json", str(fifo))
    reader.join(timeout=30)
    assert code in (0, 1), err
    assert not reader.is_alive(), "the FIFO's reader got nothing: the FIFO was replaced"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert rows_of(received[0].decode())[0]["vllm"] == VERSION


def test_a_fifo_no_process_reads_is_one_line_not_a_hang(
    fake: FakeIndex, tmp_path: Path, monkeypatch
) -> None:
    """A blocking open of a FIFO without a reader waits for ever: matrix --json FIFO hung past
    75 s (second hostile pass). After FIFO_WAIT seconds, it is refused in one line."""
    from patcher.errors import PatcherError
    from patcher.outputs import named

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setattr(named, "FIFO_WAIT", 1.0)
    started = time.monotonic()
    with pytest.raises(PatcherError, match="a FIFO no process read in"):
        named.write_file(fifo, b"{}", "--json")
    assert time.monotonic() - started < 10
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_link_to_a_descriptor_is_written_in_place(fake: FakeIndex, tmp_path: Path) -> None:
    """``--json /dev/stdout`` with stdout on a file: that file gets the JSON after the tables,
    and the link stays (a link of our own to /proc/self/fd/1 stands in for /dev/stdout, which
    a regression run as root would replace with a file for the whole machine)."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    captured = tmp_path / "captured.txt"
    index = ["--index-url", fake.url, "--platform", "x86_64", "--patchset", PATCHSET]
    with captured.open("w") as stdout:
        done = subprocess.run(
            [PATCHER, "matrix", "--versions", VERSION, *index, "--json", str(link)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode in (0, 1), done.stderr
    assert link.is_symlink()
    tables, _, report = captured.read_text().partition("\n{\n")
    assert PATCHSET in tables
    assert rows_of("{\n" + report)[0]["vllm"] == VERSION


def test_dash_is_stdout_and_the_tables_go_to_stderr(fake: FakeIndex, tmp_path: Path) -> None:
    code, out, err = matrix(fake, "--json", "-", cwd=tmp_path)
    assert code in (0, 1), err
    assert rows_of(out)[0]["vllm"] == VERSION
    assert PATCHSET in err  # the table's title
    assert not (tmp_path / "-").exists()


def test_format_json_is_the_document_json_dash_writes(fake: FakeIndex, tmp_path: Path) -> None:
    """issue 29: ``--format json`` printed each table as a JSON line; now one document, the
    same as ``--json -``, with the tables on stderr; the two together are refused."""
    code, out, err = matrix(fake, "--format", "json", cwd=tmp_path)
    assert code in (0, 1), err
    assert json.loads(out) == json.loads(matrix(fake, "--json", "-", cwd=tmp_path)[1])
    assert PATCHSET in err
    code, _, err = matrix(fake, "--format", "json", "--json", "-")
    assert one_line(code, err) == "--json and --format json cannot both write to stdout (-)"


def test_each_long_step_is_a_line_off_a_terminal(fake: FakeIndex) -> None:
    """issue 29: off a TTY a long step printed nothing; with -v each was a line on stderr.
    issue 41: a cold matrix with stderr to a file said nothing in 99 s without -v; now each
    step is a line by default (reading the releases, how many are settled, each release's
    registry scan), -v or not, and -q silences them."""
    for argv in (["-v", "matrix"], ["matrix", "-v"], ["matrix"]):
        index = ["--index-url", fake.url, "--platform", "x86_64", "--patchset", PATCHSET]
        code, _, err = run(*argv, "--versions", VERSION, *index, "--markdown", "-")
        assert code in (0, 1), err
        assert "patcher: reading 1 releases" in err
        assert "patcher: settled 1 of 1 vllm releases" in err
        assert f"patcher: scanning the model registry of vllm {VERSION} (1/1)" in err
    code, _, err = matrix(fake, "--markdown", "-", "-q")
    assert "patcher: scanning" not in err and "settled" not in err and "reading" not in err


def test_under_format_json_stderr_holds_progress_and_errors_only(fake: FakeIndex) -> None:
    """issue 41: under ``--format json`` (and ``--json -``) the human tables were copied to
    stderr (9.8 KB for one patchset's matrix); now stderr carries progress lines and the
    errors alone, as gh's ``--json`` leaves it."""
    for output in (["--format", "json"], ["--json", "-"]):
        code, out, err = matrix(fake, *output)
        assert code == 1, err  # the stand-in wheel drifts from kimi-k2-eagle3
        assert rows_of(out)[0]["vllm"] == VERSION
        lines = err.splitlines()
        assert not [line for line in lines if "|" in line or "---" in line], err
        *said, problem, last = lines  # the progress, the drifted row, the error
        assert said == ["patcher: reading 1 releases", "patcher: settled 1 of 1 vllm releases"]
        assert problem == f"{PATCHSET} {VERSION}: unsupported, expected needs-patch"
        assert last == "patcher: error: 1 row(s) drifted or failed"
        code, out, err = matrix(fake, *output, "-q")
        assert rows_of(out)[0]["vllm"] == VERSION
        assert err.splitlines() == [problem, last], err


def test_two_outputs_on_stdout_are_refused(fake: FakeIndex) -> None:
    code, _, err = matrix(fake, "--json", "-", "--markdown", "-")
    assert one_line(code, err) == "--json and --markdown cannot both write to stdout (-)"


def test_two_outputs_naming_one_file_are_refused_before_anything_is_written(
    fake: FakeIndex, tmp_path: Path
) -> None:
    """Spelled alike, by another path or through a link: one would overwrite the other, exit 0
    (second hostile pass)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.md").symlink_to(tmp_path / "out.md")
    target = tmp_path / "out.md"
    for other in (target, tmp_path / "sub" / ".." / "out.md", tmp_path / "link.md"):
        code, _, err = matrix(fake, "--json", str(target), "--markdown", str(other))
        assert one_line(code, err).startswith("--json and --markdown name the same file"), err
        assert not target.exists()


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--fanout"])
def test_a_missing_folder_is_one_line_before_the_work(
    fake: FakeIndex, tmp_path: Path, flag: str
) -> None:
    target = tmp_path / "no-such-folder" / "out.json"
    code, _, err = matrix(fake, flag, str(target))
    assert one_line(code, err) == (
        f"cannot write {target}: its folder {target.parent} does not exist ({flag})"
    )
    assert not target.parent.exists()
    assert not fake.page.served, "the matrix was computed before the output was checked"


def test_the_own_default_folders_are_made(fake: FakeIndex, tmp_path: Path) -> None:
    code, _, err = matrix(fake, "--json", "reports/compat/matrix.json", cwd=tmp_path)
    assert code in (0, 1), err
    assert rows_of((tmp_path / "reports/compat/matrix.json").read_text())


def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(
    fake: FakeIndex, tmp_path: Path
) -> None:
    target = tmp_path / "matrix.md"
    target.write_text("old\n")
    target.chmod(0o600)
    code, _, err = matrix(fake, "--markdown", str(target))
    assert code in (0, 1), err
    assert target.read_text().startswith("# vLLM compatibility matrix")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read {path}: No such file or directory (--readme)"),
        (b"\xff\xfe not text", "{path}: not UTF-8 text (byte 0) (--readme)"),
    ],
    ids=["missing", "not UTF-8"],
)
def test_a_bad_readme_is_one_line_before_the_work(
    fake: FakeIndex, tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "README.md"
    if content is not None:
        path.write_bytes(content)
    code, _, err = matrix(fake, "--readme", str(path))
    assert one_line(code, err) == message.format(path=path)
    assert not fake.page.served


@pytest.mark.parametrize("kind", ["a FIFO", "a device"])
def test_a_readme_that_is_no_regular_file_is_one_line_not_read_forever(
    fake: FakeIndex, tmp_path: Path, full_device: Path, kind: str
) -> None:
    """A FIFO without a writer blocks a read; /dev/full reads zeros without end."""
    path = full_device
    if kind == "a FIFO":
        path = tmp_path / "readme-fifo"
        os.mkfifo(path)
    code, _, err = matrix(fake, "--readme", str(path))
    assert one_line(code, err) == f"cannot read {path}: not a regular file (--readme)"
    assert not fake.page.served


# --- stdout ------------------------------------------------------------------------------------


def test_diff_to_a_full_disk_is_one_line(fake: FakeIndex, full_device: Path) -> None:
    index = ["--index-url", fake.url, "--platform", "x86_64", "--patchset", PATCHSET]
    with full_device.open("w") as stdout:
        done = subprocess.run(
            [PATCHER, "diff", "--vllm", VERSION, *index, "--allow-drift"],  # the stand-in drifts
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert one_line(done.returncode, done.stderr) == (
        "cannot write to stdout: No space left on device"
    )
    assert done.returncode == 2


WHITELIST_ONLY = """
name = "whitelist-only"
patches = [{ codemod = "eagle3-whitelist" }]

[model]
types = ["kimi_k2"]
"""


@pytest.mark.parametrize("command", ["diff", "matrix", "apply"])
def test_a_closed_pipe_ends_quietly(fake: FakeIndex, tmp_path: Path, command: str) -> None:
    """As ``git log | true`` does: no word, the status of a process ended by SIGPIPE."""
    whitelist = tmp_path / "whitelist.toml"  # the one patch the loopback release takes
    whitelist.write_text(WHITELIST_ONLY)
    index = ["--index-url", fake.url, "--platform", "x86_64", "--patchset", str(whitelist)]
    tree = tmp_path / "tree"
    (tree / "vllm/config").mkdir(parents=True)
    (tree / "vllm/__init__.py").write_text("")
    (tree / "vllm/config/speculative.py").write_text(SPECULATIVE)
    args = {
        "diff": ["diff", "--vllm", VERSION, *index],
        "matrix": ["matrix", "--versions", VERSION, *index],
        "apply": ["apply", "-q", "--source", str(tree), "--vllm-version", VERSION, *index[4:]],
    }[command]
    process = subprocess.Popen(
        [PATCHER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the command writes: it reads a release first
    err = process.stderr.read()
    progress = ("patcher: reading ", "patcher: settled ")  # issue 41: the steps, off a terminal
    said = [line for line in err.splitlines() if not line.startswith(progress)]
    assert (process.wait(timeout=120), said) == (141, []), err


# --- bounded input and one-line errors --------------------------------------------------------


def model_dir(tmp_path: Path, **config: object) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    base = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"}
    (folder / "config.json").write_text(json.dumps({**base, **config}))
    return folder


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "no vocab_size"),
        ({"vocab_size": "lots"}, 'vocab_size is "lots", not a whole number'),
        ({"vocab_size": None}, "vocab_size is null, not a whole number"),
        ({"vocab_size": 10**12}, f"vocab_size {10**12} is not in 1..1048576"),
    ],
    ids=["missing", "a string", "null", "10**12"],
)
def test_a_config_with_a_bad_vocabulary_is_one_line_and_quick(
    tmp_path: Path, config: dict, problem: str
) -> None:
    model = model_dir(tmp_path, **config)
    started = time.monotonic()
    code, _, err = run("replica", "--from", str(model), "--out", str(tmp_path / "replica"))
    assert one_line(code, err) == f"cannot make a replica: {model / 'config.json'}: {problem}"
    assert time.monotonic() - started < 30
    assert not (tmp_path / "replica").exists()


def test_every_size_a_replica_keeps_is_bounded_and_all_are_named(tmp_path: Path) -> None:
    model = model_dir(tmp_path, vocab_size=151552, kv_lora_rank=10**9, n_shared_experts=10**6)
    code, _, err = run("replica", "--from", str(model), "--out", str(tmp_path / "replica"))
    where = model / "config.json"
    assert one_line(code, err) == (
        f"cannot make a replica: {where}: kv_lora_rank {10**9} is more than a replica's 4096; "
        f"{where}: n_shared_experts {10**6} is more than a replica's 4096"
    )


def test_replica_out_that_is_a_file_or_read_only_is_one_line(
    tmp_path: Path,
    read_only,  # noqa: F811
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    code, _, err = run("replica", "--out", str(afile))
    assert one_line(code, err) == f"cannot write to {afile}: it is not a directory (--out)"
    assert afile.read_text() == "mine\n"
    locked = read_only(tmp_path / "locked")
    code, _, err = run("replica", "--out", str(locked / "replica"))
    assert one_line(code, err) == (
        f"cannot write to {locked / 'replica'}: {locked} is not writable (--out)"
    )


def test_a_local_label_too_long_for_a_file_name_is_one_line(tmp_path: Path) -> None:
    wheel = small_wheel(tmp_path)
    code, _, err = run(
        "build-wheel", "--wheel", str(wheel), "--dist", str(tmp_path / "dist"),
        "--patchset", PATCHSET, "--allow-noop", "--local-label", "a" * 5000,
    )  # fmt: skip
    assert one_line(code, err) == (
        "local label of 5000 characters: at most 100, as it goes into the wheel's file name"
    )


def fake_python(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_an_interpreter_answering_other_json_is_one_line(tmp_path: Path) -> None:
    python = fake_python(tmp_path, 'echo \'{"python": "x"}\'')
    code, _, err = run("status", "--installed", "--python", str(python))
    assert one_line(code, err) == (
        f"{python} answered JSON without the distributions patcher asked for "
        "(KeyError: 'found'); is it a Python interpreter?"
    )


def test_a_program_that_is_not_python_is_one_line_without_the_script() -> None:
    code, _, err = run("status", "--installed", "--python", "/bin/ls")
    message = one_line(code, err)
    assert message.startswith("/bin/ls is not a Python interpreter patcher can ask (exit ")
    assert "importlib" not in message


@pytest.mark.slow
def test_a_hanging_interpreter_times_out_and_leaves_nothing_running(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    python = fake_python(tmp_path, f"(sleep 300; touch {marker}) & sleep 300")
    started = time.monotonic()
    code, _, err = run("status", "--installed", "--python", str(python), timeout=200)
    assert one_line(code, err) == (f"{python} did not answer in 20 s; is it a Python interpreter?")
    assert time.monotonic() - started < 60
    alive = subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True, text=True)
    assert not alive.stdout.strip(), "the interpreter's child was left running"


@pytest.mark.network
def test_code_nested_too_deep_for_libcst_is_one_line_naming_the_file_quickly(
    tree_0_16: Path, tmp_path: Path
) -> None:
    """``X = 1+1+...`` with 1000 terms is valid CPython; libcst's walk of it is not."""
    tree = copy_tree(tree_0_16, tmp_path / "tree")
    speculative = tree / "vllm/config/speculative.py"
    text = speculative.read_text()
    speculative.write_text(text + "\nX = " + "+".join(["1"] * 1000) + "\n")
    line = text.count("\n") + 2
    started = time.monotonic()
    code, out, err = run("diff", "--source", str(tree))
    assert time.monotonic() - started < 60
    assert out == ""
    assert one_line(code, err) == (
        f"eagle3-whitelist failed: vllm/config/speculative.py:{line} (1002 levels): code nested "
        "deeper than libcst can walk within Python's recursion limit of 1000"
    )


def test_a_wheel_folder_of_patchers_own_is_made_with_its_parents(tmp_path: Path) -> None:
    """The rule on missing folders is for the ones a flag names: verify and serve-bench build
    their patched wheel in the cache, in folders of their own that do not exist yet."""
    wheel = small_wheel(tmp_path)
    with WheelSource(wheel) as source:
        result = run_patchset(patchsets.load(PATCHSET), source)
    built = patched_wheel(WheelPlan.labelled(wheel, sha256_of(wheel), result, "mine"))
    assert built.is_file() and built.is_relative_to(tmp_path / "cache" / "patched")
