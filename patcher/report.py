"""The one shape of every ``--format json`` document (schema ``patcher.report/1``): an object
naming its schema and its command, and, where the command reports on releases, a ``releases``
array whose rows name each release alike (``package``, ``vllm``, ``patchset``, ``verdict``,
``proofs``). The JSON Schema itself is package data, ``report_schema.json``; docs/json.md shows
it. Data only: this module imports nothing of patcher's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

SCHEMA = "patcher.report/1"
"""The ``schema`` of every document; its number grows when a field changes meaning or goes."""

SCHEMA_FILE = "report_schema.json"
"""The JSON Schema (draft 2020-12), beside this module in the package."""


def schema() -> dict[str, Any]:
    """The JSON Schema every document meets."""
    from importlib import resources

    text = resources.files("patcher").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def document(command: str, **fields: Any) -> dict[str, Any]:
    """A command's document: ``schema`` and ``command`` first, then its own fields."""
    return {"schema": SCHEMA, "command": command, **fields}


def release_row(
    package: str,
    vllm: str,
    patchset: str | None = None,
    verdict: str | None = None,
    proofs: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One row of ``releases``: the release (``package``, ``vllm``), the patchset the row is
    about and its verdict (None where there is none), this machine's proofs (``{}`` where there
    are none), then the command's own fields about the release."""
    return {
        "package": package,
        "vllm": vllm,
        "patchset": patchset,
        "verdict": None if verdict is None else str(verdict),
        "proofs": dict(proofs or {}),
        **fields,
    }


def text(data: Mapping[str, Any]) -> str:
    """A document as ``--format json`` prints it and ``--json FILE`` writes it."""
    return json.dumps(data, indent=2) + "\n"
