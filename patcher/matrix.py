"""The compatibility matrix: every release on the index, each patch's status, a verdict."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from packaging.version import Version

from patcher import results_cache
from patcher.cache import atomic_write
from patcher.codemods.base import Outcome
from patcher.engine import run_patchset, verdict_of
from patcher.errors import PatcherError
from patcher.index import PackageIndex, Release
from patcher.patchset import Patchset
from patcher.sources.index_wheel import IndexWheelSource

PARALLEL_RELEASES = 8


@dataclass
class Row:
    version: Version
    outcomes: dict[str, Outcome]
    expected: str | None
    bytes_fetched: int = 0
    wheel_size: int = 0
    verified: str | None = None

    @property
    def verdict(self) -> str:
        return verdict_of([o.status for o in self.outcomes.values()])

    @property
    def drift(self) -> bool:
        return self.expected is not None and self.expected != self.verdict

    def to_json(self) -> dict:
        data: dict[str, object] = {
            "vllm": str(self.version),
            "verdict": self.verdict,
            "patches": {name: o.status.value for name, o in self.outcomes.items()},
        }
        if self.expected is not None:
            data["expected"] = self.expected
            data["drift"] = self.drift
        if self.verified is not None:
            data["verified"] = self.verified
        return data


def evaluate(patchset: Patchset, index: PackageIndex, release: Release, arch: str) -> Row:
    """One row: from cached outcomes if this wheel was seen before, else from its code."""
    wheel = release.wheel_for(arch) or (release.wheels[0] if release.wheels else None)
    if wheel is None:
        raise PatcherError(f"vllm {release.version} has no wheel on the index")
    source = IndexWheelSource(release, wheel, index.client)
    outcomes = results_cache.load(patchset.digest, source.identity)
    if outcomes is None:
        outcomes = run_patchset(patchset, source).outcomes
        results_cache.store(patchset.digest, source.identity, outcomes)
    return Row(
        release.version,
        outcomes,
        patchset.expected(release.version),
        source.bytes_fetched,
        wheel.size or 0,
    )


def build_matrix(
    patchset: Patchset,
    index: PackageIndex,
    releases: Sequence[Release],
    arch: str,
    on_row: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Rows for ``releases``, fetched side by side, in version order."""
    with ThreadPoolExecutor(PARALLEL_RELEASES) as pool:
        futures = [pool.submit(evaluate, patchset, index, r, arch) for r in releases]
        rows = []
        for future in futures:
            row = future.result()
            if on_row:
                on_row(row)
            rows.append(row)
    return rows


def select_releases(
    index: PackageIndex, versions: Sequence[str] | None, since: str | None
) -> list[Release]:
    if versions:
        return [index.release(v) for v in versions]
    return list(index.iter_since(Version(since) if since else None))


def write_json(rows: Sequence[Row], path) -> None:
    atomic_write(path, (json.dumps([r.to_json() for r in rows], indent=2) + "\n").encode())


def markdown(patchsets_rows: Mapping[str, Sequence[Row]]) -> str:
    """A Markdown report with one table per patchset."""
    lines = ["# vLLM compatibility matrix", ""]
    for name, rows in patchsets_rows.items():
        patches = list(rows[0].outcomes) if rows else []
        verified = any(r.verified for r in rows)
        header = ["vLLM", *patches, "verdict", "expected"] + (["verified"] if verified else [])
        lines += [f"## `{name}`", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in rows:
            cells = [
                str(row.version),
                *(row.outcomes[p].status.value for p in patches),
                row.verdict + (" (drift)" if row.drift else ""),
                row.expected or "",
            ]
            if verified:
                cells.append(row.verified or "")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
