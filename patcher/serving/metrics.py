"""vLLM's Prometheus page: the spec-decode counters, summed over engines."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import requests

from patcher.errors import PatcherError

METRICS_SETTLE_READS = 10

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclass(frozen=True)
class SpecDecodeCounters:
    """vLLM's cumulative spec-decode counters, summed over engines."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...] = ()

    def minus(self, before: SpecDecodeCounters) -> SpecDecodeCounters:
        """What the load added: the counters also hold the warm-up request."""
        earlier = before.accepted_per_position
        return SpecDecodeCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted_tokens - before.accepted_tokens,
            tuple(
                value - (earlier[i] if i < len(earlier) else 0.0)
                for i, value in enumerate(self.accepted_per_position)
            ),
        )

    @property
    def acceptance_rate(self) -> float:
        """Accepted over proposed draft tokens."""
        return self.accepted_tokens / self.draft_tokens

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per target forward pass: the accepted ones plus the one the target adds."""
        return 1 + self.accepted_tokens / self.drafts

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        return tuple(accepted / self.drafts for accepted in self.accepted_per_position)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


SAMPLE_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r'(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<value>\S+)"
)
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[Sample]:
    """The samples of Prometheus' text format; comments and lines it cannot read are skipped."""
    samples = []
    for line in text.splitlines():
        match = SAMPLE_LINE.match(line.strip())
        if match is None:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = dict(LABEL.findall(match["labels"] or ""))
        samples.append(Sample(match["name"], labels, value))
    return samples


def counter_samples(samples: list[Sample], name: str) -> list[Sample]:
    """A counter's samples: ``name_total`` as prometheus_client exposes it, else bare ``name``."""
    for exposed in (f"{name}_total", name):
        found = [sample for sample in samples if sample.name == exposed]
        if found:
            return found
    return []


def spec_decode_counters(text: str) -> SpecDecodeCounters | None:
    """The counters in a /metrics page; None if it has none (a server not speculating)."""
    samples = parse_prometheus(text)
    totals = {
        name: counter_samples(samples, name) for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS)
    }
    missing = [name for name, found in totals.items() if not found]
    if len(missing) == len(totals):
        return None
    if missing:
        raise PatcherError(f"/metrics lacks {', '.join(missing)} beside the other spec counters")
    by_position: dict[int, float] = {}
    for sample in counter_samples(samples, ACCEPTED_PER_POSITION):
        position = int(sample.labels.get("position", "0"))
        by_position[position] = by_position.get(position, 0.0) + sample.value
    return SpecDecodeCounters(
        drafts=sum(sample.value for sample in totals[DRAFTS]),
        draft_tokens=sum(sample.value for sample in totals[DRAFT_TOKENS]),
        accepted_tokens=sum(sample.value for sample in totals[ACCEPTED_TOKENS]),
        accepted_per_position=tuple(by_position[p] for p in sorted(by_position)),
    )


def read_counters(base_url: str) -> SpecDecodeCounters | None:
    try:
        answer = requests.get(f"{base_url}/metrics", timeout=30)
    except requests.RequestException as error:
        raise PatcherError(f"GET /metrics: {type(error).__name__}: {error}") from error
    if answer.status_code != 200:
        raise PatcherError(f"GET /metrics: HTTP {answer.status_code}")
    return spec_decode_counters(answer.text)


def settled_counters(base_url: str, pause: float) -> SpecDecodeCounters | None:
    """Read until two reads agree: the last step's stats may land just after its answer."""
    latest = read_counters(base_url)
    for _ in range(METRICS_SETTLE_READS):
        time.sleep(pause)
        again = read_counters(base_url)
        if again == latest:
            break
        latest = again
    return latest


def load_delta(
    before: SpecDecodeCounters | None, after: SpecDecodeCounters | None
) -> SpecDecodeCounters:
    """What the load added; counters that appeared only during the load count from zero."""
    if after is None:
        raise PatcherError(
            f"the EAGLE-3 server's /metrics has no {DRAFTS}_total: it is not speculating"
        )
    delta = after.minus(before or SpecDecodeCounters(0.0, 0.0, 0.0))
    if delta.drafts <= 0 or delta.draft_tokens <= 0:
        raise PatcherError("the EAGLE-3 server proposed no draft tokens during the load")
    return delta
