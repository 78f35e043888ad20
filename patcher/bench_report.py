"""A ``nox -s bench`` run as data, and the measurements page's tables rendered from it.

The machine is shared and noisy, so a figure alone says little: each is kept with the baseline
measured beside it in the same run, their ratio, the run's date, versions, machine and the load
before and after each part. The docs hook renders the committed reports
(``docs/measurements/bench-*.json``) onto the measurements page, so no figure there is copied by
hand and the page cannot disagree with the run it names.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from patcher import __version__
from patcher.cache import atomic_write
from patcher.errors import PatcherError

SCHEMA = 1
"""The report's format; a report of another is refused, not half read."""

UNITS = ("s", "B", "tokens/s")

REPORT_GLOB = "bench-*.json"
REPORTS_FOLDER = "docs/bench"
"""Where the committed reports are, from the checkout's root (``nox -s bench`` writes there)."""
PAGE_MARKER = "<!-- bench-reports: from docs/bench/ -->"
"""Where on a docs page the reports' tables go."""


@dataclass(frozen=True)
class Figure:
    """One measured value beside the baseline measured with it (``baseline_value`` None: a
    figure that has no baseline of its own, such as a size read from another report)."""

    what: str
    value: float
    unit: str
    baseline: str
    baseline_value: float | None
    target: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.baseline_value:
            return None
        return self.value / self.baseline_value


@dataclass
class Part:
    """One part of the run (``codemods``, ``matrix``, ...), with the vLLM it measured and the
    load averages (1, 5, 15 minutes) when it began and ended."""

    name: str
    vllm: str
    load_before: list[float]
    load_after: list[float] = field(default_factory=list)
    seconds: float = 0.0
    """How long the part took, baselines and untimed preparation included."""
    figures: list[Figure] = field(default_factory=list)


@dataclass
class Machine:
    cores: int
    memory_bytes: int
    cpu: str
    system: str
    python: str


@dataclass
class BenchReport:
    date: str
    """UTC, ISO 8601, when the run began."""
    patcher: str
    commit: str
    """The checkout's commit the run was made from (``+dirty`` with local changes), or ``""``."""
    command: list[str]
    machine: Machine
    load_before: list[float]
    load_after: list[float] = field(default_factory=list)
    seconds: float = 0.0
    parts: list[Part] = field(default_factory=list)

    def to_json(self) -> str:
        data = {"schema": SCHEMA, **asdict(self)}
        for part, kept in zip(data["parts"], self.parts, strict=True):
            for figure, measured in zip(part["figures"], kept.figures, strict=True):
                figure["ratio"] = measured.ratio  # for readers of the JSON: derived, not read
        return json.dumps(data, indent=1) + "\n"


def load_averages() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def this_machine() -> Machine:
    return Machine(
        cores=os.cpu_count() or 0,
        memory_bytes=memory_bytes(),
        cpu=cpu_model(),
        system=f"{platform.system()} {platform.machine()}",
        python=f"{platform.python_implementation()} {platform.python_version()}",
    )


def memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()


