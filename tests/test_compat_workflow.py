"""The compat workflow's first job, run here on CPU: its step, and the JSON its fan-out reads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from patcher import patchset as patchsets

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "compat.yml"


def jobs() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def test_the_fan_out_reads_the_first_jobs_pairs():
    patch = jobs()["patch"]
    assert patch["needs"] == "matrix"
    assert patch["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.pairs) }}"
    used = set(re.findall(r"(?<![.\w])matrix\.(\w+)", json.dumps(patch)))
    assert used == {"patchset", "vllm", "serve_cpu"}


@pytest.mark.network
@pytest.mark.heavy  # every release scanned from an empty cache: about 10 min (618 s, load 3-11)
def test_the_matrix_step_runs_and_its_outputs_are_the_fan_out(tmp_path):
    """The step's own shell script, with GitHub's output files replaced by local ones."""
    (step,) = [s for s in jobs()["matrix"]["steps"] if s.get("id") == "matrix"]
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    pairs = json.loads(outputs["pairs"])
    assert int(outputs["count"]) == len(pairs["include"]) > 0
    for entry in pairs["include"]:
        assert set(entry) == {"patchset", "vllm", "serve_cpu"}
        assert isinstance(entry["serve_cpu"], bool)
    rows = json.loads((tmp_path / "reports" / "matrix.json").read_text())
    assert {r["patchset"] for r in rows} == set(patchsets.available())
    needs_patch = {(r["patchset"], r["vllm"]) for r in rows if r["verdict"] == "needs-patch"}
    assert {(e["patchset"], e["vllm"]) for e in pairs["include"]} == needs_patch
    assert ("glm4-moe-eagle3", "0.33.0") in needs_patch
    serving = {(e["patchset"], e["vllm"]) for e in pairs["include"] if e["serve_cpu"]}
    assert ("glm4-moe-eagle3", "0.32.0") in serving
    assert not {name for name, _ in serving} & {"kimi-k2-eagle3"}  # its model has no replica
    assert ("eagle3-aux-ids-v2", "0.32.0") in needs_patch
    assert not {name for name, _ in serving} & {"eagle3-aux-ids-v2"}  # CPU servers run V1
    text = summary.read_text()
    assert text.startswith("# vLLM compatibility matrix")
    # The scan's totals per release the matrix read (issue 20), in the job summary too.
    section = text.split("## Architectures and EAGLE-3 on vllm (patcher scan)\n", 1)[1]
    scanned = {line.split(" | ")[0].strip("| ") for line in section.splitlines()[3:] if line}
    assert scanned == {r["vllm"] for r in rows}
