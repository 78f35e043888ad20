"""What a benchmark found, as JSON: both runs and the drafter's acceptance."""

from __future__ import annotations

import json
from dataclasses import dataclass

from patcher.serving.load import Load, ServerRun
from patcher.serving.metrics import SpecDecodeCounters
from patcher.serving.setup import ServeSetup


@dataclass(frozen=True)
class BenchReport:
    vllm_version: str | None
    setup: ServeSetup
    load: Load
    commands: dict[str, list[str]]
    eagle3: ServerRun
    baseline: ServerRun
    spec_decode: SpecDecodeCounters

    @property
    def speedup(self) -> float:
        """Output tokens per second with EAGLE-3 over without."""
        return self.eagle3.tokens_per_second / self.baseline.tokens_per_second

    @property
    def identical_outputs(self) -> int:
        """Greedy answers that came out the same; speculation should not change them."""
        return sum(a == b for a, b in zip(self.eagle3.outputs, self.baseline.outputs, strict=True))

    def to_json(self) -> str:
        spec = self.spec_decode
        return json.dumps(
            {
                "vllm_version": self.vllm_version,
                "model": self.setup.model,
                "drafter": self.setup.drafter,
                "method": self.setup.method,
                "tensor_parallel_size": self.setup.tensor_parallel_size,
                "num_speculative_tokens": self.setup.num_speculative_tokens,
                "trust_remote_code": self.setup.trust_remote_code,
                "load": self.load.to_json(),
                "commands": self.commands,
                "eagle3": self.eagle3.summary(),
                "baseline": self.baseline.summary(),
                "spec_decode": {
                    "drafts": spec.drafts,
                    "draft_tokens": spec.draft_tokens,
                    "accepted_tokens": spec.accepted_tokens,
                    "acceptance_rate": round(spec.acceptance_rate, 4),
                    "mean_acceptance_length": round(spec.mean_acceptance_length, 3),
                    "per_position_acceptance": [
                        round(rate, 4) for rate in spec.per_position_acceptance
                    ],
                },
                "speedup": round(self.speedup, 3),
                "identical_outputs": self.identical_outputs,
            },
            indent=2,
        )
