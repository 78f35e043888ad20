"""Codemods' options as typed values, checked when a patchset is parsed.

This module imports no libcst, so a patchset can be validated without paying for a parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class BackboneOptions:
    """Where the model is: its module, causal-LM class, backbone class and the attribute holding
    the backbone."""

    module: str
    causal_lm: str
    backbone: str
    attribute: str = "model"

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> BackboneOptions:
        """The options, or a ValueError naming every problem at once."""
        names = [f.name for f in fields(cls)]
        problems = [f"unknown option {key!r}" for key in raw if key not in names]
        for field in fields(cls):
            value = raw.get(field.name)
            if value is None and field.name != "attribute":
                problems.append(f"missing option {field.name!r}")
            elif value is not None and (not isinstance(value, str) or not value):
                problems.append(f"option {field.name!r} must be a non-empty string")
        module = raw.get("module")
        if isinstance(module, str) and not module.endswith(".py"):
            problems.append(f"option 'module' must be a .py path in the tree, got {module!r}")
        if problems:
            raise ValueError(f"eagle3-backbone: {'; '.join(problems)}")
        return cls(**{k: v for k, v in raw.items() if k in names})


OPTIONS: dict[str, type[BackboneOptions]] = {"eagle3-backbone": BackboneOptions}
"""The codemods whose options have a type; ``parse`` raises ValueError naming every problem."""
