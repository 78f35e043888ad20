"""serve-bench on CPU serves a model folder's own weights when it has them, random ones when not.

Offline: folders written by the test (a weights file is only looked for, never read here; that
vLLM loads seeded weights for real is tests/test_aux_states_reference.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher.errors import PatcherError
from patcher.serving.cpu import CpuSetup, load_format_for


def folder(root: Path, name: str, weights: bool) -> str:
    path = root / name
    path.mkdir()
    (path / "config.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"stand-in: never read")
    return str(path)


def flag_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_folders_with_weights_are_served_with_them(tmp_path):
    model, drafter = folder(tmp_path, "t", True), folder(tmp_path, "d", True)
    setup = CpuSetup(model, drafter, load_format=load_format_for(model, drafter))
    assert flag_after(setup.command(Path("python"), 1, speculative=True), "--load-format") == "auto"


def test_configs_only_are_served_with_random_weights(tmp_path):
    model, drafter = folder(tmp_path, "t", False), folder(tmp_path, "d", False)
    assert load_format_for(model, drafter) == "dummy"
    assert load_format_for("org/hub-id", "org/drafter") == "dummy"


def test_weights_on_one_side_only_is_refused_in_one_line(tmp_path):
    model, drafter = folder(tmp_path, "t", True), folder(tmp_path, "d", False)
    with pytest.raises(PatcherError) as refused:
        load_format_for(model, drafter)
    assert str(refused.value) == (
        f"{model} holds weights and {drafter} none: vLLM loads both with one --load-format"
    )
