"""Pairing probe results before -> after, and turning a dead probe into a failed check."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from verify_helpers import fake_wheel

from patcher.checks import CHECKS
from patcher.errors import PatcherError
from patcher.venvs import Venv, VenvPlan
from patcher.verify import probe, runner
from patcher.verify.report import CheckOutcome


def fake_venv(tmp_path: Path, script: str, sha: str = "a" * 64) -> Venv:
    """A 'venv' whose python is a shell script standing in for the probe."""
    python = tmp_path / sha[:4] / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return Venv(python.parent.parent, sha[:20], VenvPlan(), created=False)


def test_each_check_s_result_line_is_read_after_any_noise(tmp_path):
    lines = [
        json.dumps({"check": name, "status": "pass", "detail": f"fine {name}", "seconds": 1.5})
        for name in ("speculative-config", "mm-image-token")
    ]
    script = "echo 'INFO log line'\n" + "".join(f"echo '{line}'\n" for line in lines)
    env = fake_venv(tmp_path, script)
    got = runner.run_probe(env, ["speculative-config", "mm-image-token"], tmp_path / "w")
    assert got == {
        "speculative-config": CheckOutcome("pass", "fine speculative-config", 1.5),
        "mm-image-token": CheckOutcome("pass", "fine mm-image-token", 1.5),
    }


def test_a_probe_that_dies_fails_the_checks_it_did_not_report_with_its_last_words(tmp_path):
    line = json.dumps(
        {"check": "speculative-config", "status": "pass", "detail": "ok", "seconds": 1}
    )
    env = fake_venv(tmp_path, f"echo '{line}'\necho 'Segmentation fault' >&2\nexit 139\n")
    got = runner.run_probe(env, ["speculative-config", "mm-image-token"], tmp_path / "w")
    assert got["speculative-config"].status == "pass"
    assert got["mm-image-token"] == CheckOutcome(
        "fail", "error: probe exited 139: Segmentation fault", 0.0
    )


def test_the_probe_runs_isolated_in_its_workdir_and_offline(tmp_path):
    env = fake_venv(
        tmp_path,
        'printf \'{"check": "%s", "status": "pass", "detail": "%s %s %s %s %s %s %s %s", '
        '"seconds": 0}\\n\' "$3" "$1" "$2" "$3" "$4" "$5" "$6" "$PWD" "$HF_HUB_OFFLINE"\n',
    )
    workdir = tmp_path / "w"
    got = runner.run_probe(env, ["mm-image-token", "aux-hidden-states"], workdir)
    assert got["mm-image-token"].detail == (
        f"-I {runner.PROBE} mm-image-token aux-hidden-states --workdir {workdir} {workdir} 1"
    )


def test_probe_environment_keeps_vllm_caches_in_the_venv(tmp_path):
    env = fake_venv(tmp_path, "")
    assert runner.probe_environment(env)["VLLM_CACHE_ROOT"] == str(env.path / "vllm-cache")


def test_checks_run_once_each_and_all_by_default():
    assert runner._select(None, "m:CausalLM:Backbone:model") == CHECKS
    assert runner._select(["aux-hidden-states", "aux-hidden-states"], None) == (
        "aux-hidden-states",
    )


def test_a_wheel_of_another_version_is_refused(tmp_path):
    wheel = fake_wheel(tmp_path, version="0.17.0")
    with pytest.raises(PatcherError, match=r"is vllm 0\.17\.0, not 0\.16\.0"):
        runner._check_version(wheel, "0.16.0")
    with pytest.raises(PatcherError, match="not a vLLM version"):
        runner._check_version(wheel, "latest")


def test_a_patched_wheel_keeps_the_release_in_its_public_version(tmp_path):
    runner._check_version(fake_wheel(tmp_path, version="0.16.0+kimi.eagle3"), "0.16.0")


@pytest.fixture
def fake_runs(tmp_path, monkeypatch):
    """verify_wheels with venvs and probes replaced: official fails, patched passes."""
    (tmp_path / "official").mkdir()
    (tmp_path / "patched").mkdir()
    official = fake_wheel(tmp_path / "official")
    patched = fake_wheel(tmp_path / "patched", version="0.16.0+kimi.eagle3")
    keys = {official: "0" * 20, patched: "1" * 20}

    def verify_venvs(*wheels: Path | None) -> list[Venv]:
        return [Venv(tmp_path / w.name, keys[w], VenvPlan(), True) for w in wheels if w]

    def run_probe(
        env: Venv, checks: list[str], workdir: Path, model: str | None = None
    ) -> dict[str, CheckOutcome]:
        if env.key == keys[official]:
            return {check: CheckOutcome("fail", f"barrier: {check}", 1.0) for check in checks}
        return {check: CheckOutcome("pass", f"fixed {check}", 1.0) for check in checks}

    monkeypatch.setattr(runner, "verify_venvs", verify_venvs)
    monkeypatch.setattr(runner, "run_probe", run_probe)
    return official, patched, keys


def test_results_pair_the_official_and_the_patched_wheel(fake_runs):
    official, patched, _ = fake_runs
    report = runner.verify_wheels(official, patched, "0.16.0", ["aux-hidden-states"])
    assert report.ok and report.setup_seconds >= 0
    assert report.to_json() == {
        "vllm": "0.16.0",
        "wheel": patched.name,
        "checks": [
            {
                "name": "aux-hidden-states",
                "before": "fail",
                "after": "pass",
                "detail": "before: barrier: aux-hidden-states | after: fixed aux-hidden-states",
            }
        ],
    }


def test_without_a_patched_wheel_only_before_runs(fake_runs):
    official, _, _ = fake_runs
    report = runner.verify_wheels(official, None, "0.16.0")
    assert [c.name for c in report.checks] == [c for c in CHECKS if c not in probe.MODEL_CHECKS]
    assert all(c.after is None for c in report.checks)
    assert report.wheel == official.name and not report.ok


def test_the_official_wheel_as_its_own_patch_is_refused(fake_runs):
    official, _, _ = fake_runs
    with pytest.raises(PatcherError, match="is the official wheel itself"):
        runner.verify_wheels(official, official, "0.16.0")


def test_a_model_check_gets_the_patchset_model_and_others_do_not(tmp_path):
    """The stand-in probe echoes its arguments as the detail of each check it is given."""
    env = fake_venv(
        tmp_path,
        'for c in "$@"; do case "$c" in --*) break;; esac;'
        ' printf \'{"check": "%s", "status": "pass", "detail": "%s", "seconds": 0}\\n\''
        ' "$c" "$*"; done\n',
    )
    model = "vllm.model_executor.models.glm4_moe:Glm4MoeForCausalLM:Glm4MoeModel:model"
    workdir = tmp_path / "w"
    checked = runner.run_probe(env, ["eagle3-backbone"], workdir, model)
    assert checked["eagle3-backbone"].detail.endswith(f"--workdir {workdir} --model {model}")
    other = runner.run_probe(env, ["mm-image-token"], workdir, model)
    assert other["mm-image-token"].detail.endswith(f"--workdir {workdir}")


def test_by_default_every_check_runs_but_a_model_check_needs_a_model():
    assert "eagle3-backbone" not in runner._select(None, None)
    assert "eagle3-backbone" in runner._select(None, "m:CausalLM:Backbone:model")
    assert runner._select(None, None) == tuple(
        c for c in probe.CHECKS if c not in probe.MODEL_CHECKS
    )


def test_a_replica_check_finds_the_models_configs_in_its_workdir(tmp_path):
    """The stand-in probe reports what the runner wrote for it: the replica of the causal-LM
    class the model names, as ``vllm serve`` would be given it."""
    env = fake_venv(
        tmp_path,
        'for c in "$@"; do case "$c" in --*) break;; esac;'
        ' printf \'{"check": "%s", "status": "pass", "detail": "%s", "seconds": 0}\\n\''
        ' "$c" "$(ls "$PWD/$c/replica" 2>/dev/null | tr "\\n" " ")"; done\n',
    )
    model = "vllm.model_executor.models.glm4_moe:Glm4MoeForCausalLM:Glm4MoeModel:model"
    workdir = tmp_path / "w"
    checked = runner.run_probe(env, ["eagle3-model-type", "eagle3-backbone"], workdir, model)
    assert checked["eagle3-model-type"].detail.split() == [
        "drafter",
        "patcher-replica.json",
        "target",
    ]
    assert checked["eagle3-backbone"].detail == ""  # only the checks that load configs get one
    config = json.loads((workdir / "eagle3-model-type/replica/target/config.json").read_text())
    assert config["architectures"] == ["Glm4MoeForCausalLM"]
