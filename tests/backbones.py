"""The built-in backbone patchsets, read from ``patchsets/`` so a new one is tested everywhere
the others are without another list to keep."""

from __future__ import annotations

from patcher import patchset as patchsets


def backbone_patchsets() -> list[str]:
    """The built-in patchsets that give a causal-LM class the interface (eagle3-backbone)."""
    return [
        name
        for name in patchsets.available()
        if any(p.codemod == "eagle3-backbone" for p in patchsets.load(name).patches)
    ]