def checkout_commit() -> str:
    """The commit of the checkout in the current folder (where nox runs), so a report names
    the code it measured; ``""`` outside one."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


class Recorder:
    """The report of a run being made: parts opened in turn, figures added to the open one."""

    def __init__(self, command: list[str]) -> None:
        self.started = time.monotonic()
        self.report = BenchReport(
            date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            patcher=__version__,
            commit=checkout_commit(),
            command=command,
            machine=this_machine(),
            load_before=load_averages(),
        )

    @contextmanager
    def part(self, name: str, vllm: str) -> Iterator[None]:
        part = Part(name, vllm, load_averages())
        self.report.parts.append(part)
        started = time.monotonic()
        try:
            yield
        finally:
            part.load_after = load_averages()
            part.seconds = round(time.monotonic() - started, 1)

    def add(self, figure: Figure) -> None:
        if figure.unit not in UNITS:
            raise ValueError(f"unit {figure.unit!r} is not one of {UNITS}")
        self.report.parts[-1].figures.append(figure)

    def finish(self) -> BenchReport:
        self.report.load_after = load_averages()
        self.report.seconds = round(time.monotonic() - self.started, 1)
        return self.report


def write_report(report: BenchReport, folder: Path) -> Path:
    """The report as ``folder/bench-DATE.json``, whole or not at all."""
    stamp = report.date.replace("-", "").replace(":", "")
    path = folder / f"bench-{stamp}.json"
    atomic_write(path, report.to_json().encode())
    return path


def read_report(path: Path) -> BenchReport:
    """A committed report, or one line naming the file and what is wrong with it."""
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA}")
        del data["schema"]
        parts = [
            Part(
                **{
                    **part,
                    "figures": [
                        Figure(**{k: v for k, v in f.items() if k != "ratio"})
                        for f in part["figures"]
                    ],
                }
            )
            for part in data.pop("parts")
        ]
        return BenchReport(**{**data, "machine": Machine(**data["machine"]), "parts": parts})
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise PatcherError(f"{path}: not a bench report ({error})") from error


def committed_reports(folder: Path) -> list[tuple[Path, BenchReport]]:
    """Every report in ``folder``, the newest first."""
    found = [(path, read_report(path)) for path in folder.glob(REPORT_GLOB)]
    return sorted(found, key=lambda pair: pair[1].date, reverse=True)


def value_text(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s" if value >= 1 else f"{value * 1e3:.3g} ms"
    if unit == "B":
        if value < 1e4:
            return f"{value:.0f} B"
        if value < 1e6:
            return f"{value / 1e3:.3g} kB"
        return f"{value / 1e6:.3g} MB" if value < 1e9 else f"{value / 1e9:.2f} GB"
    return f"{value:.1f} {unit}"


def ratio_text(ratio: float | None) -> str:
    """Three figures, whole numbers from 1000 up (``2526x``, not ``2.53e+03x``)."""
    if ratio is None:
        return ""
    return f"{ratio:.0f}x" if ratio >= 1000 else f"{ratio:.3g}x"


def load_text(load: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in load) if load else "?"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def report_markdown(path: str, report: BenchReport) -> str:
    """One report: what it ran on, then a table of its figures, part by part."""
    m = report.machine
    commit = f", commit `{report.commit}`" if report.commit else ""
    lines = [
        f"### {report.date.replace('T', ' ').removesuffix('Z')} UTC",
        "",
        f"patcher {report.patcher}{commit}; {m.cores} cores ({m.cpu}), "
        f"{m.memory_bytes / 2**30:.1f} GiB, {m.system}, {m.python}. Load averages "
        f"(1, 5, 15 min) {load_text(report.load_before)} before, "
        f"{load_text(report.load_after)} after; {report.seconds / 60:.0f} min in all. "
        f"`{' '.join(report.command)}`, into `{path}`.",
        "",
        "| part (its time) | vLLM | figure | value | baseline, same run | ratio | target "
        "| load, 1 min |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for part in report.parts:
        load = f"{load_text(part.load_before[:1])} to {load_text(part.load_after[:1])}"
        for figure in part.figures:
            baseline = figure.baseline
            if figure.baseline_value is not None:
                baseline += f" {value_text(figure.baseline_value, figure.unit)}"
            what = figure.what + (f" ({figure.note})" if figure.note else "")
            row = [
                f"{part.name} ({part.seconds:.0f} s)",
                part.vllm,
                what,
                value_text(figure.value, figure.unit),
                baseline,
                ratio_text(figure.ratio),
                figure.target,
                load,
            ]
            lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def reports_markdown(folder: Path, relative_to: Path) -> str:
    """Every committed report, the newest first, for the measurements page."""
    found = committed_reports(folder)
    if not found:
        return f"No bench report in `{folder.relative_to(relative_to)}` yet.\n"
    return "\n".join(
        report_markdown(str(path.relative_to(relative_to)), report) for path, report in found
    )


def with_bench_reports(page: str, root: Path) -> str:
    """A docs page with the reports' tables in place of its marker (a page without one as it
    is): what the docs hook serves, and what the tests read."""
    if PAGE_MARKER not in page:
        return page
    return page.replace(PAGE_MARKER, reports_markdown(root / REPORTS_FOLDER, root))
