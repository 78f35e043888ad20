"""The names of verify's CPU checks, which a patchset lists under ``verify``.

The probe that runs them (``patcher.verify.probe``) runs in a venv without patcher, so it keeps
its own table of them; a test holds the two to the same names.
"""

from __future__ import annotations

CHECKS = (
    "speculative-config",
    "eagle3-interface",
    "mm-image-token",
    "aux-hidden-states",
    "mla-drafter",
    "eagle3-backbone",
    "eagle3-model-type",
    "v2-nested-aux-ids",
    "pp-aux-relay",
)

MODEL_CHECKS = frozenset({"eagle3-backbone", "eagle3-model-type"})
"""Checks about the patchset's own model, which the probe is told with ``--model``."""

REPLICA_CHECKS = frozenset({"eagle3-model-type"})
"""Model checks that load the model's configs: the runner writes a replica of the causal-LM
class into the check's workdir (``REPLICA_DIR``) before the probe runs."""

REPLICA_DIR = "replica"
