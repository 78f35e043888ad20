"""Sessions are thin: each installs patcher and calls one of its commands."""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

DEFAULT_VLLM = "0.16.0"


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and real-release tests (releases are fetched from the index and cached)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff for style and bugs, mypy for the types."""
    session.install("-e", ".", "ruff", "mypy", "types-requests")
    session.run("ruff", "check", "patcher", "tests", "noxfile.py")
    session.run("mypy")


@nox.session
def matrix(session: nox.Session) -> None:
    """The compatibility matrix of every release since 0.8.0, as JSON and Markdown in reports/."""
    session.install("-e", ".")
    args = session.posargs or [
        "--since",
        "0.8.0",
        "--patchset",
        "kimi-k2.5-eagle3,kimi-k2.5-eagle3-mla,kimi-k2-eagle3",
        "--json",
        "reports/matrix.json",
        "--markdown",
        "reports/matrix.md",
    ]
    session.run("patcher", "matrix", *args)


@nox.session(name="build-wheel")
def build_wheel(session: nox.Session) -> None:
    """The main job: a patched vLLM wheel in dist/ (default: vLLM 0.16.0, kimi-k2.5-eagle3)."""
    session.install("-e", ".")
    session.run("patcher", "build-wheel", *(session.posargs or ["--vllm", DEFAULT_VLLM]))


VERIFY_RELEASES = ["0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0"]
"""kimi-k2.5-eagle3's needs-patch releases, and official 0.18.0 as the upstream reference.
tests/test_noxfile.py checks this list against the matrix."""

VERIFY_MLA_RELEASES = ["0.18.0", "0.33.0"]
"""kimi-k2.5-eagle3-mla: the first and the newest release with the MLA drafter."""


@nox.session
@nox.parametrize("vllm", VERIFY_RELEASES)
def verify(session: nox.Session, vllm: str) -> None:
    """Each barrier before and after, running vLLM's own code from the wheels on CPU."""
    session.install("-e", ".")
    session.run("patcher", "verify", "--vllm", vllm, "--json", f"reports/verify/{vllm}.json")


@nox.session(name="verify-mla")
@nox.parametrize("vllm", VERIFY_MLA_RELEASES)
def verify_mla(session: nox.Session, vllm: str) -> None:
    """The MLA drafter's detection before and after, on CPU."""
    session.install("-e", ".")
    session.run(
        "patcher",
        "verify",
        "--vllm",
        vllm,
        "--patchset",
        "kimi-k2.5-eagle3-mla",
        "--json",
        f"reports/verify/mla-{vllm}.json",
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Speed figures, each beside a baseline measured in the same run."""
    session.install("-e", ".", "wheel")
    session.run("python", "-m", "patcher.bench", *(session.posargs or ["--unpack-pack"]))


GPU_BENCH_PATCHSETS = {
    "0.16.0": "kimi-k2.5-eagle3",
    "0.17.1": "kimi-k2.5-eagle3",
    "0.18.0": None,  # upstream supports it: the official wheel is the reference
    "0.33.0": "kimi-k2.5-eagle3-mla",
}
"""The vLLM releases gpu-bench serves, each with the patchset its wheel is built with."""


@nox.session(name="gpu-bench", default=False, tags=["gpu"])
@nox.parametrize("vllm", list(GPU_BENCH_PATCHSETS))
def gpu_bench(session: nox.Session, vllm: str) -> None:
    """Kimi-K2.5 with EAGLE-3 against itself without, on 8 GPUs: speedup and acceptance.

    nox -s "gpu-bench(vllm='0.16.0')" -- --model /path/kimi-k2.5 --drafter /path/eagle3
    """
    if not session.posargs:
        session.error("after --, pass at least --model PATH --drafter PATH")
    session.install("-e", ".")
    patchset = GPU_BENCH_PATCHSETS[vllm]
    if patchset is None:
        session.install(f"vllm=={vllm}")
    else:
        dist = Path(session.create_tmp()) / f"dist-{vllm}"
        shutil.rmtree(dist, ignore_errors=True)
        session.run(
            "patcher", "build-wheel", "--vllm", vllm, "--patchset", patchset, "--dist", str(dist)
        )
        (wheel,) = dist.glob("*.whl")
        session.install(str(wheel))  # with its dependencies: torch, the CUDA libraries, ...
    session.run(
        "patcher",
        "serve-bench",
        "--log-dir",
        f"reports/serve-bench/vllm-{vllm}",
        "--json",
        f"reports/serve-bench/vllm-{vllm}.json",
        *session.posargs,
    )
