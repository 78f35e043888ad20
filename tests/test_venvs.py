"""Lean venvs: keyed by their plan, renamed into place whole, reused, layered, CUDA-free."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fakeindex import loopback_server
from verify_helpers import fake_wheel

from patcher import venvs
from patcher.elf import needed_libraries
from patcher.errors import PatcherError
from patcher.pipconfig import parse
from patcher.venvs import MARKER, VenvPlan, clone_tree, ready_venv, venv_key


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """Every build in order; ``_build`` writes only the marker, the way the real one ends."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    done: list[Path] = []

    def build(path: Path, plan, key: str, base, log: Path) -> tuple[str, ...]:
        done.append(path)
        (path / MARKER).write_text(json.dumps({"key": key, "dropped": []}))
        return ()

    monkeypatch.setattr(venvs, "_build", build)
    return done


def test_a_venv_is_built_once_under_its_key_and_then_reused(tmp_path, builds):
    plan = VenvPlan(requirements=("six",), wheel=fake_wheel(tmp_path))
    first = ready_venv(plan)
    key = venv_key(plan)
    assert first.created and first.key == key
    assert first.path == tmp_path / "cache" / "envs" / key
    assert builds[0].parent == first.path.parent and builds[0].name.startswith(f".{key}.")
    again = ready_venv(plan)
    assert not again.created and again.path == first.path
    assert len(builds) == 1
    assert sorted(p.name for p in first.path.parent.iterdir()) == [key, f"{key}.lock"]


def test_the_key_follows_the_content_of_the_plan(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    plan = VenvPlan(requirements=("six",), wheel=wheel)
    assert venv_key(plan) == venv_key(VenvPlan(requirements=("six",), wheel=wheel))
    assert venv_key(plan) != venv_key(VenvPlan(requirements=("six>1",), wheel=wheel))
    (tmp_path / "other").mkdir()
    other = fake_wheel(tmp_path / "other", {"vllm/extra.py": "x = 1\n"})
    assert venv_key(plan) != venv_key(VenvPlan(requirements=("six",), wheel=other))


def test_a_layered_plan_builds_its_base_first(tmp_path, builds):
    wheel = fake_wheel(tmp_path)
    base = VenvPlan(requirements=("six",), wheel=wheel)
    ready = ready_venv(VenvPlan(wheel=wheel, base=base))
    assert [p.name.split(".")[1] for p in builds] == [venv_key(base), ready.key]


def test_a_build_that_died_is_cleared_away(tmp_path, builds):
    plan = VenvPlan(requirements=("six",))
    dead = tmp_path / "cache" / "envs" / f".{venv_key(plan)}.k1ll3d"
    (dead / "lib").mkdir(parents=True)
    ready_venv(plan)
    assert not dead.exists()


def test_a_directory_without_its_marker_is_not_a_venv(tmp_path, builds):
    plan = VenvPlan(requirements=("six",))
    (tmp_path / "cache" / "envs" / venv_key(plan) / "bin").mkdir(parents=True)
    assert ready_venv(plan).created


def test_a_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))

    def build(path: Path, plan, key, base, log) -> tuple[str, ...]:
        (path / "half").write_text("")
        raise PatcherError("uv could not install the requirements")

    monkeypatch.setattr(venvs, "_build", build)
    plan = VenvPlan(requirements=("six",))
    with pytest.raises(PatcherError, match="uv could not install"):
        ready_venv(plan)
    assert [p.name for p in (tmp_path / "cache" / "envs").iterdir()] == [f"{venv_key(plan)}.lock"]


def test_the_old_one_venv_per_wheel_layout_is_removed(tmp_path, builds):
    legacy = tmp_path / "cache" / "venvs"
    (legacy / "0123456789abcdef" / "bin").mkdir(parents=True)
    (legacy / "0123456789abcdef.lock").write_text("")
    ready_venv(VenvPlan(requirements=("six",)))
    assert not legacy.exists()


def test_a_plan_reports_every_problem_at_once(tmp_path):
    with pytest.raises(PatcherError) as caught:
        VenvPlan(requirements=("not a req!",), wheel=tmp_path / "x.zip", base=VenvPlan())
    message = str(caught.value)
    for part in ("not a requirement: 'not a req!'", "not a wheel", "takes its requirements"):
        assert part in message


