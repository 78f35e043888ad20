"""The scan's ``present``, read from source, against vLLM's own ``supports_eagle3()`` on CPU:
each architecture's class loaded through the release's real registry in its verify venv (the
official wheel's requirements less the GPU stack, torch 2.13.0+cpu; patcher/verify/), with the
stand-ins ``supports_eagle3_probe.py`` names for the packages that venv leaves out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.index import PackageIndex, machine_platform
from patcher.scan import scan
from patcher.sources.download import download_wheel
from patcher.sources.wheel import WheelSource
from patcher.verify.environment import verify_venvs
from patcher.verify.runner import probe_environment

pytestmark = [pytest.mark.slow, pytest.mark.network, pytest.mark.heavy]

PROBE = Path(__file__).with_name("supports_eagle3_probe.py")
PROBE_TIMEOUT = 1800


def official(version: str) -> Path:
    index = PackageIndex()
    entry = index.release(version).wheel_for(machine_platform())
    assert entry is not None
    return download_wheel(entry, index.client)


def vllm_answers(wheel: Path, architectures: list[str], workdir: Path) -> dict[str, dict]:
    (venv,) = verify_venvs(wheel, None)
    done = subprocess.run(
        [str(venv.python), "-I", str(PROBE)],
        input=json.dumps(architectures),
        capture_output=True,
        text=True,
        env=probe_environment(venv),
        cwd=workdir,
        timeout=PROBE_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        json.loads(line.removeprefix("supports_eagle3 "))
        for line in done.stdout.splitlines()
        if line.startswith("supports_eagle3 ")
    ]
    return {row["architecture"]: row for row in rows}


@pytest.mark.parametrize(("version", "compared"), [("0.33.0", 250), ("0.18.0", 225)])
def test_present_agrees_with_vllms_supports_eagle3_for_every_architecture(
    tmp_path, version, compared
):
    wheel = official(version)
    with WheelSource(wheel) as source:
        findings = scan(source).findings
    present = {f.entry.architecture: f.fit == "present" for f in findings}
    answers = vllm_answers(wheel, list(present), tmp_path)
    assert set(answers) == set(present)
    imported = {name: row for name, row in answers.items() if row["supports_eagle3"] is not None}
    disagree = {
        name: (present[name], row["supports_eagle3"])
        for name, row in imported.items()
        if present[name] != row["supports_eagle3"]
    }
    assert disagree == {}, "scan's present != vLLM's supports_eagle3()"
    not_imported = {n: r["why"] for n, r in answers.items() if r["supports_eagle3"] is None}
    print(
        f"{version}: {len(imported)} compared, not importable on CPU: {not_imported}",
        file=sys.stderr,
    )
    assert len(imported) >= compared, not_imported  # measured: no fewer import on CPU
    assert sum(present.values()) > 0 and not all(present.values())  # both answers occur


def test_the_installed_release_scans_as_its_wheel(capsys):
    """``--installed --python``: the vLLM a venv holds, read in place, gives the wheel's answers."""
    from patcher.cli.parser import main

    wheel = official("0.33.0")
    (venv,) = verify_venvs(wheel, None)
    from patcher.cli.commands.scan import scan_document

    with WheelSource(wheel) as source:
        expected = scan_document(scan(source), source)  # the document --format json prints
    assert main(["scan", "--installed", "--python", str(venv.python), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected
