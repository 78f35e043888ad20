"""issue 28's defects of time, input and output: a cached listing from the future, config and
JSON files that are FIFOs, devices or huge, tracebacks where one line belongs, proofs of a
patchset known by name alone. Offline: the fake index on loopback, files made here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from commandline import PATCHER
from fakeindex import VERSION, FakeIndex, build_wheel, loopback_server, own_cache
from pytest_httpserver import HTTPServer
from test_doctor import KIMI
from test_doctor import MLA_DRAFTER as MLA

from patcher.index import PackageIndex


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_cache(tmp_path, monkeypatch, timeout=5)


@pytest.mark.parametrize("ahead", [60, 3600, 10 * 365 * 86400])
def test_a_listing_cached_with_a_future_mtime_is_stale(server, cache, ahead):
    """issue 28: ``now - mtime < 600`` holds for a negative age, so a listing whose mtime lay in
    the future was trusted for ever and a new release never appeared."""
    wheel = build_wheel(padding=0)
    server.clear()
    fake = FakeIndex(server, wheel)
    index = PackageIndex(fake.url)
    assert [str(v) for v in index.releases()] == [VERSION]
    listing = index._listing_cache
    assert listing.is_file()
    future = time.time() + ahead
    os.utime(listing, (future, future))
    server.clear()
    FakeIndex(server, wheel, other_versions=("99.0.0",))
    assert "99.0.0" in {str(v) for v in PackageIndex(fake.url).releases()}


def test_a_leftover_temporary_with_a_future_mtime_is_removed(tmp_path):
    """The other age check of the cache: a partial download left with an mtime ahead of the
    clock was never old enough to remove."""
    from patcher.cache import remove_stale

    left = tmp_path / "x.whl.part"
    left.write_bytes(b"partial")
    future = time.time() + 3600
    os.utime(left, (future, future))
    recent = tmp_path / "y.whl.part"
    recent.write_bytes(b"being written")
    assert remove_stale(tmp_path, "*.part", 600) == [left]
    assert recent.exists()


def limited() -> None:
    """The child's address space capped at 3 GB: a read without bound ends in MemoryError, not
    in the machine's OOM killer."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def hostile_config(folder: Path, kind: str) -> None:
    """``folder/config.json`` as something no config is: a FIFO with no writer, a link to an
    endless device, a 17 MiB file, a folder."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.write(b'{"a": "' + b"x" * (17 << 20) + b'"}')
    else:
        path.mkdir()


def one_line_refusal(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(
        [PATCHER, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,  # a FIFO read hung here for ever
        preexec_fn=limited,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("patcher: error: "), done.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize("kind", ["fifo", "zero", "huge", "folder"])
@pytest.mark.parametrize("command", ["doctor-drafter", "doctor-model", "replica-from"])
def test_a_config_that_is_no_regular_file_is_refused_at_once(tmp_path, command, kind):
    """issue 28: a config.json that is a FIFO hung doctor and replica --from; one linked to
    /dev/zero was read without bound (21.8 GB, then the OOM killer)."""
    good = tmp_path / "good"
    good.mkdir()
    (good / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    bad = tmp_path / "bad"
    hostile_config(bad, kind)
    argv = {
        "doctor-drafter": ["doctor", f"--drafter={bad}", f"--model={good}", "--vllm=0.16.0"],
        "doctor-model": ["doctor", f"--drafter={good}", f"--model={bad}", "--vllm=0.16.0"],
        "replica-from": ["replica", f"--out={tmp_path / 'out'}", f"--from={bad}"],
    }[command]
    line = one_line_refusal(argv, tmp_path)
    assert "not a regular file" in line or "larger than 16 MiB" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["fifo", "zero", "huge"])
def test_a_cache_entry_that_is_no_regular_file_is_dropped_not_read(tmp_path, kind):
    """issue 28: a FIFO in the member cache blocked a worker for ever. A cache entry that is
    not a regular file is not an entry: dropped, so it is made again."""
    hostile_config(tmp_path / "entry", kind)
    entry = tmp_path / "entry" / "config.json"
    code = (
        "import sys; from pathlib import Path; from patcher.cache import read_checked; "
        "print(read_checked(Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(entry)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limited,
    )
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr[-2000:]
    assert not entry.exists() and not entry.is_symlink()


KIMI_TARGET, MLA_DRAFTER = KIMI, MLA  # Kimi-K2.5 (61 layers) and its MLA drafter


def folder_with(path: Path, config: dict) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.mark.network
@pytest.mark.parametrize(
    ("ids", "trained_with", "written"),
    [
        ([1, 30, 60], "sglang", None),  # issue 28: [2, 31, 61] was written
        ([1, 30, 59], "sglang", [2, 31, 60]),
        ([2, 31, 61], "vllm", None),
        ([2, 31, 60], "vllm", [2, 31, 60]),
        ([0, 30, 59], "specforge", [1, 31, 60]),
        ([-1, 30, 59], "vllm", None),
        ([30, 2, 59], "vllm", None),
        ([2, 2, 59], "vllm", None),
    ],
)
def test_doctor_fix_writes_only_ids_the_release_collects(
    tmp_path, capsys, ids, trained_with, written
):
    """issue 28: with --trained-with sglang on a 61-layer target on 0.16.0, --fix wrote
    [2, 31, 61]; 0.16.0's DeepSeek forward never collects id 61 (the last layer's output), and
    doctor run on its own output then reported an error."""
    from patcher.cli.parser import main

    drafter = folder_with(
        tmp_path / "drafter", {**MLA_DRAFTER, "eagle_aux_hidden_state_layer_ids": ids}
    )
    target = folder_with(tmp_path / "kimi", KIMI_TARGET)
    fixed = tmp_path / "fixed"
    argv = ["doctor", f"--drafter={drafter}", f"--model={target}", "--vllm=0.16.0"]
    code = main([*argv, f"--trained-with={trained_with}", f"--fix={fixed}"])
    captured = capsys.readouterr()
    if written is None:
        assert code == 2 and not fixed.exists(), captured.err
        errors = captured.err.strip().splitlines()
        assert errors[-1].startswith("patcher: error: --fix would write ids"), captured.err
        assert "nothing written" in errors[-1]
        return
    assert code in (0, 1) and "Traceback" not in captured.err, captured.err
    config = json.loads((fixed / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == written
    # doctor on its own output finds no error about the ids
    assert main([*argv[:1], f"--drafter={fixed}", *argv[2:]]) in (0, 1)
    again = capsys.readouterr().out
    assert "[ids-invalid]" not in again and "[id-equals-layers]" not in again, again


@pytest.mark.network
@pytest.mark.parametrize(
    "ids", [["1", "30", "60"], [1.0, 30, 59], [True, 30, 59], [[1], 30, 59], [None, 2, 3]]
)
def test_doctor_with_ids_that_are_not_numbers_is_one_line(tmp_path, capsys, ids):
    """issue 28: ids given as strings ended in a TypeError traceback."""
    from patcher.cli.parser import main

    drafter = folder_with(
        tmp_path / "drafter", {**MLA_DRAFTER, "eagle_aux_hidden_state_layer_ids": ids}
    )
    target = folder_with(tmp_path / "kimi", KIMI_TARGET)
    argv = ["doctor", f"--drafter={drafter}", f"--model={target}", "--vllm=0.16.0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "are not all whole numbers" in err[0], err


def no_traceback_one_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    errors = [line for line in lines if line.startswith("patcher: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], done.stderr
    return errors[0]


@pytest.mark.network
def test_a_non_ascii_source_path_under_an_ascii_stdout_is_printed_not_a_traceback(
    tree_0_16, tmp_path
):
    """issue 28: PYTHONIOENCODING=ascii with a non-ASCII --source path: once the tree was
    patched, printing where ended in UnicodeEncodeError."""
    from conftest import copy_tree

    tree = copy_tree(tree_0_16, tmp_path / "tr\u00e9e-\u6a39")
    environ = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for _ in range(2):  # patching, then already patched
        done = subprocess.run(
            [PATCHER, "apply", "--source", str(tree)],
            env=environ,
            capture_output=True,
            text=True,
            errors="replace",
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert '"kimi_k2"' in (tree / "vllm/config/speculative.py").read_text()


@pytest.mark.network
@pytest.mark.parametrize("command", ["list", "apply"])
def test_a_closed_stdout_is_one_line_and_nothing_is_written(tree_0_16, tmp_path, command):
    """issue 28: ``apply`` or ``list`` with stdout closed (``>&-``): AttributeError, rc 120,
    after apply had patched the tree."""
    from conftest import copy_tree

    tree = copy_tree(tree_0_16, tmp_path / "tree")
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    argv = {"list": [PATCHER, "list"], "apply": [PATCHER, "apply", "--source", str(tree)]}
    done = subprocess.run(
        argv[command],
        capture_output=False,
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 2, done.stderr
    assert "stdout is closed" in no_traceback_one_line(done)
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


HTML_PAGE = (
    b"<!DOCTYPE html><html><body>"
    b'<a href="../../files/vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl#sha256=00">'
    b"vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl</a></body></html>"
)


@pytest.mark.parametrize("content_type", ["text/html", "application/vnd.pypi.simple.v1+html"])
def test_an_html_only_index_says_the_json_api_is_required(server, cache, tmp_path, content_type):
    """issue 28: an HTML-only (PEP 503) index gave a JSON parse error."""
    server.clear()
    server.expect_request("/simple/vllm/").respond_with_data(HTML_PAGE, content_type=content_type)
    url = server.url_for("/simple")
    for argv in (["diff", "--vllm", "0.16.0"], ["matrix", "--since", "0.16.0"]):
        done = subprocess.run(
            [PATCHER, *argv, "--index-url", url],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            env={**os.environ, "PATCHER_CACHE_DIR": str(cache)},
        )
        assert done.returncode == 2
        line = no_traceback_one_line(done)
        assert "the index answered HTML" in line and "JSON simple API" in line, line


@pytest.mark.network
def test_a_fifo_in_the_member_cache_is_dropped_and_one_sigterm_ends_the_matrix(tmp_path):
    """issue 28: a FIFO in the member cache blocked a worker, and the first SIGTERM did not end
    the process. A cache of this test's own: the release read once, a member made a FIFO, read
    again; then a matrix, sent one SIGTERM, must end at once."""
    import signal

    environ = {**os.environ, "PATCHER_CACHE_DIR": str(tmp_path / "cache")}

    def diff() -> subprocess.CompletedProcess:
        return subprocess.run(
            [PATCHER, "diff", "--vllm", "0.16.0"],
            env=environ,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )

    first = diff()
    assert first.returncode == 0 and first.stdout, first.stderr
    (member,) = (tmp_path / "cache").glob("checked/members/*/files/vllm/config/speculative.py")
    member.unlink()
    os.mkfifo(member)
    again = diff()
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    assert member.is_file()  # dropped, fetched again
    matrix = subprocess.Popen(
        [PATCHER, "matrix", "--since", "0.15.0"],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    time.sleep(3)
    matrix.send_signal(signal.SIGTERM)
    start = time.monotonic()
    try:
        _, stderr = matrix.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        matrix.kill()
        raise AssertionError("one SIGTERM did not end patcher matrix in 20 s") from None
    assert time.monotonic() - start < 20
    assert matrix.returncode in (143, -signal.SIGTERM, 0), stderr
    assert "Traceback" not in stderr, stderr
