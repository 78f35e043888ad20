"""Each codemod is declared once: its name in the registry's table, the rest on its class."""

from __future__ import annotations

import dataclasses

import pytest

from patcher.codemods.base import Model
from patcher.codemods.registry import CODEMODS, WHERE

NAMES = sorted(WHERE)


@pytest.mark.parametrize("name", NAMES)
def test_a_codemod_s_name_and_options_are_declared_in_one_place_each(name: str) -> None:
    codemod = CODEMODS[name]
    assert not hasattr(codemod, "NAME") and not hasattr(codemod, "Options")
    options = codemod.options_type()
    assert dataclasses.is_dataclass(options)
    assert codemod.DESCRIPTION
    fields = {f.name: "vllm/x.py" for f in dataclasses.fields(options) if f.name != "files"}
    fields = {k: v if k.endswith("module") else "X" for k, v in fields.items()}
    instance = codemod(Model(types=("kimi_k2",)), options(**fields))
    assert instance.name == name
