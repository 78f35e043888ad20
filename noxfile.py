"""Sessions are thin: each installs patcher and calls one of its commands."""

from __future__ import annotations

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


@nox.session
def bench(session: nox.Session) -> None:
    """Speed figures, each beside a baseline measured in the same run."""
    session.install("-e", ".", "wheel")
    session.run("python", "-m", "patcher.bench", *(session.posargs or ["--unpack-pack"]))
