"""The states an offline bundle carries: the patchset's chain run over the official wheel.

Each prefix of the patchset (none of it, its first patch, ..., all of it) is run by the engine
over the official wheel, so a bundle can put the patched files in any link of the chain: the
official bytes, each barrier in turn, and the whole patch.
"""

from __future__ import annotations

from pathlib import Path

from patcher.codemods.base import Verdict
from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.outputs.bundle import State
from patcher.patchset import Patchset
from patcher.sources.wheel import WheelSource

OFFICIAL = "official"
PATCHED = "patched"


def chain_states(
    patchset: Patchset, official: Path, sha256: str | None = None
) -> tuple[State, ...]:
    """``official``, ``first1`` ... and ``patched``: the bytes of every file the whole patchset
    changes, as each prefix leaves them."""
    count = len(patchset.patches)
    results = []
    with WheelSource(official, sha256) as source:
        for prefix in range(1, count + 1):
            result = run_patchset(patchset.prefix(prefix), source)
            if result.verdict != Verdict.NEEDS_PATCH:
                raise PatcherError(
                    f"{patchset.name}'s first {prefix} patch(es) on {official.name}: "
                    f"{result.verdict.value}, not needs-patch: no bundle of a patch that "
                    "does not apply"
                )
            results.append(result)
    whole = results[-1]
    originals = {path: whole.originals[path].encode() for path in whole.changed}
    states = [State(OFFICIAL, (), originals)]
    for prefix, result in enumerate(results, 1):
        files = {
            path: result.changed[path].encode() if path in result.changed else original
            for path, original in originals.items()
        }
        label = PATCHED if prefix == count else f"first{prefix}"
        states.append(State(label, tuple(patchset.patch_names[:prefix]), files))
    return tuple(states)