def test_a_missing_wheel_is_a_patcher_error(tmp_path):
    with pytest.raises(PatcherError, match="no such wheel"):
        ready_venv(VenvPlan(wheel=tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"))


def test_a_clone_shares_files_and_leaves_out_bytecode_and_the_marker(tmp_path):
    source = tmp_path / "a"
    (source / "lib" / "__pycache__").mkdir(parents=True)
    (source / "lib" / "m.py").write_text("x = 1\n")
    (source / "lib" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"old")
    (source / MARKER).write_text("{}")
    (source / "lib64").symlink_to("lib")
    clone_tree(source, tmp_path / "b")
    copy = tmp_path / "b" / "lib" / "m.py"
    assert copy.stat().st_ino == (source / "lib" / "m.py").stat().st_ino
    assert not (tmp_path / "b" / "lib" / "__pycache__").exists()
    assert not (tmp_path / "b" / MARKER).exists()
    assert (tmp_path / "b" / "lib64").is_symlink()


def test_needed_libraries_reads_the_dynamic_section_of_a_real_binary(tmp_path):
    assert any(name.startswith("libc.so") for name in needed_libraries(Path(sys.executable)))
    (tmp_path / "x.so").write_bytes(b"not an elf file at all" * 4)
    assert needed_libraries(tmp_path / "x.so") == ()


def test_cuda_binaries_of_the_wheel_are_dropped_and_others_kept(tmp_path):
    venv = tmp_path / "v"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "vllm-0.16.0.dist-info").mkdir(parents=True)
    (site / "vllm").mkdir()
    shutil.copy(
        next(Path(sys.base_prefix).glob("lib/python3*/lib-dynload/*.so")), site / "vllm" / "cpu.so"
    )
    (site / "vllm" / "cuda.so").write_bytes(_elf_needing("libcudart.so.12"))
    (site / "vllm-0.16.0.dist-info" / "RECORD").write_text(
        "vllm/cpu.so,sha256=x,1\nvllm/cuda.so,sha256=y,2\nvllm-0.16.0.dist-info/RECORD,,\n"
    )
    wheel = tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    assert venvs.drop_cuda_binaries(venv, wheel) == ("vllm/cuda.so",)
    assert (site / "vllm" / "cpu.so").exists() and not (site / "vllm" / "cuda.so").exists()


def _elf_needing(library: str) -> bytes:
    """A minimal 64-bit ELF: one PT_LOAD, one PT_DYNAMIC with DT_STRTAB and one DT_NEEDED."""
    import struct

    strtab = b"\0" + library.encode() + b"\0"
    dyn_off, str_off = 64 + 2 * 56, 64 + 2 * 56 + 3 * 16
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, 4096, 4096, 4096)
    dynamic = struct.pack("<IIQQQQQQ", 2, 4, dyn_off, dyn_off, dyn_off, 48, 48, 8)
    entries = struct.pack("<qQqQqQ", 5, str_off, 1, 1, 0, 0)
    return header + load + dynamic + entries + strtab


def test_pip_config_becomes_uv_options_with_pip_precedence():
    sources = parse(
        "global.index-url='https://global.invalid/simple'\n"
        ":env:.index-url='https://env.invalid/simple'\n"
        "global.extra-index-url='file:///a/simple file:///b/simple'\n"
        "install.find-links='/opt/wheels'\n"
        "global.constraint='/etc/c.txt'\n"
        ":env:.default-timeout='180'\n"
        "global.cert='/etc/ca.pem'\n"
    )
    assert sources.uv_options() == [
        "--index-url",
        "https://env.invalid/simple",
        "--extra-index-url",
        "file:///a/simple",
        "--extra-index-url",
        "file:///b/simple",
        "--find-links",
        "/opt/wheels",
        "--constraint",
        "/etc/c.txt",
    ]
    assert sources.uv_environment() == {"SSL_CERT_FILE": "/etc/ca.pem", "UV_HTTP_TIMEOUT": "180"}
    assert parse("").uv_options() == []


PROBE = "tiny-offline-probe"
"""A one-module distribution, served by a loopback index in the test below."""


def probe_wheel() -> tuple[str, bytes]:
    """``PROBE`` 1.0 as a pure-Python wheel with a true RECORD: its file name and bytes."""
    name = PROBE.replace("-", "_")
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": b"ANSWER = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}\n")
    files[f"{info}/RECORD"] = ("".join(rows) + f"{info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return f"{name}-1.0-py3-none-any.whl", buffer.getvalue()


@pytest.fixture
def server():
    yield from loopback_server()


def test_each_build_reads_pips_sources_anew_so_the_offline_guard_does_not_leak(
    tmp_path, monkeypatch, server
):
    """Issue 22, defect 13: a build under the offline guard (this test is not marked network,
    so PIP_INDEX_URL is the closed port) plus PIP_NO_INDEX, as test_serving_venv makes one,
    left its sources memoised for the process, and a later build that should reach an index
    ran ``uv pip install --no-index --index-url http://127.0.0.1:9/simple/``. Real uv builds;
    the index they should reach is a loopback server standing in for the package index."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    plan = VenvPlan(requirements=(f"{PROBE}==1.0",))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(PatcherError, match="uv could not install the requirements"):
        ready_venv(plan)

    filename, data = probe_wheel()
    digest = hashlib.sha256(data).hexdigest()
    page = f'<a href="/files/{filename}#sha256={digest}">{filename}</a>'
    server.expect_request(f"/simple/{PROBE}/").respond_with_data(page, content_type="text/html")
    server.expect_request(f"/files/{filename}").respond_with_data(data)
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", server.url_for("/simple/"))
    venv = ready_venv(plan)
    log = (tmp_path / "cache" / "envs" / f"{venv.key}.log").read_text()
    assert "--no-index" not in log and "127.0.0.1:9/" not in log, log
    assert server.url_for("/simple/") in log
    answer = subprocess.run(
        [str(venv.python), "-c", f"import {PROBE.replace('-', '_')} as m; print(m.ANSWER)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert answer.stdout == "42\n"
