"""The barrier chain: a patchset's prefixes served in turn, each stopping at the next barrier.

A patchset that a model needs several patches for is a chain of barriers: the official wheel
dies at the first, a wheel of the first patch at the second, and so on, and the whole patchset
serves. The patchset declares each barrier in vLLM's words (``[serve]`` ``official_refuses``
and ``prefixes_refuse``); this builds a wheel of each prefix through the normal build path
(``run_patchset`` and ``patched_wheel``, on the CPU harness where the release needs it), and
judges what the real servers said against the declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patcher.engine import run_patchset
from patcher.errors import PatcherError
from patcher.patchset import Patchset
from patcher.result import PatchResult
from patcher.serving.cpu import OFFICIAL_LABEL, PATCHED_LABEL, CpuReport, RunResult
from patcher.serving.harness import Harnessed
from patcher.sources.wheel import WheelSource


@dataclass(frozen=True)
class Link:
    """One wheel of the chain: the patchset's first ``count`` patches, and what it must do."""

    label: str
    """The run's label; the official and the whole patchset's keep serve-bench's own."""
    count: int
    patches: tuple[str, ...]
    refuses: str | None
    """vLLM's words this wheel must die with; None: it must serve with drafts."""


def chain_links(patchset: Patchset) -> list[Link]:
    """The official wheel, each prefix with a declared barrier, then the whole patchset."""
    serve = patchset.serve
    if serve is None or not serve.prefixes_refuse:
        raise PatcherError(
            f"patchset {patchset.name} declares no barrier chain ([serve] prefixes_refuse)"
        )
    barriers = (serve.official_refuses, *serve.prefixes_refuse)
    if len(barriers) > len(patchset.patches):
        raise PatcherError(
            f"patchset {patchset.name} declares {len(barriers)} barriers for "
            f"{len(patchset.patches)} patches: each patch passes one at most"
        )
    names = tuple(patchset.patch_names)
    links = [
        Link(OFFICIAL_LABEL if count == 0 else f"first{count}+eagle3", count, names[:count], said)
        for count, said in enumerate(barriers)
    ]
    return [*links, Link(PATCHED_LABEL, len(names), names, None)]


def chain_wheels(
    base: Harnessed,
    patchset: Patchset,
    links: Sequence[Link],
    check: Callable[[PatchResult], None],
) -> list[Path]:
    """Each link's wheel, built as build-wheel builds one (cached by its patched texts), on the
    harness: the official wheel on the harness for the empty prefix. ``check`` sees each
    prefix's run first and raises where a patch failed."""
    wheels = []
    for link in links:
        if link.count == 0:
            wheels.append(base.wheel())
            continue
        prefix = patchset.prefix(link.count)
        with WheelSource(base.official, base.sha256) as source:
            result = run_patchset(prefix, source)
        check(result)
        wheel, on_top = base.patched(prefix, result)
        check(on_top)
        wheels.append(wheel)
    return wheels


@dataclass(frozen=True)
class ChainStep:
    link: Link
    wheel: str
    outcome: str
    """``served`` or ``died``."""
    said: str | None
    """vLLM's root-cause line where the server died."""
    drafts: float | None
    problem: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.link.label,
            "patches": list(self.link.patches),
            "wheel": self.wheel,
            "expected": self.link.refuses or "serves with drafts",
            "outcome": self.outcome,
            "vllm_said": self.said,
            "drafts": self.drafts,
            "passed": self.problem is None,
            **({"problem": self.problem} if self.problem else {}),
        }


def judged(link: Link, result: RunResult) -> ChainStep:
    """One link against its run: dead in the declared words, or serving with drafts."""
    wheel = result.plan.venv.wheel.name
    if result.error is not None:
        said = result.barrier or result.error
        if link.refuses is None:
            problem = f"{link.label} did not serve: {said}"
        elif link.refuses in said:
            problem = None
        else:
            problem = f"{link.label} died saying {said!r}, not {link.refuses!r}"
        return ChainStep(link, wheel, "died", said, None, problem)
    drafts = result.spec_decode.drafts if result.spec_decode else 0.0
    if link.refuses is not None:
        problem = f"{link.label} served, but must die saying {link.refuses!r}"
    elif drafts <= 0:
        problem = f"{link.label} served without a single draft"
    else:
        problem = None
    return ChainStep(link, wheel, "served", None, drafts, problem)


@dataclass(frozen=True)
class BarrierChain:
    steps: tuple[ChainStep, ...]

    @property
    def passed(self) -> bool:
        return all(step.problem is None for step in self.steps)

    @property
    def problems(self) -> list[str]:
        return [step.problem for step in self.steps if step.problem is not None]

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "steps": [step.to_json() for step in self.steps]}


def judge_chain(links: Sequence[Link], report: CpuReport) -> BarrierChain:
    """Each link against the run of its label in ``report``."""
    runs = {result.plan.label: result for result in report.results}
    missing = [link.label for link in links if link.label not in runs]
    if missing:
        raise PatcherError(f"the barrier chain has no run for {', '.join(missing)}")
    return BarrierChain(tuple(judged(link, runs[link.label]) for link in links))
